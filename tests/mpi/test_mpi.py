"""Integration tests of libhvd's MPI backend: the runtime's checks
(tests/runtime/collcheck.c, negcheck.c, stallcheck.c and mpicheck.c here)
under Open MPI's mpirun at -np 2, 3 and 4, alone with
HOROVOD_CONTROLLER=mpi, and the same binaries under horovodrun and alone,
where they must keep libhvd's own transports. Exits 77 (skipped) when the
build has no MPI or there is no mpirun."""

import os
import re
import subprocess
import sys
import time
import unittest

import mpienv

HAVE_MPI = os.environ.get("HVD_HAVE_MPI") == "1"
MPIRUN = os.environ.get("HVD_MPIRUN", "")
HR = os.environ["HVD_HOROVODRUN"]
CHECK = os.environ["HVD_COLLCHECK"]
NEG = os.environ["HVD_NEGCHECK"]
PSET = os.environ["HVD_PSETCHECK"]
STALL = os.environ["HVD_STALLCHECK"]
DEVCHECK = os.environ["HVD_DEVCHECK"]
MPICHECK = os.environ.get("HVD_MPICHECK", "")

DONE_RE = re.compile(r"collcheck: rank (\d+) of (\d+): (\d+) checks, "
                     r"(\d+) failures")
MPIDONE_RE = re.compile(r"mpicheck: rank (\d+) of (\d+): (\d+) checks, "
                        r"(\d+) failures")
PSETDONE_RE = re.compile(r"psetcheck: rank (\d+) of (\d+): (\d+) checks, "
                         r"(\d+) failures")
TRANSPORT_RE = re.compile(r"hvd: debug: rank (\d+): transport: (.*)")
# Variables that would make a rank take the job from MPI: the tests set
# them themselves.
MPI_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
            "HOROVOD_CONTROLLER", "HOROVOD_MPI_THREADS_DISABLE",
            "HOROVOD_RANK")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in MPI_VARS}
    env.update(extra)
    return env


def mpi_env(**extra):
    """clean_env for processes that start MPI."""
    return mpienv.add_openmpi_suppressions(clean_env(**extra))


def run(args, env=None, timeout=180):
    if env is None:
        env = mpi_env() if args[0] == MPIRUN else clean_env()
    start = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    return p, time.monotonic() - start


