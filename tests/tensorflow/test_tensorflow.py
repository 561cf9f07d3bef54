"""horovod.tensorflow (worker/python/horovod) with today's TensorFlow,
under horovodrun.

tfcheck.py runs every collective, dtype and op against serial references,
eager, in tf.function and in TF1 graphs, the gradients, and
DistributedGradientTape against one process with the combined batch, on
every rank; kerascheck.py horovod.tensorflow.keras (DistributedOptimizer
in model.fit, the callbacks, load_model, the value functions), once with
Keras 3 and once with Keras 2 from tf_keras (TF_USE_LEGACY_KERAS=1);
tfkill.py kills a rank mid-step; a job initialises, shuts down and
initialises again. TensorFlow and tf_keras come from PyPI
into the venv that scripts/install-deps.sh --tensorflow makes
(build-venv-tf/).
"""

import os
import re
import subprocess
import unittest

import hvdtest
from tfenv import LIB, PY, PYPATH, ROOT

HERE = os.path.dirname(os.path.abspath(__file__))


def env(**extra):
    # tf.keras is Keras 3 unless a test asks for tf_keras.
    values = dict(PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
                  PYTHONDONTWRITEBYTECODE="1", TF_CPP_MIN_LOG_LEVEL="2",
                  TF_USE_LEGACY_KERAS=None)
    values.update(extra)
    return hvdtest.base_env(**values)


def setUpModule():
    r = subprocess.run([PY, "-c", "import tensorflow, tf_keras"],
                       capture_output=True, text=True,
                       env=env()) if os.path.exists(PY) else None
    if r is None or r.returncode != 0:
        raise RuntimeError("%s cannot import tensorflow and tf_keras (%s): "
                           "run scripts/install-deps.sh --tensorflow"
                           % (PY, r.stderr.strip()[-200:] if r else
                              "no such file"))


class TensorFlowTest(unittest.TestCase):

    def check_all_ok(self, script, np, least, suffix="", **extra):
        r = hvdtest.run(hvdtest.hr_args("-np", np, PY,
                                        os.path.join(HERE, script + ".py")),
                        env=env(**extra), timeout=400)
        self.assertEqual(r.rc, 0, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        counts = set()
        for rank in range(np):
            oks = [m.group(1) for _, t in per.get(rank, [])
                   for m in [re.match(r"%s: rank %d: ok (\d+)%s$"
                                      % (script, rank, re.escape(suffix)),
                                      t)] if m]
            self.assertEqual(len(oks), 1, r.describe())
            counts.add(int(oks[0]))
        self.assertEqual(len(counts), 1, counts)
        self.assertGreaterEqual(counts.pop(), least)

    def test_np2(self):
        self.check_all_ok("tfcheck", 2, 21)

    def test_np4(self):
        self.check_all_ok("tfcheck", 4, 21)

    def test_keras_np2(self):
        self.check_all_ok("kerascheck", 2, 10, " (Keras 3)")

    def test_keras_np4(self):
        self.check_all_ok("kerascheck", 4, 10, " (Keras 3)")

    def test_keras2_from_tf_keras_np2(self):
        # Keras 2 code on TensorFlow 2.16+ runs through tf_keras.
        self.check_all_ok("kerascheck", 2, 10, " (Keras 2)",
                          TF_USE_LEGACY_KERAS="1")

    def test_keras_example_trains_with_equal_weights(self):
        ckpt = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                            "hvdtest-keras-%d.keras" % os.getpid())
        example = os.path.join(ROOT, "examples", "keras_train.py")
        try:
            r = hvdtest.run(hvdtest.hr_args(
                "-np", 2, PY, example, "--steps", 4, "--fake-size", 512,
                "--data-dir", "/nonexistent", "--checkpoint", ckpt),
                env=env(), timeout=300)
            self.assertEqual(r.rc, 0, r.describe())
            per, _ = hvdtest.prefixed(r.out_lines)
            sums = {rank: [t for _, t in per.get(rank, [])
                           if t.startswith("weights checksum: ")]
                    for rank in (0, 1)}
            self.assertEqual(len(sums[0]), 1, r.describe())
            self.assertEqual(sums[0], sums[1], r.describe())
            self.assertTrue(any("throughput:" in t for _, t in per[0]))
            self.assertTrue(os.path.exists(ckpt), r.describe())
        finally:
            if os.path.exists(ckpt):
                os.unlink(ckpt)

    def test_init_again_after_shutdown(self):
        # As Horovod's test classes do between tests: the same rank and
        # size each time, and collectives that work.
        code = ("import tensorflow as tf, horovod.tensorflow as hvd\n"
                "for i in range(3):\n"
                "    hvd.init()\n"
                "    s = hvd.allreduce(tf.constant([hvd.rank() + 1.0]), "
                "op=hvd.Sum)\n"
                "    print('cycle', i, hvd.rank(), hvd.size(), "
                "float(s.numpy()[0]))\n"
                "    hvd.shutdown()\n")
        r = hvdtest.run(hvdtest.hr_args("-np", 2, PY, "-c", code), env=env(),
                        timeout=180)
        self.assertEqual(r.rc, 0, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        for rank in (0, 1):
            self.assertEqual([t for _, t in per.get(rank, [])
                              if t.startswith("cycle")],
                             ["cycle %d %d 2 3.0" % (i, rank)
                              for i in range(3)], r.describe())

    def test_killed_rank_fails_the_others(self):
        r = hvdtest.run(hvdtest.hr_args("-np", 3, PY,
                                        os.path.join(HERE, "tfkill.py")),
                        env=env(), timeout=180)
        self.assertEqual(r.rc, 128 + 9, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        for rank in (0, 1):
            lines = [t for _, t in per.get(rank, [])]
            self.assertTrue(any(
                "HorovodInternalError" in t and "rank 2 (host localhost)" in t
                for t in lines), r.describe())
        self.assertIn(hvdtest.ERR_PREFIX + "rank 2 (host localhost, "
                      "local_rank 2) was killed by signal 9 (SIGKILL)",
                      r.err, r.describe())


if __name__ == "__main__":
    unittest.main()
