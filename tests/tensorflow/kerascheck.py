"""Run in every rank under horovodrun: horovod.tensorflow.keras (and its
alias horovod.keras) with Keras 3: DistributedOptimizer in model.fit
against one process with the combined batch, the callbacks' effects,
load_model, and the value functions.

Prints "kerascheck: rank R: ok N" when every test passed, else the
failures, and exits 1.
"""

import os
import shutil
import sys
import tempfile
import unittest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.keras as hvd_alias  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.tensorflow import barrier  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.config.threading.set_intra_op_parallelism_threads(1)

STEPS, BATCH = 4, 8


def data():
    """Every rank's shard, the same on every rank to build the reference."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((hvd.size(), STEPS * BATCH, 5)).astype("float32")
    y = (x @ rng.standard_normal((5, 1)).astype("float32") +
         0.1 * rng.standard_normal((hvd.size(), STEPS * BATCH, 1))
         ).astype("float32")
    return x, y


def model(seed):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4),
                          keras.layers.Dense(1)])
    return m


def gathered_equal(value):
    """Whether every rank holds the same value."""
    allv = hvd.allgather(np.asarray(value, dtype=np.float64).reshape(1, -1))
    return np.allclose(allv, allv[0:1], atol=1e-6)


class Keras(unittest.TestCase):

    def setUp(self):
        self.r, self.n = hvd.rank(), hvd.size()

    def test_fit_matches_the_combined_batch(self):
        x, y = data()
        m = model(1)
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=2,
              shuffle=False, verbose=0)
        ref = model(1)
        ref.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                    loss="mse")
        # Step s of the combined batch: every rank's batch s together.
        xs = np.concatenate([x[:, s * BATCH:(s + 1) * BATCH].reshape(-1, 5)
                             for s in range(STEPS)])
        ys = np.concatenate([y[:, s * BATCH:(s + 1) * BATCH].reshape(-1, 1)
                             for s in range(STEPS)])
        ref.fit(xs, ys, batch_size=BATCH * self.n, epochs=2, shuffle=False,
                verbose=0)
        for a, b in zip(m.get_weights(), ref.get_weights()):
            self.assertTrue(np.allclose(a, b, atol=1e-5), (a, b))
        self.assertEqual(type(m.optimizer).__name__, "SGD")

    def test_broadcast_callback_starts_every_rank_the_same(self):
        x, y = data()
        m = model(100 + self.r)  # different weights on every rank
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.Adam(0.01)), loss="mse")
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
        for w in m.get_weights():
            self.assertTrue(gathered_equal(w))

    def test_metric_average(self):
        x, y = data()
        m = model(1)
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.01)), loss="mse", metrics=["mae"])
        h = m.fit(x[self.r] * (self.r + 1), y[self.r], batch_size=BATCH,
                  epochs=2, verbose=0,
                  callbacks=[hvd.callbacks.MetricAverageCallback()])
        self.assertTrue(gathered_equal(h.history["loss"]))
        self.assertTrue(gathered_equal(h.history["mae"]))
        m2 = model(1)
        m2.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        h2 = m2.fit(x[self.r] * (self.r + 1), y[self.r], batch_size=BATCH,
                    epochs=1, verbose=0)
        if self.n > 1:
            self.assertFalse(gathered_equal(h2.history["loss"]))

    def test_learning_rate_callbacks(self):
        x, y = data()
        m = model(1)
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.1)), loss="mse")
        seen = []
        log = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda e, logs: seen.append(
                float(m.optimizer.learning_rate.numpy())))
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=3, verbose=0,
              callbacks=[hvd.callbacks.LearningRateWarmupCallback(
                  initial_lr=0.1, warmup_epochs=2), log])
        n = self.n
        # The last batch of epoch e sets e + (STEPS-1)/STEPS of the ramp.
        for e in range(2):
            t = e + (STEPS - 1) / STEPS
            self.assertAlmostEqual(seen[e], 0.1 / n * (t * (n - 1) / 2 + 1),
                                   places=5)
        seen.clear()
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=3, verbose=0,
              callbacks=[hvd.callbacks.LearningRateScheduleCallback(
                  initial_lr=0.1, multiplier=0.5, start_epoch=1), log])
        self.assertAlmostEqual(seen[2], 0.05, places=6)

    def test_checkpoint_and_load_model(self):
        x, y = data()
        m = model(1)
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.01, momentum=0.5)), loss="mse")
        folder = tempfile.mkdtemp(prefix="hvdtest-keras-")
        path = os.path.join(folder, "best.keras")
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=2, verbose=0,
              validation_data=(x[0], y[0]),
              callbacks=[hvd.callbacks.BestModelCheckpoint(filepath=path)])
        self.assertEqual(os.path.exists(path), self.r == 0)
        # Every rank loads rank 0's file; its optimizer is distributed.
        name = hvd.broadcast_object(path if self.r == 0 else None,
                                    root_rank=0, name="checkpoint")
        loaded = hvd.load_model(name)
        self.assertTrue(getattr(loaded.optimizer, "_hvd_distributed", False))
        loaded.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=1,
                   verbose=0)
        for w in loaded.get_weights():
            self.assertTrue(gathered_equal(w))
        barrier()  # everyone has loaded rank 0's file
        shutil.rmtree(folder)

    def test_values_and_alias(self):
        self.assertEqual(hvd.allreduce(np.float32(self.r), op=hvd.Sum),
                         sum(range(self.n)))
        self.assertEqual(hvd.allgather(np.array([self.r])).tolist(),
                         list(range(self.n)))
        self.assertEqual(hvd.broadcast(np.array([self.r]), 0).tolist(), [0])
        self.assertIs(hvd_alias.DistributedOptimizer,
                      hvd.DistributedOptimizer)
        with self.assertRaises(NotImplementedError):
            hvd.broadcast_global_variables(0)
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(hvd.DistributedOptimizer(
                keras.optimizers.SGD(0.1)))


def main():
    hvd.init()
    suite = unittest.TestSuite()
    for name in unittest.TestLoader().getTestCaseNames(Keras):
        suite.addTest(Keras(name))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=0).run(suite)
    if result.wasSuccessful():
        print("kerascheck: rank %d: ok %d" % (hvd.rank(), result.testsRun))
    hvd.shutdown()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
