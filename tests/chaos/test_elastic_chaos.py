"""Chaos under elastic training: jobs of elasticrank (tests/runtime/
elasticrank.c: allreduces of 256 KiB, a commit after every step) on two
local hosts, -H localhost:2,127.0.0.1:2 --min-np 2, disturbed once at a
random moment after every rank is ready:

  kill_rank   SIGKILL a random rank (often inside a collective);
  stop_rank   SIGSTOP a random rank (HOROVOD_PEER_TIMEOUT=2: its peers'
              collectives fail; --start-timeout 3: the reset kills it);
  kill_agent  SIGKILL the hvd-agent of a random host.

Each trial checks: horovodrun exits 0; every rank that finished ran every
step and ends with the same weight, that of a job in which no commit was
lost and none applied twice; the ranks of the other host finished; and
nothing of the job is left running.

HVD_CHAOS_TRIALS=N sets the trials per kind (default 10 here; 30 is the
issue's soak), HVD_CHAOS_SEED=N replays a run.
"""

import os
import random
import re
import signal
import time
import unittest

import hvdtest

ELASTICRANK = os.environ["HVD_ELASTICRANK"]
TRIALS = int(os.environ.get("HVD_CHAOS_TRIALS", "10"))
SEED = int(os.environ.get("HVD_CHAOS_SEED", str(random.randrange(1 << 30))))
STEPS = 300
DONE_RE = re.compile(r"elasticrank: start (\d+) rank (\d+) of (\d+): (\d+) "
                     r"steps, .* weight (\d+)")


def job_procs(marker, comm):
    return [pid for pid, c, _ in hvdtest.marked_procs(marker) if c == comm]


def host_of_start(start):
    """-H localhost:2,127.0.0.1:2: ranks 0 and 1 start on localhost."""
    return "localhost" if start < 2 else "127.0.0.1"


class ElasticChaosTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        print("elastic chaos: seed %d, %d trials per kind" % (SEED, TRIALS))
        cls.rng = random.Random(SEED)

    def trial(self, kind):
        marker = hvdtest.new_marker("echaos")
        env = hvdtest.base_env(marker, ER_FLOATS="65536", ER_STEP_MS="5",
                               HOROVOD_PEER_TIMEOUT="2")
        job = hvdtest.Job(hvdtest.hr_args(
            "-np", 4, "--min-np", 2, "-H", "localhost:2,127.0.0.1:2",
            "--start-timeout", 3, ELASTICRANK, STEPS), env=env)
        try:
            job.wait_line(lambda l: "ready" in l, count=4, timeout=30)
            time.sleep(self.rng.uniform(0, 0.5))
            ranks = sorted(job_procs(marker, "elasticrank"))
            agents = sorted(job_procs(marker, "hvd-agent"))
            if kind == "kill_agent":
                victim = self.rng.choice(agents)
                os.kill(victim, signal.SIGKILL)
            else:
                victim = self.rng.choice(ranks)
                os.kill(victim, signal.SIGKILL if kind == "kill_rank"
                        else signal.SIGSTOP)
            rc = job.wait(60)
        finally:
            job.kill()
        what = "%s (victim %d, seed %d)\n%s" % (kind, victim, SEED,
                                                job.describe())
        self.assertEqual(rc, 0, what)
        done = {}
        for line in job.text_lines():
            m = DONE_RE.search(line)
            if m:
                start, rank, size, steps, w = map(int, m.groups())
                done[start] = (size, steps, w)
        self.assertGreaterEqual(len(done), 2, what)
        for start, (size, steps, w) in done.items():
            self.assertEqual(steps, STEPS, what)
            self.assertEqual(w, STEPS * (STEPS + 1) // 2, what)
        # A host lost a rank (or its agent): the other one's ranks finish.
        hosts = {host_of_start(s) for s in done}
        self.assertTrue(hosts, what)
        self.assertEqual(hvdtest.wait_gone(marker, 10), [], what)

    def run_kind(self, kind):
        for i in range(TRIALS):
            with self.subTest(trial=i):
                self.trial(kind)

    def test_kill_rank(self):
        self.run_kind("kill_rank")

    def test_stop_rank(self):
        self.run_kind("stop_rank")

    def test_kill_agent(self):
        self.run_kind("kill_agent")


if __name__ == "__main__":
    unittest.main()
