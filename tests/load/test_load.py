"""Integration tests: rank output under load, and backpressure.

16 spew ranks print lines of 1 byte to 64 KiB (see spew.c for the
distribution) as fast as they can; every line must arrive exactly once,
whole, under its own prefix and in its rank's order, on horovodrun's stdout
and stderr and raw in --output-filename files. Each rank hashes what it
printed (spew's digest files); loadcheck.py hashes what arrived.

The backpressure tests read horovodrun's stdout slowly: nothing at all for
longer than a remote agent's PING silence timeout, then a few KiB at a
time. horovodrun must keep its memory bounded while the ranks have far more
output pending (they block in write), lose nothing, and end normally; over
loopback SSH the agent must keep hearing horovodrun while output is paused.
Signals and failures must still work while output is paused.

Sizes: LOAD_RANKS (16) ranks x LOAD_LINES (20000) lines for the load test,
about 55 MB. The full run (16 x 100,000 lines, about 270 MB) is the
benchmark, tests/bench/output_bench.py.

    PYTHONPATH=tests/lib python3 tests/load/test_load.py \\
        [LoadTest | SshLoadTest] [-v]
"""

import os
import signal
import subprocess
import time
import unittest

import hvdtest
import loadcheck as lc

SPEW = os.environ.get("HVD_SPEW",
                      os.path.join(hvdtest.BUILD, "tests", "load", "spew"))
RANKS = int(os.environ.get("LOAD_RANKS", "16"))
LINES = int(os.environ.get("LOAD_LINES", "20000"))

# The backpressure workload: spew --profile big, about 4.2 KiB a line, so
# that about 90 MB wait behind a reader that takes almost nothing.
BP_LINES = int(os.environ.get("LOAD_BP_LINES", "1500"))
# The reader takes nothing for longer than the PING silence timeout (4 s),
# then 4 KiB every 10 ms for SLOW_S, then everything.
STALL_S = 5.0
SLOW_S = 2.0

# horovodrun's peak RSS while its stdout is stalled: about 4 MiB of program
# (measured with the old blocking writes; 6.7 MiB at rest since the Gloo
# rendezvous brought libmicrohttpd, GnuTLS and its thread), its queue (4 MiB
# plus one read from an agent), and over SSH libssh2's channel window
# (2 MiB). The agent: about 3.5 MiB of program, its queue (4 MiB plus one
# rank read) and line buffers (64 KiB a stream here). Measured: 8.2 / 13.0
# MiB (local / SSH) before the Gloo rendezvous, up to 16.0 MiB over SSH
# after it, and 7 to 8.5 MiB for the agent; the output pending is 87 MB.
HR_RSS_BOUND_KB = 18 * 1024
# horovodrun's own count of queued bytes (--verbose): 4 MiB plus one read.
HR_QUEUE_BOUND = 4 * 1024 * 1024 + 256 * 1024
AGENT_RSS_BOUND_KB = 12 * 1024


def log(msg):
    print(msg, flush=True)


def rank_agents(marker):
    """The agents of a job: the parents of its ranks (a remote agent does
    not carry the job's marker, its ranks do)."""
    out = set()
    for pid, comm, _ in hvdtest.marked_procs(marker):
        if comm == "spew":
            st = hvdtest._read("/proc/%d/stat" % pid)
            if st:
                out.add(int(st[st.rindex(b")") + 2:].split()[1]))
    return sorted(out)


class AgentFinder:
    """pids() for MemWatch: the job's agents, looked up until found."""

    def __init__(self, marker):
        self.marker = marker
        self.found = []

    def __call__(self):
        if not self.found:
            self.found = rank_agents(self.marker)
        return self.found


