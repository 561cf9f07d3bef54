"""Integration tests: fail-fast, exit codes and the failure summary."""

import os
import signal

import hvdtest
from hvdtest import py, sh
from launchmode import AgentsMode, MpiMode

ERR = hvdtest.ERR_PREFIX


class FailFastChecks:
    """Checks of either launch mode (launchmode.py)."""

    def test_rank_exit_code_stops_job(self):
        started = os.path.join(self.tmp, "started")
        script = ('touch %s.$HOROVOD_RANK; '
                  'if [ "$HOROVOD_RANK" = 2 ]; then sleep 1; exit 3; fi; '
                  'sleep 60; echo survived' % started)
        res = self.run_hr("-np", "4", *sh(script), timeout=90)
        self.assertRc(res, 3)
        self.assertLess(res.elapsed, 20, "the others were not stopped")
        for r in range(4):
            self.assertTrue(os.path.exists("%s.%d" % (started, r)),
                            "rank %d never started" % r)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 2 (host localhost, local_rank 2) exited with code 3; "
            "the job was stopped"], res.describe())
        self.assertNotIn("survived", res.out)
        # Under --mpi, mpirun's own report of the failure is not repeated.
        self.assertNotIn("Primary job", res.err)
        # horovodrun waited for its ranks: none may outlive it.
        self.assertNoneLeft(timeout=5)

    def test_rank_killed_by_sigkill(self):
        script = ('if [ "$HOROVOD_RANK" = 1 ]; then sleep 0.5; kill -9 $$; '
                  'fi; exec sleep 60')
        res = self.run_hr("-np", "3", *sh(script), timeout=90)
        self.assertRc(res, 128 + 9)
        self.assertLess(res.elapsed, 20)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 1 (host localhost, local_rank 1) was killed by "
            "signal 9 (SIGKILL); the job was stopped"])
        self.assertNoneLeft(timeout=5)

    def test_rank_killed_by_sigsegv(self):
        script = ("import os, signal, time\n"
                  "if os.environ['HOROVOD_RANK'] == '0':\n"
                  "    time.sleep(0.5); os.kill(os.getpid(), signal.SIGSEGV)\n"
                  "time.sleep(60)\n")
        res = self.run_hr("-np", "2", *py(script), timeout=90)
        self.assertRc(res, 128 + 11)
        self.assertLess(res.elapsed, 20)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 0 (host localhost, local_rank 0) was killed by "
            "signal 11 (SIGSEGV); the job was stopped"])
        self.assertNoneLeft(timeout=5)

    def test_rank_ignoring_sigterm_is_killed_after_grace(self):
        script = r"""
import os, signal, sys, time
r = os.environ["HOROVOD_RANK"]
def on_term(sig, frame):
    print("rank %s got SIGTERM" % r, flush=True)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
if r == "0":
    time.sleep(0.5)
    sys.exit(1)
while True:
    time.sleep(0.1)
"""
        res = self.run_hr("-np", "3", "--kill-grace", "1", *py(script),
                          timeout=90)
        self.assertRc(res, 1)
        # Stopped by SIGKILL one grace after the SIGTERM, not at once and
        # not never.
        self.assertLess(res.elapsed, 12)
        self.assertGreater(res.elapsed, 1.4)
        self.assertIn("[1,1]<stdout>:rank 1 got SIGTERM", res.out_lines)
        self.assertIn("[2,2]<stdout>:rank 2 got SIGTERM", res.out_lines)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 0 (host localhost, local_rank 0) exited with code 1; "
            "the job was stopped"])
        self.assertNoneLeft(timeout=5)

    def test_orphan_in_rank_group_is_stopped(self):
        # A background child of a rank holds the rank's stdout open; it must
        # not keep the job (or itself) alive once the rank exits.
        script = ('sleep 60 & echo "bg started"; exit 0')
        res = self.run_hr("-np", "2", *sh(script), timeout=60)
        self.assertRc(res, 0)
        self.assertLess(res.elapsed, 20)
        self.assertNoneLeft(timeout=5)

    def test_all_ranks_succeed(self):
        res = self.run_hr("-np", "4", *sh('sleep 0.$HOROVOD_RANK; exit 0'))
        self.assertRc(res, 0)
        self.assertEqual(res.err, "")
        self.assertEqual(res.out, "")
        self.assertNoneLeft(timeout=5)

    def test_first_failure_wins(self):
        # Rank 1 fails first; rank 3 fails later with another code.
        script = ('case $HOROVOD_RANK in 1) sleep 0.2; exit 5;; '
                  '3) trap "exit 7" TERM; sleep 30 & wait;; '
                  '*) exec sleep 60;; esac')
        res = self.run_hr("-np", "4", *sh(script), timeout=90)
        self.assertRc(res, 5)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 1 (host localhost, local_rank 1) exited with code 5; "
            "the job was stopped"])
        self.assertNoneLeft(timeout=5)

    def test_exit_code_above_255_wraps_like_a_shell(self):
        res = self.run_hr("-np", "1", *py("import sys; sys.exit(300)"))
        # exit(300) is status 300 & 255 = 44 for the kernel.
        self.assertRc(res, 44)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 0 (host localhost, local_rank 0) exited with code "
            "44; the job was stopped"])


class FailFastTest(AgentsMode, FailFastChecks, hvdtest.TestCase):
    """With horovodrun's own agents, also on two hosts and an agent's
    death."""

    def test_rank_exit_code_on_second_host(self):
        script = ('if [ "$HOROVOD_RANK" = 3 ]; then exit 42; fi; '
                  'exec sleep 60')
        res = self.run_hr("-np", "4", "-H", "localhost:2,127.0.0.1:2",
                          *sh(script), timeout=90)
        self.assertRc(res, 42)
        self.assertLess(res.elapsed, 20)
        self.assertEqual(res.error_lines(), [
            ERR + "rank 3 (host 127.0.0.1, local_rank 1) exited with code "
            "42; the job was stopped"])
        self.assertNoneLeft(timeout=5)

    def test_agent_killed(self):
        # If hvd-agent dies, horovodrun says so and its ranks die with it.
        job = self.start_hr("-np", "2", *sh("echo ready; exec sleep 60"))
        job.wait_line(lambda l: l.endswith(":ready"), count=2)
        agents = [p for p, comm, _ in hvdtest.marked_procs(self.marker)
                  if comm == "hvd-agent"]
        self.assertEqual(len(agents), 1)
        os.kill(agents[0], signal.SIGKILL)
        rc = job.wait(timeout=20)
        self.assertEqual(rc, 1, job.describe())
        errs = [l for l in job.text_lines("stderr")
                if l.startswith(ERR)]
        self.assertEqual(len(errs), 1, job.describe())
        self.assertTrue(errs[0].startswith(ERR + "host localhost: hvd-agent "),
                        errs[0])
        # Signals are named the same way as in the rank summaries.
        self.assertIn("signal 9 (SIGKILL)", errs[0])
        self.assertNoneLeft(timeout=10)


class FailFastMpiTest(MpiMode, FailFastChecks, hvdtest.TestCase):
    """The same checks under horovodrun --mpi."""


if __name__ == "__main__":
    hvdtest.main()
