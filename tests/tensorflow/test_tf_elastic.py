"""tf_elastic.py (a TensorFlow 2 custom training loop with
hvd.DistributedGradientTape in hvd.elastic.run) under horovodrun's
elastic mode (--host-discovery-script; localhost and 127.0.0.1 are two
hosts of this machine), its train step eager and in a tf.function:

- A lost rank: on two hosts of two slots (-np 4 --min-np 2), the process
  that started as rank 1 raises an exception halfway through epoch 1
  (counted from 0); horovodrun blacklists its host and the job finishes
  on the other host at size 2.
- An added host: the job starts on localhost:2 (-np 2); at the end of
  epoch 1 rank 0 makes the flag file that makes the discovery script list
  127.0.0.1:2 too, and the job finishes at size 4.
- With TensorFlowState (plain tf.Variables) instead of
  TensorFlowKerasState, in a tf.function: a host added after epoch 1,
  then the process that started as rank 2 on it fails in epoch 2
  (counted from 0): sizes 2, 4, 2, 2.

Each run must exit 0, report every epoch once and in order with the size
it ran at, learn, end with the same weights on every rank of the last
size (each rank prints a digest) and leave no process behind.
"""

import math
import os
import re

import hvdtest
from tfenv import ELASTIC_ENV, PY, require_tf_keras

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "tf_elastic.py")

LINE_RE = re.compile(r"^\[(\d+),(\d+)\]<stdout>:(.*)$")
EPOCH_RE = re.compile(r"^tf_elastic: epoch (\d+): (\d+) ranks, "
                      r"loss ([0-9.]+|nan|inf)$")
RESET_RE = re.compile(r"^tf_elastic: reset: (\d+) ranks$")
FINAL_RE = re.compile(r"^tf_elastic: rank (\d+) of (\d+) \(started as "
                      r"(\d+)\): epoch (\d+), weights ([0-9a-f]{16}), "
                      r"sum (\S+)$")

RUN_TIMEOUT = 150


def setUpModule():
    require_tf_keras()


def stdout_lines(out):
    """[(rank, text)] of the prefixed stdout lines, in order."""
    return [(int(m.group(1)), m.group(3))
            for m in map(LINE_RE.match, out.splitlines()) if m]


