"""Integration tests: signals sent to horovodrun, and orphan cleanup."""

import re
import signal
import time

import hvdtest
from hvdtest import py, sh
from launchmode import AgentsMode, MpiMode

ERR = hvdtest.ERR_PREFIX
WARN = hvdtest.WARN_PREFIX

# Ranks that report SIGINT and then die of it. A SIGTERM handler keeps a
# fail-fast SIGTERM (after another rank's death) from killing a rank before
# Python ran its SIGINT handler; Python runs pending handlers in signal
# number order.
INT_DIES = hvdtest.INT_DIES

# Ranks that report SIGTERM and exit 0.
TERM_EXITS = r"""
import os, signal, sys, time
r = os.environ["HOROVOD_RANK"]
def on_term(sig, frame):
    print("rank %s got SIGTERM" % r, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(60)
print("never interrupted", flush=True)
"""

# Ranks that ignore SIGINT and SIGTERM.
IGNORE_INT_TERM = r"""
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""

# Odd ranks ignore SIGTERM, even ones do not.
ODD_IGNORE_TERM = r"""
import os, signal, time
if int(os.environ["HOROVOD_RANK"]) % 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


def is_ready(line):
    return line.endswith(">:ready")


class SignalChecks:
    """Checks of either launch mode (launchmode.py)."""

    def test_sigint_forwarded_ranks_die_of_it(self):
        job = self.start_hr("-np", "4", *py(INT_DIES))
        job.wait_line(is_ready, count=4, timeout=20)
        t = time.monotonic()
        job.signal(signal.SIGINT)
        rc = job.wait(timeout=20)
        self.assertLess(time.monotonic() - t, 10)
        self.assertEqual(rc, 130, job.describe())
        out = job.text_lines("stdout")
        for r in range(4):
            # Under mpirun the ranks get its SIGTERM and SIGKILL instead.
            (self.assertIn if self.GETS_SIGNAL else self.assertNotIn)(
                "[%d,%d]<stdout>:rank %d got SIGINT" % (r, r, r), out)
        self.assertNotIn("never interrupted", job.out)
        err = job.text_lines("stderr")
        warns = [l for l in err if l.startswith(WARN)]
        self.assertEqual(len(warns), 1, job.describe())
        self.assertEqual(warns[0], WARN + "received SIGINT; forwarding it to "
                         "%s (again to kill them at once)" % self.FORWARD_TO)
        errs = [l for l in err if l.startswith(ERR)]
        self.assertEqual(len(errs), 1, job.describe())
        if not self.GETS_SIGNAL:
            self.assertEqual(errs[0], ERR + "interrupted by SIGINT: " +
                             self.ALL_STOPPED)
            return self.assertNoneLeft(timeout=5)
        self.assertRegex(errs[0], re.escape(ERR) + r"interrupted by SIGINT: "
                         r"rank (\d) \(host localhost, local_rank \1\) was "
                         r"killed by signal 2 \(SIGINT\); the job was "
                         r"stopped$")
        self.assertNoneLeft(timeout=5)

    def test_sigterm_forwarded_ranks_exit_zero(self):
        # A grace longer than Open MPI's default second: under --mpi a
        # loaded machine may take that long to run a Python rank's handler,
        # and mpirun's SIGKILL then ends it before it prints. (mpirun waits
        # out the whole grace even when every rank ended.)
        job = self.start_hr("-np", "3", "--kill-grace", "4",
                            *py(TERM_EXITS))
        job.wait_line(is_ready, count=3, timeout=20)
        job.signal(signal.SIGTERM)
        rc = job.wait(timeout=20)
        self.assertEqual(rc, 128 + 15, job.describe())
        out = job.text_lines("stdout")
        for r in range(3):
            self.assertIn("[%d,%d]<stdout>:rank %d got SIGTERM" % (r, r, r),
                          out)
        errs = [l for l in job.text_lines("stderr") if l.startswith(ERR)]
        self.assertEqual(errs, [ERR + "interrupted by SIGTERM: " +
                                self.ALL_STOPPED])
        self.assertNoneLeft(timeout=5)

    def test_sighup_forwarded(self):
        job = self.start_hr("-np", "2", *sh("echo ready; exec sleep 60"))
        job.wait_line(is_ready, count=2, timeout=20)
        job.signal(signal.SIGHUP)
        rc = job.wait(timeout=20)
        self.assertEqual(rc, 128 + 1, job.describe())
        self.assertNoneLeft(timeout=5)

    def test_second_sigint_kills_at_once(self):
        # The grace is long: only the second SIGINT can end this job soon.
        job = self.start_hr("-np", "3", "--kill-grace", "60",
                            *py(IGNORE_INT_TERM))
        job.wait_line(is_ready, count=3, timeout=20)
        job.signal(signal.SIGINT)
        job.wait_line(lambda l: l.startswith(WARN + "received SIGINT"),
                      stream="stderr", timeout=10)
        time.sleep(1)
        self.assertTrue(job.alive(), "ranks ignoring SIGINT were killed by "
                        "the first SIGINT\n" + job.describe())
        self.assertEqual(len([p for p, comm, _ in
                              hvdtest.marked_procs(self.marker)
                              if comm.startswith("python")]), 3)
        t = time.monotonic()
        job.signal(signal.SIGINT)
        rc = job.wait(timeout=20)
        self.assertLess(time.monotonic() - t, 8,
                        "the second SIGINT did not kill the ranks at once")
        self.assertNotEqual(rc, 0)
        errs = [l for l in job.text_lines("stderr") if l.startswith(ERR)]
        self.assertEqual(len(errs), 1, job.describe())
        self.assertTrue(errs[0].startswith(ERR + "interrupted by SIGINT: "),
                        errs[0])
        self.assertNoneLeft(timeout=5)

    def check_sigkill_leaves_nothing(self, *hosts, nagents):
        job = self.start_hr("-np", "4", "--kill-grace", "1", *hosts,
                            *py(ODD_IGNORE_TERM))
        job.wait_line(is_ready, count=4, timeout=20)
        procs = hvdtest.marked_procs(self.marker)
        comms = sorted(c for _, c, _ in procs)
        # Under mpirun, one hvd-mpi-rank a rank and no agent.
        self.assertEqual(comms.count("hvd-agent"),
                         0 if self.MODE else nagents, procs)
        self.assertEqual(comms.count("horovodrun"), 1, procs)
        self.assertEqual(len([c for c in comms if c.startswith("python")]),
                         4, procs)
        job.signal(signal.SIGKILL)
        job.wait(timeout=10)
        # SIGTERM at once, SIGKILL one grace (1 s) later.
        self.assertNoneLeft(timeout=10, what="ranks or agents")

    def test_sigkill_of_horovodrun_leaves_nothing(self):
        self.check_sigkill_leaves_nothing(nagents=1)