def mpirun(np, *args):
    """mpirun's command line: oversubscribed (more ranks than cores is the
    point here), as root where the tests run as root."""
    cmd = [MPIRUN, "--oversubscribe", "-np", str(np)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + list(args)


class MpiTest(unittest.TestCase):

    def assertAllDone(self, p, regex, np, min_checks):
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-4000:])
        done = regex.findall(p.stdout)
        self.assertEqual(sorted(int(r) for r, _, _, _ in done),
                         list(range(np)), out[-4000:])
        for _, size, checks, failures in done:
            self.assertEqual(int(size), np)
            self.assertGreaterEqual(int(checks), min_checks)
            self.assertEqual(int(failures), 0, out[-4000:])

    def transports(self, p):
        return dict((int(r), t) for r, t in TRANSPORT_RE.findall(p.stderr))

    def test_collcheck_under_mpirun(self):
        for np in (2, 4):
            with self.subTest(np=np):
                p, took = run(mpirun(np, CHECK),
                              mpi_env(HOROVOD_LOG_LEVEL="debug"))
                self.assertAllDone(p, DONE_RE, np, 150)
                tr = self.transports(p)
                self.assertEqual(sorted(tr), list(range(np)), p.stderr)
                for t in tr.values():
                    self.assertRegex(t, r"^MPI \(%d ranks; "
                                     r"MPI_THREAD_MULTIPLE; " % np)
                print("collcheck -np %d under mpirun: %.1f s" % (np, took),
                      file=sys.stderr)

    def test_process_sets_and_join_under_mpirun(self):
        p, _ = run(mpirun(3, PSET), mpi_env())
        self.assertAllDone(p, PSETDONE_RE, 3, 30)

    def test_serialized_threads(self):
        p, _ = run(mpirun(2, CHECK),
                   mpi_env(HOROVOD_LOG_LEVEL="debug",
                           HOROVOD_MPI_THREADS_DISABLE="1"))
        self.assertAllDone(p, DONE_RE, 2, 150)
        for t in self.transports(p).values():
            self.assertIn("MPI_THREAD_SERIALIZED", t)

    def test_controller_mpi_alone(self):
        p, _ = run([CHECK], mpi_env(HOROVOD_CONTROLLER="mpi",
                                    HOROVOD_LOG_LEVEL="debug"))
        self.assertAllDone(p, DONE_RE, 1, 150)
        self.assertRegex(self.transports(p)[0], r"^MPI \(1 rank; ")

    def test_same_binary_under_horovodrun_and_alone(self):
        p, _ = run([HR, "-np", "2", "--log-level", "debug", CHECK])
        done = DONE_RE.findall(p.stdout)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        self.assertEqual(len(done), 2, p.stdout[-3000:])
        self.assertTrue(all(f == "0" for _, _, _, f in done), p.stdout)
        self.assertEqual(set(self.transports(p).values()),
                         {"shared memory (2 ranks on host localhost)"})
        p, _ = run([CHECK], clean_env(HOROVOD_LOG_LEVEL="debug"))
        self.assertAllDone(p, DONE_RE, 1, 150)
        self.assertEqual(self.transports(p), {0: "none (a job of one)"})

    def test_horovodrun_wins_over_inherited_mpirun_variables(self):
        # horovodrun started from an mpirun job: its ranks inherit mpirun's
        # variables, and must still take horovodrun's job.
        env = clean_env(OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2")
        p, _ = run([HR, "-np", "2", "--log-level", "debug", CHECK], env)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        self.assertEqual(set(self.transports(p).values()),
                         {"shared memory (2 ranks on host localhost)"})

    def test_controller_mpi_under_horovodrun_is_replaced(self):
        # horovodrun's own launcher gives its ranks HOROVOD_CONTROLLER=gloo,
        # as Horovod's does (MPI would see a job of one in each rank), and
        # says so.
        p, _ = run([HR, "-np", "2", "--log-level", "debug", CHECK],
                   mpi_env(HOROVOD_CONTROLLER="mpi"))
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        self.assertEqual(set(self.transports(p).values()),
                         {"shared memory (2 ranks on host localhost)"})
        self.assertIn("horovodrun: warning: the ranks get "
                      "HOROVOD_CONTROLLER=gloo, not the HOROVOD_CONTROLLER=mpi "
                      "of this environment", p.stderr)

    def test_negotiation_under_mpirun(self):
        # Different submission orders, grouped allreduces, fusion,
        # mismatches reported on every rank.
        for np in (2, 3):
            with self.subTest(np=np):
                p, _ = run(mpirun(np, NEG))
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                done = re.findall(r"negcheck: rank (\d+) of %d: 0 failures"
                                  % np, p.stdout)
                self.assertEqual(sorted(map(int, done)), list(range(np)),
                                 p.stdout)
                hashes = set(re.findall(r"fusion hash ([0-9a-f]{16})",
                                        p.stdout))
                self.assertEqual(len(hashes), 1, p.stdout)

    def test_stall_inspector_under_mpirun(self):
        # Rank 1 never submits: the idle rank must still be called into
        # rank 0's cycles (there is no socket to show them), hear the
        # stall and give up on the tensors after the shutdown time.
        env = mpi_env(HOROVOD_STALL_CHECK_TIME_SECONDS="1",
                      HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="3")
        p, _ = run(mpirun(3, STALL), env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stderr, r"hvd: warning: stall: .*rank 1: "
                         r"\[stuck\.[ab], stuck\.[ab]\]")
        for r in (0, 2):
            self.assertIn("rank %d: stuck.a: HVD_ETIMEDOUT" % r, p.stdout)
        for r in range(3):
            self.assertIn("stallcheck: rank %d: ok" % r, p.stdout)
        p, _ = run(mpirun(2, STALL, "late"),
                   mpi_env(HOROVOD_STALL_CHECK_TIME_SECONDS="1"),
                   timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("hvd: warning: stall", p.stderr)

    def test_device_buffers_staged_through_mpi(self):
        # libhvd's test double of CUDA: device buffers go through host
        # memory and MPI's collectives.
        env = mpi_env(HVD_TEST_FAKE_GPU="1")
        env.pop("CUDA_VISIBLE_DEVICES", None)
        p, _ = run(mpirun(3, DEVCHECK), env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        done = re.findall(r"devcheck: rank (\d+) of 3: \d+ checks, 0 "
                          r"failures", p.stdout)
        self.assertEqual(sorted(map(int, done)), [0, 1, 2], p.stdout)

    def test_mpicheck(self):
        for np in (2, 3, 4):
            with self.subTest(np=np):
                p, _ = run(mpirun(np, MPICHECK))
                self.assertAllDone(p, MPIDONE_RE, np, 50)
        p, _ = run([MPICHECK], mpi_env(HOROVOD_CONTROLLER="mpi"))
        self.assertAllDone(p, MPIDONE_RE, 1, 50)

    def test_program_initialized_mpi(self):
        p, _ = run(mpirun(2, MPICHECK, "preinit"))
        self.assertAllDone(p, MPIDONE_RE, 2, 50)
        p, _ = run(mpirun(2, MPICHECK, "single"))
        self.assertAllDone(p, MPIDONE_RE, 2, 1)

    def test_dead_rank_ends_the_job(self):
        # No rendezvous server relays the failure: mpirun sees the death
        # and ends the job, the others do not hang.
        p, took = run(mpirun(3, CHECK, "--die-rank", "1"), timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertLess(took, 60)

    def test_check_build_says_mpi(self):
        p, _ = run([HR, "--check-build"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("    [X] MPI\n\nAvailable Tensor Operations:",
                      p.stdout)
        self.assertIn("    [X] MPI\n\nDevice buffers:", p.stdout)


if __name__ == "__main__":
    if not HAVE_MPI or not MPIRUN or not MPICHECK:
        print("SKIP: %s" % ("this build has no MPI backend (-Dmpi)"
                            if not HAVE_MPI else "no mpirun found"))
        sys.exit(77)
    unittest.main(verbosity=2)
