"""Runs examples/pytorch_elastic.py under horovodrun's elastic mode
(--host-discovery-script) and checks what it claims.

A plain run on one host finishes every epoch at the size it started
with. In a run on two hosts (localhost and 127.0.0.1 are two hosts of
this machine) the process that started as rank 1 fails halfway through
epoch 1 (--fail-at): its host is blacklisted, the job goes on with the
other host's two ranks, and the epochs after it run at size 2. In both,
the job trains on every sample of each epoch exactly once (the
ElasticSampler deals out what is left of an epoch after a reset, and the
steps undone by the failure are not counted), the final line agrees with
the epochs' lines, and no process of the job is left.

Needs Debian's PyTorch (/usr/bin/python3, or HVD_TORCH_PYTHON), the
horovod package (HVD_PYTHONPATH) and libhvd (HVD_LIBRARY), as the tests
in tests/torch/ do.
"""

import math
import os
import re
import subprocess
import unittest

from elasticcheck import assert_rank_1_lost
from torchenv import LIB, PY, PYPATH, ROOT, hvdtest

EXAMPLE = os.path.join(ROOT, "examples", "pytorch_elastic.py")

EPOCH_RE = re.compile(r"^pytorch_elastic: epoch (\d+): (\d+) ranks, "
                      r"loss ([0-9.]+|nan), (\d+) samples "
                      r"\((\d+) distinct of (\d+)\)$")
DONE_RE = re.compile(r"^pytorch_elastic: done: (\d+) epochs, (\d+) ranks, "
                     r"loss ([0-9.]+|nan), (\d+) samples$")
RESET_RE = re.compile(r"^pytorch_elastic: reset: (\d+) ranks$")

# Small enough for a few seconds on two shared cores: 512 samples in
# batches of 16 per rank make 8 steps per epoch at size 4, 16 at size 2.
FAKE_SIZE = 512
BATCH = 16


def setUpModule():
    r = subprocess.run([PY, "-c", "import torch, torchvision"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s cannot import torch and torchvision: %s"
                           % (PY, r.stderr.strip()[-300:]))


def discovery_script(path, hosts):
    """An executable printing hosts, one a line."""
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + "".join("echo %s\n" % h for h in hosts))
    os.chmod(path, 0o755)


class PytorchElasticTest(hvdtest.TestCase):

    def run_example(self, hosts, np, epochs, *extra):
        """Runs the example elastically on hosts; returns the Result and
        rank 0's lines (the text after the prefix, in order)."""
        script = os.path.join(self.tmp, "discover.sh")
        discovery_script(script, hosts)
        r = self.run_hr(
            "-np", np, "--min-np", 1, "--max-np", 4,
            "--host-discovery-script", script,
            PY, EXAMPLE, "--data-dir", "/nonexistent",
            "--fake-size", FAKE_SIZE, "--batch-size", BATCH,
            "--epochs", epochs, *extra,
            timeout=120, PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
            PYTHONDONTWRITEBYTECODE="1",
            HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")
        self.assertEqual(hvdtest.wait_gone(self.marker), [], r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        return r, [t for _, t in per.get(0, [])]

    def check_epochs(self, r, lines, sizes):
        """Rank 0 reported each epoch once, in order, at the sizes given,
        with every sample once; the final line sums them up."""
        info = r.describe()
        epochs = [m for m in map(EPOCH_RE.match, lines) if m]
        self.assertEqual([int(m.group(1)) for m in epochs],
                         list(range(len(sizes))), info)
        self.assertEqual([int(m.group(2)) for m in epochs], sizes, info)
        for m in epochs:
            # seen, distinct, dataset: each sample exactly once.
            self.assertEqual(m.group(4, 5, 6), (str(FAKE_SIZE),) * 3, info)
            self.assertTrue(math.isfinite(float(m.group(3))), info)
        done = [m for m in map(DONE_RE.match, lines) if m]
        self.assertEqual(len(done), 1, info)
        self.assertEqual(done[0].groups(),
                         (str(len(sizes)), str(sizes[-1]),
                          epochs[-1].group(3), str(FAKE_SIZE * len(sizes))),
                         info)

    def test_one_host(self):
        r, lines = self.run_example(["localhost:2"], 2, 2)
        self.assertEqual(r.rc, 0, r.describe())
        self.check_epochs(r, lines, [2, 2])
        self.assertEqual([l for l in lines if RESET_RE.match(l)], [],
                         r.describe())
        self.assertEqual(r.warning_lines(), [], r.describe())

    def test_rank_failure(self):
        # A commit every 3 steps: the failure at step 4 of epoch 1 undoes
        # one step, and the 2 ranks left share the 512 - 3 * 64 samples
        # the job had not committed.
        r, lines = self.run_example(["localhost:2", "127.0.0.1:2"], 4, 3,
                                    "--batches-per-commit", 3,
                                    "--fail-at", "1:1")
        info = r.describe()
        self.assertEqual(r.rc, 0, info)
        assert_rank_1_lost(self, r, lines, "pytorch_elastic", RESET_RE, info)
        self.check_epochs(r, lines, [4, 2, 2])

    def test_bad_fail_at(self):
        r = subprocess.run([PY, EXAMPLE, "--fail-at", "1"],
                           capture_output=True, text=True,
                           env=hvdtest.base_env(PYTHONPATH=PYPATH,
                                                HVD_LIBRARY=LIB),
                           timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("expected RANK:EPOCH", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