class LoadBase(hvdtest.TestCase):
    """Runs spew jobs; hr_pre() gives the options that say where."""

    def hr_pre(self):
        return []

    def new_digests(self):
        d = os.path.join(self.tmp, "digests")
        os.mkdir(d)
        return d

    def spew_job(self, digests, lines, *opts, profile="mixed", spew=()):
        return hvdtest.hr_args("-np", RANKS, *self.hr_pre(), *opts, SPEW,
                               "--lines", lines, "--profile", profile,
                               "--digests", digests, *spew)

    def start(self, args, stderr=subprocess.PIPE):
        p = subprocess.Popen([str(a) for a in args],
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=stderr,
                             env=self.env(), start_new_session=True)
        hvdtest._popens.append(p)
        return p

    def wait(self, p, timeout):
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            hvdtest.kill_marked(self.marker)
            self.fail("horovodrun did not finish within %s s" % timeout)

    def spews(self):
        return [pid for pid, comm, _ in hvdtest.marked_procs(self.marker)
                if comm == "spew"]

    def assertComplete(self, digests_dir, parsers, rc, files=None,
                       want_rc=0, missing_ok=False):
        own = parsers["stderr"].own
        self.assertEqual(rc, want_rc, "horovodrun's messages:\n" +
                         "\n".join(own))
        if want_rc == 0:
            self.assertEqual(
                [l for l in own if l.startswith(hvdtest.ERR_PREFIX) or
                 l.startswith(hvdtest.WARN_PREFIX)], [])
        digests = lc.read_digests(digests_dir, RANKS, missing_ok)
        problems = lc.check_tagged(digests, parsers,
                                   {r: r for r in range(RANKS)})
        if files:
            problems += lc.check_files(digests, files)
        self.assertEqual(problems[:20], [])
        return digests

    def stalled(self, args, stall, before_read=None):
        """Runs horovodrun reading none of its stdout for stall seconds
        (stderr is read all along), then calls before_read() and reads the
        rest; returns (rc, parsers)."""
        p = self.start(args)
        parsers = {"stdout": lc.TaggedParser("stdout"),
                   "stderr": lc.TaggedParser("stderr")}
        err = lc.Reader(p.stderr.fileno(), parsers["stderr"])
        err.start()
        time.sleep(stall)
        if before_read:
            before_read(p, parsers)
        out = lc.Reader(p.stdout.fileno(), parsers["stdout"])
        out.start()
        rc = self.wait(p, 120)
        out.join(60)
        err.join(60)
        self.assertIsNone(out.error)
        self.assertIsNone(err.error)
        return rc, parsers

    def slow_reader(self, args):
        """Runs horovodrun with a stalled, then slow, then fast reader of
        its stdout; returns (rc, parsers, measurements)."""
        p = self.start(args)
        parsers = {"stdout": lc.TaggedParser("stdout"),
                   "stderr": lc.TaggedParser("stderr")}
        err_reader = lc.Reader(p.stderr.fileno(), parsers["stderr"])
        err_reader.start()
        hr_watch = lc.MemWatch(lambda: [p.pid])
        ag_watch = lc.MemWatch(AgentFinder(self.marker))
        hr_watch.start()
        ag_watch.start()
        fd = p.stdout.fileno()
        got = 0

        time.sleep(0.5)
        asan = lc.sanitized(p.pid)
        time.sleep(STALL_S - 0.5)
        stall_hr = max(hr_watch.peak.values() or [0])
        end = time.monotonic() + SLOW_S
        while time.monotonic() < end:
            b = os.read(fd, 4096)
            if not b:
                break
            got += len(b)
            parsers["stdout"].feed(b)
            time.sleep(0.01)
        # The ranks still have most of their output to print, and wait.
        spews = self.spews()
        hr_peak = max(hr_watch.peak.values() or [0])
        ag_peak = max(ag_watch.peak.values() or [0])
        alive = p.poll() is None

        rest = lc.Reader(fd, parsers["stdout"])
        rest.start()
        rc = self.wait(p, 120)
        rest.join(60)
        err_reader.join(60)
        hr_watch.stop()
        ag_watch.stop()
        self.assertIsNone(rest.error)
        self.assertIsNone(err_reader.error)
        total = got + rest.nbytes
        queue = [int(x.split(" at most ")[1].split()[0])
                 for x in parsers["stderr"].own if " at most " in x]
        m = {"queue": queue[0] if queue else None, "asan": asan,
             "hr_peak_kb": hr_peak, "agent_peak_kb": ag_peak,
             "read_slow": got, "total": total, "pending": total - got,
             "spews": len(spews), "alive": alive}
        log("backpressure: horovodrun peak RSS %.1f MiB while stalled and "
            "slow (%.1f MiB after the stall, %.1f MiB at the end), its "
            "queue at most %s bytes; agent %.1f MiB; %.1f MB read slowly "
            "of %.1f MB, %d ranks still writing" % (
                hr_peak / 1024, stall_hr / 1024,
                max(hr_watch.peak.values() or [0]) / 1024, m["queue"],
                ag_peak / 1024, got / 1e6, total / 1e6, len(spews)))
        return rc, parsers, m

    def check_slow_reader(self):
        dig = self.new_digests()
        args = self.spew_job(dig, BP_LINES, "--verbose", profile="big")
        rc, parsers, m = self.slow_reader(args)
        self.assertComplete(dig, parsers, rc)
        self.assertTrue(m["alive"], "the job ended while its output was "
                        "stalled")
        self.assertGreater(m["spews"], 0, "no rank was left waiting to "
                           "write")
        # Far more was pending than horovodrun may hold.
        self.assertGreater(m["pending"], 4 * HR_RSS_BOUND_KB * 1024)
        self.assertLess(m["queue"], HR_QUEUE_BOUND)
        if m["asan"]:
            log("AddressSanitizer build: RSS bounds not checked")
            return
        self.assertLess(m["hr_peak_kb"], HR_RSS_BOUND_KB,
                        "horovodrun buffered the output")
        self.assertGreater(m["agent_peak_kb"], 0, "agent not measured")
        self.assertLess(m["agent_peak_kb"], AGENT_RSS_BOUND_KB,
                        "hvd-agent buffered the output")

    def check_interrupt_while_stalled(self):
        """Ctrl-C reaches the ranks while output is paused: the agents are
        not read, but frames to them still go out."""
        dig = self.new_digests()
        args = self.spew_job(dig, BP_LINES, profile="big")
        stopped = {}

        def interrupt(p, parsers):
            self.assertGreater(len(self.spews()), 0, "the ranks ended early")
            p.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            left = hvdtest.wait_until(lambda: not self.spews(), 10)
            stopped["s"] = time.monotonic() - t0 if left else None
        rc, parsers = self.stalled(args, 2.0, interrupt)
        self.assertIsNotNone(stopped["s"], "the ranks were not stopped "
                             "while output was paused")
        log("interrupt: ranks gone %.2f s after SIGINT, output paused" %
            stopped["s"])
        self.assertComplete(dig, parsers, rc, want_rc=128 + signal.SIGINT,
                            missing_ok=True)
        self.assertTrue(any("received SIGINT" in l
                            for l in parsers["stderr"].own))


