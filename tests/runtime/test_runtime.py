"""Integration tests of libhvd under horovodrun: collectives, failures,
authentication and start-up timeouts (tests/runtime/collcheck.c)."""

import json
import os
import re
import tempfile
import subprocess
import sys
import time
import unittest

HR = os.environ["HVD_HOROVODRUN"]
CHECK = os.environ["HVD_COLLCHECK"]
NEG = os.environ["HVD_NEGCHECK"]
PSET = os.environ["HVD_PSETCHECK"]
STALL = os.environ["HVD_STALLCHECK"]
LINEBUF = os.environ["HVD_LINEBUF"]
TLCHECK = os.environ["HVD_TLCHECK"]

# A client that connects to the rendezvous server with a wrong secret.
BOGUS = r'''
import os, socket, struct
s = socket.create_connection((os.environ["HOROVOD_RENDEZVOUS_ADDR"],
                              int(os.environ["HOROVOD_RENDEZVOUS_PORT"])))
hdr = s.recv(8)
assert hdr[:2] == b"HV", hdr
body = s.recv(struct.unpack(">I", hdr[4:])[0])
name = b"x"
payload = (struct.pack(">II", 0, int(os.environ["HOROVOD_SIZE"]))
           + os.urandom(32) + struct.pack(">I", 1) + name
           + struct.pack(">I", 9) + b"127.0.0.1" + struct.pack(">I", 4242)
           + os.urandom(32))
s.sendall(b"HV\x01\x02" + struct.pack(">I", len(payload)) + payload)
reply = s.recv(65536)
print("bogus client got frame type", reply[3] if len(reply) > 3 else None)
'''


def run(args, timeout=240, env=None):
    start = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    return p, time.monotonic() - start