class TfElasticTest(hvdtest.TestCase):

    def discovery_script(self, lines):
        """A discovery script: lines (shell commands) in order."""
        path = os.path.join(self.tmp, "discover.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + "".join(l + "\n" for l in lines))
        os.chmod(path, 0o755)
        return path

    def run_job(self, np, min_np, script, mode, epochs, *extra):
        return self.run_hr("-np", np, "--min-np", min_np, "--max-np", 4,
                           "--host-discovery-script", script,
                           PY, SCRIPT, "--mode", mode, "--epochs", epochs,
                           *extra, timeout=RUN_TIMEOUT, **ELASTIC_ENV)

    def check_run(self, r, sizes, started, resets):
        """Checks a finished run: exit 0, nothing left, rank 0's epoch
        lines (one per epoch, in order, at the sizes given; the loss
        falling), its reset lines (the sizes after each reset), and one
        final line per rank of the last size, from the processes that
        started as the ranks in started, all with the same weights."""
        info = r.describe()
        self.assertEqual(r.rc, 0, info)
        self.assertEqual(hvdtest.wait_gone(self.marker), [], info)
        lines = stdout_lines(r.out)
        rank0 = [text for rank, text in lines if rank == 0]
        epochs = [m for m in map(EPOCH_RE.match, rank0) if m]
        self.assertEqual([int(m.group(1)) for m in epochs],
                         list(range(1, len(sizes) + 1)), info)
        self.assertEqual([int(m.group(2)) for m in epochs], sizes, info)
        # Only rank 0 reports.
        self.assertEqual(sum(1 for rank, text in lines
                             if EPOCH_RE.match(text)), len(sizes), info)
        losses = [float(m.group(3)) for m in epochs]
        self.assertTrue(all(math.isfinite(v) for v in losses), info)
        self.assertLess(losses[-1], losses[0], info)
        self.assertEqual([int(RESET_RE.match(t).group(1)) for t in rank0
                          if RESET_RE.match(t)], resets, info)

        final = [(rank, FINAL_RE.match(text)) for rank, text in lines
                 if FINAL_RE.match(text)]
        size = sizes[-1]
        # One line per rank, printed under that rank, at the last size.
        self.assertEqual(sorted(int(m.group(1)) for _, m in final),
                         list(range(size)), info)
        for rank, m in final:
            self.assertEqual(rank, int(m.group(1)), info)
            self.assertEqual(int(m.group(2)), size, info)
            self.assertEqual(int(m.group(4)), len(sizes), info)
        self.assertEqual(sorted(int(m.group(3)) for _, m in final),
                         sorted(started), info)
        # The same weights on every rank.
        self.assertEqual(len({m.group(5, 6) for _, m in final}), 1, info)
        return info

    def lost_rank(self, mode):
        script = self.discovery_script(["echo localhost:2",
                                        "echo 127.0.0.1:2"])
        r = self.run_job(4, 2, script, mode, 3, "--fail-at", "1:1")
        # localhost's processes (started as 0 and 1) are gone: the
        # processes that started as 2 and 3 finish as ranks 0 and 1.
        info = self.check_run(r, [4, 2, 2], [2, 3], [2])
        self.assertIn("RuntimeError: tf_elastic: process started as rank 1 "
                      "fails in epoch 1 (--fail-at)", r.err, info)
        warnings = r.warning_lines()
        self.assertTrue(any("rank 1 on localhost exited with status 1" in w
                            for w in warnings), info)
        self.assertTrue(any("host localhost is blacklisted" in w
                            for w in warnings), info)

    def added_host(self, mode):
        flag = os.path.join(self.tmp, "add")
        script = self.discovery_script([
            "echo localhost:2",
            "[ -f %s ] && echo 127.0.0.1:2" % flag,
            "exit 0"])
        # Rank 0 makes the flag at the end of epoch 1 and waits for the
        # notice: the job grows at that epoch's commit.
        r = self.run_job(2, 2, script, mode, 3, "--add-flag", flag,
                         "--add-after", 1)
        info = self.check_run(r, [2, 4, 4], [0, 1, 2, 3], [4])
        self.assertEqual([w for w in r.warning_lines()
                          if "blacklisted" in w or "exited" in w], [], info)

    def test_lost_rank_eager(self):
        self.lost_rank("eager")

    def test_lost_rank_function(self):
        self.lost_rank("function")

    def test_added_host_eager(self):
        self.added_host("eager")

    def test_added_host_function(self):
        self.added_host("function")

    def test_variables_state_added_then_lost(self):
        # TensorFlowState of plain tf.Variables (its learning rate a
        # variable, read by the traced step after each reset).
        flag = os.path.join(self.tmp, "add")
        script = self.discovery_script([
            "echo localhost:2",
            "[ -f %s ] && echo 127.0.0.1:2" % flag,
            "exit 0"])
        r = self.run_job(2, 2, script, "function", 4, "--state", "variables",
                         "--add-flag", flag, "--add-after", 1,
                         "--fail-at", "2:2")
        # Grown to 4 after epoch 1; in epoch 3 (2 counted from 0) the
        # process that started as rank 2 fails and 127.0.0.1 is
        # blacklisted: localhost's processes finish.
        info = self.check_run(r, [2, 4, 2, 2], [0, 1], [4, 2])
        warnings = r.warning_lines()
        self.assertTrue(any("rank 2 on 127.0.0.1 exited with status 1" in w
                            for w in warnings), info)
        self.assertTrue(any("host 127.0.0.1 is blacklisted" in w
                            for w in warnings), info)


if __name__ == "__main__":
    hvdtest.main()