class LoadTest(LoadBase):
    """horovodrun and its agent on this host."""

    def test_lines_terminal_and_files(self):
        dig = self.new_digests()
        files = os.path.join(self.tmp, "out")
        t0 = time.monotonic()
        p = self.start(self.spew_job(dig, LINES, "--output-filename", files))
        parsers = {"stdout": lc.TaggedParser("stdout"),
                   "stderr": lc.TaggedParser("stderr")}
        readers = [lc.Reader(p.stdout.fileno(), parsers["stdout"]),
                   lc.Reader(p.stderr.fileno(), parsers["stderr"])]
        for r in readers:
            r.start()
        rc = self.wait(p, 120)
        for r in readers:
            r.join(60)
            self.assertIsNone(r.error)
        elapsed = time.monotonic() - t0
        digests = self.assertComplete(dig, parsers, rc, files)
        lines, nbytes = lc.totals(digests)
        self.assertGreater(nbytes, LINES * RANKS * 100)
        log("load: %d ranks, %d lines, %.1f MB raw, %.1f MB on the terminal,"
            " in %.2f s (parsing included)" % (
                RANKS, lines, nbytes / 1e6,
                (readers[0].nbytes + readers[1].nbytes) / 1e6, elapsed))

    def test_stdout_and_stderr_one_pipe(self):
        # 2>&1: both streams share one queue and one writer; lines of the
        # two streams must not cut each other.
        dig = self.new_digests()
        p = self.start(self.spew_job(dig, LINES // 4),
                       stderr=subprocess.STDOUT)
        parser = lc.TaggedParser("both")
        r = lc.Reader(p.stdout.fileno(), parser)
        r.start()
        rc = self.wait(p, 120)
        r.join(60)
        self.assertIsNone(r.error)
        self.assertComplete(dig, {"stdout": parser, "stderr": parser}, rc)

    def test_slow_reader(self):
        self.check_slow_reader()

    def test_interrupt_while_stalled(self):
        self.check_interrupt_while_stalled()

    def test_failure_while_stalled(self):
        # Rank 5 prints little and exits with 7 while the others fill the
        # pipeline: its EXIT comes behind their lines, after its own.
        dig = self.new_digests()
        args = self.spew_job(dig, BP_LINES, "--kill-grace", "1",
                             profile="big", spew=("--fail", "5:7:200"))
        rc, parsers = self.stalled(args, 3.0)
        digests = self.assertComplete(dig, parsers, rc, want_rc=7,
                                      missing_ok=True)
        self.assertIn(5, digests)
        self.assertTrue(any("rank 5 (host localhost, local_rank 5) exited "
                            "with code 7" in l
                            for l in parsers["stderr"].own),
                        parsers["stderr"].own)

    def test_reader_goes_away(self):
        # horovodrun | head -1 under load: the terminal side is dropped,
        # the job and its files go on to the end.
        dig = self.new_digests()
        files = os.path.join(self.tmp, "out")
        p = self.start(self.spew_job(dig, LINES, "--output-filename", files))
        err = lc.TaggedParser("stderr")
        r = lc.Reader(p.stderr.fileno(), err)
        r.start()
        time.sleep(0.5)
        self.assertTrue(os.read(p.stdout.fileno(), 100))
        p.stdout.close()
        rc = self.wait(p, 120)
        r.join(60)
        self.assertEqual(rc, 0, err.own)
        digests = lc.read_digests(dig, RANKS)
        self.assertEqual(lc.check_files(digests, files)[:20], [])

    def test_stuck_terminal_second_interrupt(self):
        # Nobody ever reads stdout: a second Ctrl-C still ends horovodrun
        # (its writer thread is left inside its write).
        dig = self.new_digests()
        p = self.start(self.spew_job(dig, BP_LINES, profile="big"))
        err = lc.TaggedParser("stderr")
        r = lc.Reader(p.stderr.fileno(), err)
        r.start()
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        rc = self.wait(p, 30)
        took = time.monotonic() - t0
        r.join(10)
        p.stdout.close()
        self.assertEqual(rc, 1, err.own)
        self.assertTrue(any("the terminal took no output" in l
                            for l in err.own), err.own)
        self.assertLess(took, 15)
        self.assertEqual(hvdtest.wait_gone(self.marker), [])


class SshLoadTest(LoadBase):
    """The same over loopback SSH: one sshd host, all ranks there."""

    cluster = None

    @classmethod
    def setUpClass(cls):
        import sshfix
        cls.cluster = sshfix.SshCluster(1)
        cls.cluster.start()

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls.cluster.stop()

    def hr_pre(self):
        c = self.cluster
        return ["-p", c.port, "-H", c.hosts_arg(RANKS)]

    def env(self):
        return self.cluster.env(base=hvdtest.base_env(
            self.marker, HOROVOD_START_TIMEOUT="20"))

    def test_slow_reader(self):
        # The reader stalls for longer than the agent's PING silence
        # timeout (4 s): with horovodrun's loop blocked in a write, the
        # agent would stop the job.
        self.check_slow_reader()

    def test_interrupt_while_stalled(self):
        self.check_interrupt_while_stalled()


if __name__ == "__main__":
    unittest.main(verbosity=2)