class RuntimeTest(unittest.TestCase):

    def assertAllRanksPass(self, out, np):
        done = re.findall(r"collcheck: rank (\d+) of (\d+): (\d+) checks, "
                          r"(\d+) failures", out)
        self.assertEqual(sorted(int(r) for r, _, _, _ in done),
                         list(range(np)), out[-3000:])
        for _, size, checks, failures in done:
            self.assertEqual(int(size), np)
            self.assertGreater(int(checks), 150)
            self.assertEqual(int(failures), 0, out[-3000:])

    def test_without_horovodrun_is_a_job_of_one(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HOROVOD_")}
        p, _ = run([CHECK], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertAllRanksPass(p.stdout, 1)

    def test_np_1_to_5(self):
        for np in range(1, 6):
            with self.subTest(np=np):
                p, _ = run([HR, "-np", str(np), CHECK])
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertAllRanksPass(p.stdout, np)
                self.assertEqual(p.stderr, "")

    def test_named_async_collectives(self):
        for np in (1, 2, 4):
            with self.subTest(np=np):
                p, took = run([HR, "-np", str(np), NEG], timeout=120)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                done = re.findall(r"negcheck: rank (\d+) of %d: 0 failures"
                                  % np, p.stdout)
                self.assertEqual(sorted(map(int, done)), list(range(np)),
                                 p.stdout)
                if np > 1:
                    # The mismatch is reported on every rank, both sides
                    # named (rank 0 and the odd one out, whatever order
                    # they asked in), and the job went on.
                    want = (r"Mismatched allreduce tensor sizes: rank 0 "
                            r"sent 64 elements, rank %d sent 32 for tensor "
                            r"'mm.count'" % (np - 1))
                    self.assertEqual(len(re.findall(want, p.stdout)), np,
                                     p.stdout)

    def test_process_sets_and_join(self):
        # Odd sizes leave a set of one; the TCP ring and shared memory
        # carry the stand-ins alike.
        for np, shm in ((2, "0"), (3, "0"), (4, "0"), (5, "1")):
            with self.subTest(np=np, shm_disabled=shm):
                env = dict(os.environ, HOROVOD_SHM_DISABLE=shm)
                p, _ = run([HR, "-np", str(np), PSET], timeout=120, env=env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                done = re.findall(r"psetcheck: rank (\d+) of %d: (\d+) "
                                  r"checks, 0 failures" % np, p.stdout)
                self.assertEqual(sorted(int(r) for r, _ in done),
                                 list(range(np)), p.stdout + p.stderr)
                self.assertTrue(all(int(c) > 30 for _, c in done), done)

    def test_fusion_changes_no_bit(self):
        hashes = {}
        for threshold in ("0", "134217728", "65536"):
            env = dict(os.environ, HOROVOD_FUSION_THRESHOLD=threshold)
            p, _ = run([HR, "-np", "3", NEG], env=env)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            got = set(re.findall(r"fusion hash ([0-9a-f]{16})", p.stdout))
            self.assertEqual(len(got), 1, "ranks disagree: %s" % p.stdout)
            hashes[threshold] = got.pop()
        self.assertEqual(len(set(hashes.values())), 1, hashes)

    def test_stalled_rank_is_named_and_can_end_the_wait(self):
        p, took = run([HR, "-np", "3", "--stall-check-warning-time-seconds",
                       "1", "--stall-check-shutdown-time-seconds", "3",
                       STALL], timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stderr, r"\[0,0\]<stderr>:hvd: warning: stall: .*"
                         r"rank 1: \[stuck\.[ab], stuck\.[ab]\]")
        for r in (0, 2):
            self.assertIn("rank %d: stuck.a: HVD_ETIMEDOUT: allreduce "
                          "'stuck.a': stalled: rank 1 did not submit tensor "
                          "'stuck.a' within 3 s" % r, p.stdout)
        for r in range(3):
            self.assertIn("stallcheck: rank %d: ok" % r, p.stdout)
        # A rank that is only late: the warning, then success; with the
        # inspector off, not even the warning.
        for off in (False, True):
            args = ["--no-stall-check"] if off else []
            p, _ = run([HR, "-np", "2", "--stall-check-warning-time-seconds",
                        "1"] + args + [STALL, "late"], timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual("hvd: warning: stall" in p.stderr, not off,
                             p.stderr)

    def test_timeline(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "timeline.json")
            p, _ = run([HR, "-np", "2", "--timeline-filename", path,
                        "--timeline-mark-cycles", NEG])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(path) as f:
                events = json.load(f)
            names = {e["args"]["name"] for e in events if e["ph"] == "M"}
            self.assertIn("grad.0", names)
            self.assertIn("fuse.11", names)
            phases = {e["name"] for e in events if e["ph"] == "X"}
            self.assertTrue({"QUEUE", "NEGOTIATE", "ALLREDUCE", "BARRIER"}
                            <= phases, phases)
            self.assertTrue(any(e["name"] == "CYCLE_START" for e in events))
            fused = [e for e in events if e["name"] == "ALLREDUCE" and
                     e["args"]["fused_with"] > 0]
            self.assertTrue(fused, "no fused allreduce in the timeline")
            # Rank 0 killed in the middle of its work: the file still
            # parses.
            p, _ = run([HR, "-np", "2", "--timeline-filename", path, CHECK,
                        "--die-rank", "0"], timeout=120)
            self.assertEqual(p.returncode, 137, p.stdout + p.stderr)
            with open(path) as f:
                events = json.load(f)
            # (How many 'big' allreduces made it in depends on speed.)
            self.assertIsInstance(events, list)

    def tlcheck(self, args, np, env=None):
        """Runs tlcheck; returns the transport each rank named."""
        p, _ = run(args, env=env, timeout=120)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        done = re.findall(r"tlcheck: rank (\d+) of (\d+): \d+ checks, "
                          r"0 failures", p.stdout)
        self.assertEqual(sorted(int(r) for r, _ in done), list(range(np)),
                         out[-3000:])
        return dict((int(r), t) for r, t in
                    re.findall(r"tlcheck: rank (\d+) transport (\S+)",
                               p.stdout))

    def test_timeline_started_and_stopped_at_run_time(self):
        def tensors(path):
            with open(path) as f:
                events = json.load(f)
            return ({e["args"]["name"] for e in events if e["ph"] == "M"},
                    any(e["name"] == "CYCLE_START" for e in events))

        def prefixes(names):
            return {n.split(".")[0] for n in names} - {"bg"}

        for shm_off in ("0", "1"):
            with self.subTest(shm_off=shm_off), \
                    tempfile.TemporaryDirectory() as tmp:
                first, second, start = (os.path.join(tmp, n) for n in
                                        ("tl1.json", "tl2.json", "env.json"))
                env = dict(os.environ, HOROVOD_SHM_DISABLE=shm_off)
                tps = self.tlcheck([HR, "-np", "2", "--timeline-filename",
                                    start, TLCHECK, first, second], 2, env)
                want = "ring" if shm_off == "1" else "shm"
                self.assertEqual(tps, {0: want, 1: want})
                # HOROVOD_TIMELINE from start-up, replaced by the first
                # hvd_start_timeline: closed, valid, and only what came
                # before.
                names, _ = tensors(start)
                self.assertEqual(prefixes(names), {"before"})
                names, cycles = tensors(first)
                self.assertEqual(prefixes(names), {"tl1"})
                self.assertTrue({"tl1.0", "tl1.1", "tl1.2"} <= names)
                self.assertTrue(cycles, "mark_cycles=1 marks no cycle")
                # The second, kept when a third could not be opened, and
                # stopped before "after".
                names, cycles = tensors(second)
                self.assertEqual(prefixes(names), {"tl2", "tl2b"})
                self.assertFalse(cycles)
                tensors(second + ".turns")
        # A job of one records no timeline.
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("HOROVOD_")}
            first = os.path.join(tmp, "tl1.json")
            tps = self.tlcheck([TLCHECK, first, first + "2"], 1, env)
            self.assertEqual(tps, {0: "ring"})
            self.assertEqual(os.listdir(tmp), [])

    def test_stdout_is_line_buffered_after_init(self):
        p = subprocess.Popen([HR, "-np", "2", LINEBUF], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             text=True)
        start = time.monotonic()
        try:
            first = p.stdout.readline()
            took = time.monotonic() - start
        finally:
            p.wait(60)
        self.assertRegex(first, r"<stdout>:linebuf: rank \d before the sleep")
        # The ranks sleep 5 s after printing: the line came before that.
        self.assertLess(took, 4, "the line waited for the rank to exit")
        self.assertEqual(p.returncode, 0)

    def test_tuning_options_reach_the_ranks(self):
        p, _ = run([HR, "-np", "1", "--fusion-threshold-mb", "2",
                    "--cycle-time-ms", "0.5", "--cache-capacity", "7",
                    "--stall-check-warning-time-seconds", "9",
                    "--stall-check-shutdown-time-seconds", "11",
                    "--no-stall-check", "--timeline-filename", "tl.json",
                    "--timeline-mark-cycles", "env"])
        self.assertEqual(p.returncode, 0, p.stderr)
        got = dict(l.split(":", 1)[1].split("=", 1)
                   for l in p.stdout.splitlines() if "=" in l)
        want = {"HOROVOD_FUSION_THRESHOLD": "2097152",
                "HOROVOD_CYCLE_TIME": "0.5",
                "HOROVOD_CACHE_CAPACITY": "7",
                "HOROVOD_STALL_CHECK_TIME_SECONDS": "9",
                "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "11",
                "HOROVOD_STALL_CHECK_DISABLE": "1",
                "HOROVOD_TIMELINE": "tl.json",
                "HOROVOD_TIMELINE_MARK_CYCLES": "1"}
        for k, v in want.items():
            self.assertEqual(got.get(k), v, k)

    def test_64_mib(self):
        p, _ = run([HR, "-np", "3", CHECK, "--big"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertAllRanksPass(p.stdout, 3)

    def test_dead_rank_fails_the_others(self):
        # Four ranks on one host: the others wait for rank 1 in shared
        # memory.
        p, took = run([HR, "-np", "4", "--kill-grace", "20", "--log-level",
                       "debug", CHECK, "--die-rank", "1"], timeout=120)
        self.assertEqual(p.returncode, 137, p.stdout + p.stderr)
        self.assertIn("transport: shared memory", p.stderr)
        self.assertIn("rank 1 (host localhost, local_rank 1) was killed by "
                      "signal 9 (SIGKILL)", p.stderr)
        for r in (0, 2, 3):
            m = re.search(r"rank %d: failed as expected: (.*) \(HVD_EPEER\)"
                          % r, p.stdout)
            self.assertIsNotNone(m, p.stdout)
            self.assertIn("rank 1 (host localhost)", m.group(1))
            self.assertIn("rank %d: later call: HVD_EPEER" % r, p.stdout)
        # The survivors ignore SIGTERM: they ended by themselves, well
        # before the 20 s kill grace.
        self.assertLess(took, 15)

    def test_client_without_the_secret_is_refused(self):
        cmd = "%s -c '%s' && exec %s" % (sys.executable, BOGUS, CHECK)
        p, _ = run([HR, "-np", "2", "sh", "-c",
                    'if [ "$HOROVOD_RANK" = 0 ]; then %s; else exec %s; fi'
                    % (cmd, CHECK)])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stderr, r"horovodrun: warning: rendezvous: "
                         r"refused a connection from 127\.0\.0\.1:\d+: it "
                         r"did not prove the job secret")
        self.assertIn("bogus client got frame type 4", p.stdout)
        self.assertAllRanksPass(p.stdout, 2)

    def test_missing_ranks_are_named(self):
        # The waiting ranks ignore SIGTERM so that the first one to fail
        # does not stop the other before it reported.
        script = ('if [ "$HOROVOD_RANK" -ge 2 ]; then exec sleep 60; fi; '
                  'trap "" TERM; exec %s' % CHECK)
        p, took = run([HR, "-np", "4", "--start-timeout", "2",
                       "--kill-grace", "3", "sh", "-c", script], timeout=60)
        self.assertLess(took, 20)
        want = "ranks 2, 3 did not call hvd_init within 2 s"
        self.assertIn("horovodrun: error: rendezvous: " + want, p.stderr)
        for r in (0, 1):
            self.assertRegex(p.stdout, r"\[%d,%d\]<stdout>:collcheck: "
                             r"hvd_init failed: hvd_init on rank %d: .*%s"
                             % (r, r, r, want))
        self.assertEqual(p.returncode, 2, p.stderr)


if __name__ == "__main__":
    unittest.main()
