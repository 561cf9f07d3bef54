"""examples/keras_elastic.py (horovod.tensorflow.keras's KerasState and
elastic callbacks, Keras 3) under horovodrun's elastic mode
(--host-discovery-script; localhost and 127.0.0.1 are two hosts of this
machine).

- A lost rank: on two hosts of two slots, the process that started as
  rank 1 raises an exception halfway through epoch 1 (--fail-at); its
  host is blacklisted and the job finishes on the other host at size 2.
- An added host: the job starts on localhost:2; once rank 0 has reported
  the first epoch the discovery script lists 127.0.0.1:2 too, and the job
  finishes at size 4.

Each run must exit 0, report every epoch once and in order with the size
it ran at, keep state.epoch (the epochs done) equal to the epochs
reported across the reset (Horovod's bug #2844: fit's initial_epoch
counted twice after a reset), learn, end with the same weights on every
rank (the example checks) and leave no process behind.
"""

import math
import os
import re
import unittest

import hvdtest
from elasticcheck import assert_rank_1_lost
from tfenv import ELASTIC_ENV, PY, ROOT, require_tf_keras

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(ROOT, "examples", "keras_elastic.py")

LINE_RE = re.compile(r"^\[(\d+),(\d+)\]<stdout>:(.*)$")
EPOCH_RE = re.compile(r"^keras_elastic: epoch (\d+): (\d+) ranks, "
                      r"loss ([0-9.]+|nan), state\.epoch (\d+)$")
DONE_RE = re.compile(r"^keras_elastic: done: (\d+) epochs, (\d+) ranks, "
                     r"loss ([0-9.]+|nan)$")
RESET_RE = re.compile(r"^keras_elastic: reset: (\d+) ranks$")

RUN_TIMEOUT = 150


def setUpModule():
    require_tf_keras()


def rank0_lines(out):
    """The text of rank 0's stdout lines, in order (after a reset rank 0
    may be another process; only rank 0 prints the example's lines)."""
    return [m.group(3) for m in map(LINE_RE.match, out.splitlines())
            if m and m.group(1) == "0"]


class KerasElasticTest(hvdtest.TestCase):

    def discovery_script(self, lines):
        """A discovery script: lines (shell commands) in order."""
        path = os.path.join(self.tmp, "discover.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + "".join(l + "\n" for l in lines))
        os.chmod(path, 0o755)
        return path

    def example_args(self, np, script, epochs, *extra):
        return ["-np", np, "--min-np", 1, "--max-np", 4,
                "--host-discovery-script", script,
                PY, EXAMPLE, "--epochs", epochs, *extra]

    def check_run(self, rc, out, err, sizes, info):
        """Checks a finished run: exit 0, an epoch line per epoch at the
        sizes given, the loss falling, and the final line; returns rank
        0's lines."""
        self.assertEqual(rc, 0, info)
        self.assertEqual(hvdtest.wait_gone(self.marker), [], info)
        lines = rank0_lines(out)
        epochs = [m for m in map(EPOCH_RE.match, lines) if m]
        self.assertEqual([int(m.group(1)) for m in epochs],
                         list(range(1, len(sizes) + 1)), info)
        self.assertEqual([int(m.group(2)) for m in epochs], sizes, info)
        losses = [float(m.group(3)) for m in epochs]
        self.assertTrue(all(math.isfinite(v) for v in losses), info)
        # The classes are patterns plus noise: it learns, reset or not.
        self.assertLess(losses[-1], losses[0], info)
        done = [m for m in map(DONE_RE.match, lines) if m]
        self.assertEqual(len(done), 1, info)
        self.assertEqual(done[0].group(2, 3),
                         (str(sizes[-1]), epochs[-1].group(3)), info)
        self.assertNotIn("weights differ", out + err, info)
        return lines, epochs, done[0]

    def check_state_epoch(self, epochs, done, info):
        # Horovod #2844: after a reset at state.epoch E > 0, state.epoch
        # must count the epochs done, not run ahead by E.
        self.assertEqual([int(m.group(4)) for m in epochs],
                         [int(m.group(1)) for m in epochs], info)
        self.assertEqual(int(done.group(1)), len(epochs), info)

    def test_lost_rank(self):
        script = self.discovery_script(["echo localhost:2",
                                        "echo 127.0.0.1:2"])
        r = self.run_hr(*self.example_args(4, script, 3, "--fail-at", "1:1",
                                           "--batches-per-commit", 3,
                                           "--fake-size", 1024),
                        timeout=RUN_TIMEOUT, **ELASTIC_ENV)
        info = r.describe()
        lines, epochs, done = self.check_run(r.rc, r.out, r.err, [4, 2, 2],
                                             info)
        assert_rank_1_lost(self, r, lines, "keras_elastic", RESET_RE, info)
        self.check_state_epoch(epochs, done, info)

    def test_added_host(self):
        # 127.0.0.1 joins once the flag file exists, which the test makes
        # when rank 0 has reported epoch 1. The new processes take a few
        # seconds to load TensorFlow: the job may scale up in any later
        # epoch but the last, which ends the job sooner than that.
        flag = os.path.join(self.tmp, "add")
        script = self.discovery_script([
            "echo localhost:2",
            "[ -f %s ] && echo 127.0.0.1:2" % flag,
            "exit 0"])
        epochs = 5
        job = self.start_hr(*self.example_args(2, script, epochs,
                                               "--fake-size", 2048),
                            **ELASTIC_ENV)
        job.wait_line(lambda l: re.search(r"<stdout>:keras_elastic: epoch 1:",
                                          l) is not None,
                      timeout=RUN_TIMEOUT)
        with open(flag, "w"):
            pass
        job.wait(timeout=RUN_TIMEOUT)
        info = job.describe()
        lines = rank0_lines(job.out)
        sizes = [int(m.group(2)) for m in map(EPOCH_RE.match, lines) if m]
        # Two ranks, then four: the first epoch at 2, the last at 4.
        self.assertEqual(len(sizes), epochs, info)
        grown = sizes.index(4) if 4 in sizes else epochs
        self.assertTrue(1 <= grown < epochs, info)
        self.assertEqual(sizes, [2] * grown + [4] * (epochs - grown), info)
        lines, found, done = self.check_run(job.rc, job.out, job.err, sizes,
                                            info)
        self.assertEqual([RESET_RE.match(l).group(1) for l in lines
                          if RESET_RE.match(l)], ["4"], info)
        self.check_state_epoch(found, done, info)


if __name__ == "__main__":
    unittest.main(verbosity=2)