class SignalTest(AgentsMode, SignalChecks, hvdtest.TestCase):
    """With horovodrun's own agents, also on two hosts."""

    def test_sigterm_forwarded_ranks_die_of_it(self):
        job = self.start_hr("-np", "2", "-H", "localhost:1,127.0.0.1:1",
                            *sh("echo ready; exec sleep 60"))
        job.wait_line(is_ready, count=2, timeout=20)
        job.signal(signal.SIGTERM)
        rc = job.wait(timeout=20)
        self.assertEqual(rc, 128 + 15, job.describe())
        errs = [l for l in job.text_lines("stderr") if l.startswith(ERR)]
        self.assertEqual(len(errs), 1, job.describe())
        self.assertRegex(errs[0], re.escape(ERR) + r"interrupted by SIGTERM: "
                         r"rank [01] \(host (localhost|127\.0\.0\.1), "
                         r"local_rank 0\) was killed by signal 15 \(SIGTERM\)")
        self.assertNoneLeft(timeout=5)

    def test_sigkill_of_horovodrun_two_hosts(self):
        self.check_sigkill_leaves_nothing("-H", "localhost:2,127.0.0.1:2",
                                          nagents=2)


class SignalMpiTest(MpiMode, SignalChecks, hvdtest.TestCase):
    """The same checks under horovodrun --mpi (the SIGKILL one with ranks
    that print nothing, which mpirun would notice only when it wrote)."""


if __name__ == "__main__":
    hvdtest.main()
