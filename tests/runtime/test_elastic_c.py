"""horovodrun's elastic mode with C ranks (tests/runtime/elasticrank.c),
which also run under the sanitizers: a rank killed on one of two hosts
(the host is blacklisted, the survivors reset and finish at the smaller
size); hosts added by the discovery script while the job runs (one more
slot on a host whose agent runs, which gets the new rank in a RANKS
message, and a new host with an agent of its own); and 50 resets in a
row that leave no descriptor or thread behind."""

import os
import re
import signal
import unittest

import hvdtest

ELASTICRANK = os.environ["HVD_ELASTICRANK"]
DONE_RE = re.compile(r"elasticrank: start (\d+) rank (\d+) of (\d+): (\d+) "
                     r"steps, (\d+) resets, gen (\d+); descriptors (\d+) -> "
                     r"(\d+), threads (\d+) -> (\d+)")
UNDER_TSAN = os.environ.get("HVD_TEST_TSAN") == "1"


class ElasticCTest(hvdtest.TestCase):

    def done(self, r):
        """{start rank: (rank, size, steps, resets, fds, fds after,
        threads, threads after)} of the ranks that finished."""
        got = {}
        for line in r.out_lines:
            m = DONE_RE.search(line)
            if m:
                v = [int(x) for x in m.groups()]
                got[v[0]] = (v[1], v[2], v[3], v[4], v[6], v[7], v[8], v[9])
        return got

    def test_rank_killed_on_one_of_two_hosts(self):
        r = self.run_hr("-np", "4", "--min-np", "2", "-H",
                        "localhost:2,127.0.0.1:2", ELASTICRANK, "300",
                        ER_FAIL="3:20:kill", ER_STEP_MS="2", timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        got = self.done(r)
        self.assertEqual(sorted(got), [0, 1], r.describe())
        for start, (rank, size, steps, resets, *_rest) in got.items():
            self.assertEqual((rank, size, steps, resets),
                             (start, 2, 300, 1), r.describe())
        self.assertIn("host 127.0.0.1 is blacklisted", r.err, r.describe())
        self.assertIn("was killed by signal 9", r.err, r.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_prefix_names_the_current_rank(self):
        # Rank 0 dies: localhost is blacklisted, and the processes that
        # started as ranks 2 and 3 are ranks 0 and 1 now, in their prefix
        # and in their --output-filename folder too.
        out = os.path.join(self.tmp, "out")
        r = self.run_hr("-np", "4", "--min-np", "2", "-H",
                        "localhost:2,127.0.0.1:2", "--output-filename", out,
                        ELASTICRANK, "300", ER_FAIL="0:20:kill",
                        ER_STEP_MS="2", timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        for start, rank in ((2, 0), (3, 1)):
            line = ("[%d,%d]<stdout>:elasticrank: start %d rank %d of 2: "
                    "300 steps" % (rank, rank % 2, start, rank))
            self.assertIn(line, r.out, r.describe())
            with open(os.path.join(out, "rank.%d" % rank, "stdout")) as f:
                self.assertIn(line.split(">:", 1)[1], f.read())

    def test_output_ranks_and_files(self):
        out = os.path.join(self.tmp, "out")
        r = self.run_hr("-np", "4", "--min-np", "2", "-H",
                        "localhost:2,127.0.0.1:2", "--output-ranks", "1,3",
                        "--output-filename", out, "sh", "-c",
                        "echo hi from $HOROVOD_RANK")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(sorted(r.out_lines),
                         ["[1,1]<stdout>:hi from 1",
                          "[3,1]<stdout>:hi from 3"], r.describe())
        for rank in range(4):
            with open(os.path.join(out, "rank.%d" % rank, "stdout")) as f:
                self.assertEqual(f.read(), "hi from %d\n" % rank)

    def test_hosts_added_while_running(self):
        flag = os.path.join(self.tmp, "more")
        script = os.path.join(self.tmp, "hosts.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nif [ -e %s ]; then\n  echo localhost:3\n"
                    "  echo 127.0.0.1:1\nelse\n  echo localhost:2\nfi\n"
                    % flag)
        os.chmod(script, 0o755)
        r = self.run_hr("-np", "2", "--min-np", "2", "--max-np", "4",
                        "--host-discovery-script", script, ELASTICRANK, "400",
                        ER_FLAG="%s:20" % flag, ER_STEP_MS="10",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1",
                        timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        got = self.done(r)
        # The first two ranks keep theirs; the new processes started as
        # ranks 2 (localhost, a RANKS message) and 3 (a new agent).
        self.assertEqual(sorted(got), [0, 1, 2, 3], r.describe())
        for start, (rank, size, steps, resets, *_rest) in got.items():
            self.assertEqual((rank, size, steps), (start, 4, 400),
                             r.describe())
            self.assertEqual(resets, 1 if start < 2 else 0, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        self.assertEqual(sorted(per), [0, 1, 2, 3], r.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_blacklisted_host_of_a_fixed_set_back_after_cooldown(self):
        # -H without a script: 127.0.0.1 is out for 1 s after a rank there
        # dies, then comes back (seen at the next interval), and the job
        # grows to 4 ranks again with two new processes.
        r = self.run_hr("-np", "4", "--min-np", "2", "-H",
                        "localhost:2,127.0.0.1:2",
                        "--blacklist-cooldown-range", "1", "1", ELASTICRANK,
                        "600", ER_FAIL="2:20:kill", ER_STEP_MS="10",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1",
                        timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        got = self.done(r)
        self.assertEqual(len(got), 4, r.describe())
        for start, (rank, size, steps, *_rest) in got.items():
            self.assertEqual((size, steps), (4, 600), r.describe())
        self.assertIn("host 127.0.0.1 is blacklisted for 1 s", r.err,
                      r.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_interrupt_ends_the_job_without_resets(self):
        job = self.start_hr("-np", "4", "--min-np", "2", "-H",
                            "localhost:2,127.0.0.1:2", ELASTICRANK, "100000",
                            ER_STEP_MS="5")
        job.wait_line(lambda l: "ready" in l, count=4, timeout=30)
        job.signal(signal.SIGINT)
        self.assertEqual(job.wait(30), 128 + signal.SIGINT, job.describe())
        self.assertIn("interrupted by SIGINT", job.err, job.describe())
        self.assertNotIn("blacklisted", job.err, job.describe())
        self.assertNotIn("the others reset", job.err, job.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_detached_job(self):
        # --detach: ps lists the job, logs show each line under the rank
        # its process had then, and horovodrun's own lines (the reset).
        xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(xdg, 0o700)
        env = self.env(XDG_RUNTIME_DIR=xdg, ER_FAIL="0:20:kill",
                       ER_STEP_MS="2")
        r = hvdtest.run(hvdtest.hr_args(
            "--detach", "-np", "4", "--min-np", "2", "-H",
            "localhost:2,127.0.0.1:2", ELASTICRANK, "300"), env=env,
            cwd=self.tmp)
        self.assertEqual(r.rc, 0, r.describe())
        job = r.out.strip()

        def state():
            ps = hvdtest.run(hvdtest.hr_args("ps"), env=env)
            for line in ps.out_lines[1:]:
                f = line.split()
                if f[0] == job:
                    return f[1:4]
            return None
        st = hvdtest.wait_until(
            lambda: (lambda s: s if s and s[0] != "running" else None)(
                state()), 60, 0.2)
        # "exited 0", then the -np it started with.
        self.assertEqual(st, ["exited", "0", "4"], st)
        logs = hvdtest.run(hvdtest.hr_args("logs", job), env=env)
        self.assertEqual(logs.rc, 0, logs.describe())
        for start, rank in ((2, 0), (3, 1)):
            self.assertIn("[%d,%d]<stdout>:elasticrank: start %d rank %d of "
                          "2: 300 steps" % (rank, rank % 2, start, rank),
                          logs.out, logs.describe())
        self.assertIn("host localhost is blacklisted", logs.out + logs.err,
                      logs.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_hosts_beyond_max_np_get_no_agent(self):
        script = os.path.join(self.tmp, "hosts.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho localhost:2\necho 127.0.0.1:2\n")
        os.chmod(script, 0o755)
        r = self.run_hr("--verbose", "-np", "2", "--min-np", "2",
                        "--max-np", "2", "--host-discovery-script", script,
                        ELASTICRANK, "100", ER_STEP_MS="5",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")
        self.assertEqual(r.rc, 0, r.describe())
        started = re.findall(r"host (\S+): started hvd-agent", r.err)
        self.assertEqual(started, ["localhost"], r.describe())
        self.assertEqual(sorted(self.done(r)), [0, 1], r.describe())

    def script(self, body):
        path = os.path.join(self.tmp, "hosts.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        return path

    def test_discovery_failing_first_ends_the_job(self):
        path = self.script("echo 'no hosts: boom' >&2\nexit 3\n")
        r = self.run_hr("-np", "2", "--host-discovery-script", path,
                        ELASTICRANK, "10")
        self.assertEqual(r.rc, 2, r.describe())
        self.assertEqual(r.error_lines(),
                         ["horovodrun: error: elastic: host discovery script "
                          "'%s' exited with status 3: no hosts: boom" % path],
                         r.describe())
        self.assertEqual(self.done(r), {}, r.describe())

    def test_too_few_slots_at_the_start(self):
        path = self.script("echo localhost:1\n")
        r = self.run_hr("-np", "2", "--host-discovery-script", path,
                        "--elastic-timeout", "1", ELASTICRANK, "10")
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("elastic: fewer than 2 slots were available for 1 s "
                      "(--elastic-timeout)", r.err, r.describe())
        self.assertEqual(self.done(r), {}, r.describe())

    def test_discovery_failing_later_is_logged_capped_and_retried(self):
        # Bare host names take --slots-per-host; after its first run the
        # script fails every time: the job goes on with the last hosts,
        # and only the first 5 failures are shown.
        count = os.path.join(self.tmp, "runs")
        path = self.script("echo x >> %s\n[ $(wc -l < %s) -gt 1 ] && "
                           "exit 1\necho localhost\n" % (count, count))
        r = self.run_hr("-np", "2", "--min-np", "2", "--slots-per-host",
                        "2", "--host-discovery-script", path, ELASTICRANK,
                        "300", ER_STEP_MS="5",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.05")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(sorted(self.done(r)), [0, 1], r.describe())
        with open(count) as f:
            runs = len(f.readlines())
        failed = [l for l in r.warning_lines()
                  if "exited with status 1" in l]
        self.assertGreater(runs, 8, r.describe())
        self.assertEqual(len(failed), 5, r.describe())

    def test_fifty_resets_leave_nothing(self):
        r = self.run_hr("-np", "2", "--min-np", "2", "-H", "localhost:2",
                        ELASTICRANK, "200", ER_RESET_EVERY="4", timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        got = self.done(r)
        self.assertEqual(sorted(got), [0, 1], r.describe())
        for start, (rank, size, steps, resets, fds, fds_after, threads,
                    threads_after) in got.items():
            self.assertEqual((rank, size, steps, resets),
                             (start, 2, 200, 49), r.describe())
            self.assertEqual(fds_after, fds, r.describe())
            # ThreadSanitizer keeps a thread of its own once one started.
            self.assertEqual(threads_after, threads + (1 if UNDER_TSAN
                                                       else 0), r.describe())


if __name__ == "__main__":
    unittest.main()
