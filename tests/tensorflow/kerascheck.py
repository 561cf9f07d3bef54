"""Run in every rank under horovodrun: horovod.tensorflow.keras (and its
alias horovod.keras) on tf.keras, which is Keras 3, or Keras 2 from
tf_keras when the job runs with TF_USE_LEGACY_KERAS=1: DistributedOptimizer
in model.fit against one process with the combined batch (also with
backward_passes_per_step), local variables, the callbacks' effects,
load_model, the elastic state and hvd.elastic.run's restore and reset,
and the value functions' return types.

Prints "kerascheck: rank R: ok N (Keras K)" when every test passed, else
the failures, and exits 1.
"""

import os
import shutil
import sys
import tempfile
import unittest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.keras as hvd_alias  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.common import elastic as common_elastic  # noqa: E402
from horovod.tensorflow import barrier  # noqa: E402
from horovod.tensorflow import elastic as tf_elastic  # noqa: E402

keras = tf.keras
tf.get_logger().setLevel("ERROR")
tf.config.threading.set_intra_op_parallelism_threads(1)

STEPS, BATCH = 4, 8


def keras_major():
    """3 for Keras 3, 2 for tf_keras."""
    return 2 if keras.__name__.startswith("tf_keras") else 3


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
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(4),
                             keras.layers.Dense(1)])


def gathered_equal(value):
    """Whether every rank holds the same value."""
    allv = hvd.allgather(np.asarray(value, dtype=np.float64).reshape(1, -1))
    allv = allv.numpy()
    return np.allclose(allv, allv[0:1], atol=1e-6)


class Keras(unittest.TestCase):

    def setUp(self):
        self.r, self.n = hvd.rank(), hvd.size()

    def fit_against_combined_batch(self, passes, **hvd_args):
        """Trains with DistributedOptimizer on each rank's shard, and
        without on the combined batches of `passes` steps of every rank;
        the weights must agree."""
        x, y = data()
        m = model(1)
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.SGD(0.05, momentum=0.9), **hvd_args),
            loss="mse")
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=2,
              shuffle=False, verbose=0)
        ref = model(1)
        ref.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                    loss="mse")
        # Update u of the combined run: passes u*passes... of every rank.
        rows = BATCH * passes
        xs = np.concatenate([x[:, u * rows:(u + 1) * rows].reshape(-1, 5)
                             for u in range(STEPS // passes)])
        ys = np.concatenate([y[:, u * rows:(u + 1) * rows].reshape(-1, 1)
                             for u in range(STEPS // passes)])
        ref.fit(xs, ys, batch_size=rows * self.n, epochs=2, shuffle=False,
                verbose=0)
        for a, b in zip(m.get_weights(), ref.get_weights()):
            self.assertTrue(np.allclose(a, b, atol=1e-5), (a, b))
        self.assertEqual(type(m.optimizer).__name__, "SGD")

    def test_fit_matches_the_combined_batch(self):
        self.fit_against_combined_batch(1)

    def test_backward_passes_per_step(self):
        self.fit_against_combined_batch(
            2, backward_passes_per_step=2, average_aggregated_gradients=True)

    def test_local_layers_keep_their_gradients(self):
        x, y = data()
        m = model(1)
        opt = hvd_alias.PartialDistributedOptimizer(
            keras.optimizers.SGD(0.05), local_layers=[m.layers[0]])
        m.compile(optimizer=opt, loss="mse")
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=1,
              shuffle=False, verbose=0)
        local, shared = m.layers[0].get_weights(), m.layers[1].get_weights()
        for w in shared:
            self.assertTrue(gathered_equal(w))
        if self.n > 1:
            self.assertFalse(gathered_equal(local[0]))

    def test_broadcast_callback_starts_every_rank_the_same(self):
        x, y = data()
        m = model(100 + self.r)  # different weights on every rank
        m.compile(optimizer=hvd.DistributedOptimizer(
            keras.optimizers.Adam(0.01)), loss="mse")
        own = m.layers[1].kernel
        before = own.numpy()
        cb = hvd.callbacks.BroadcastGlobalVariablesCallback(
            0, local_variables=[own])
        self.assertIsInstance(cb, keras.callbacks.Callback)
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=1, verbose=0,
              callbacks=[cb])
        for w in m.layers[0].get_weights():
            self.assertTrue(gathered_equal(w))
        if self.n > 1:
            # The local variable kept its own start: it still differs.
            self.assertFalse(gathered_equal(before))
            self.assertFalse(gathered_equal(own.numpy()))

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
        # Horovod's warm-up ends each epoch e on the ramp's value at e + 1.
        for e in range(2):
            self.assertAlmostEqual(seen[e], 0.1 / n * ((e + 1) * (n - 1) / 2
                                                       + 1), places=5)
        seen.clear()
        # A number is a factor per epoch from start_epoch on.
        m.fit(x[self.r], y[self.r], batch_size=BATCH, epochs=4, verbose=0,
              callbacks=[hvd.callbacks.LearningRateScheduleCallback(
                  initial_lr=0.1, multiplier=0.5, start_epoch=1), log])
        self.assertAlmostEqual(seen[2], 0.05, places=6)
        self.assertAlmostEqual(seen[3], 0.025, places=6)

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

    def test_elastic_state(self):
        m = model(100 + self.r)
        state = hvd.elastic.KerasState(m, keras.optimizers.SGD(0.1),
                                       epoch=self.r)
        state.sync()
        self.assertEqual(state.epoch, 0)
        synced = m.get_weights()
        for w in synced:
            self.assertTrue(gathered_equal(w))
        m.set_weights([w + 1 for w in synced])
        state.epoch = 5
        state.restore()
        self.assertEqual(state.epoch, 0)
        for a, b in zip(m.get_weights(), synced):
            self.assertTrue(np.allclose(a, b))

    def test_elastic_run_restores_and_resets(self):
        # Every rank fails at the same step once, as when a peer is lost
        # inside a tf.function (UnknownError naming the collective): the
        # state goes back to its commit, the ranks reset, and go on.
        m = model(300 + self.r)
        state = hvd.elastic.KerasState(m, keras.optimizers.SGD(0.1),
                                       epoch=0, batch=0)
        committed, resets = {}, []

        def on_reset():
            self.assertTrue(hvd.is_initialized())
            for a, b in zip(m.get_weights(), committed["w"]):
                self.assertTrue(np.array_equal(a, b))
            resets.append(state.batch)
        state.register_reset_callbacks([on_reset])

        @hvd.elastic.run
        def train(state):
            while state.batch < 4:
                if state.batch == 3 and not resets:
                    raise tf.errors.UnknownError(
                        None, None, "HorovodAllreduce: simulated lost peer")
                m.set_weights([w * 0.5 + 1 for w in m.get_weights()])
                state.batch += 1
                if state.batch == 2:
                    state.commit()
                    committed["w"] = m.get_weights()
            return m.get_weights()

        final = train(state)
        self.assertEqual(resets, [2])
        for w in final:
            self.assertTrue(gathered_equal(w))
        self.assertIs(tf_elastic.ObjectState, common_elastic.ObjectState)

    def test_values_and_alias(self):
        # Horovod returns tensors, not NumPy values.
        total = hvd.allreduce(np.float32(self.r), op=hvd.Sum)
        self.assertIsInstance(total, tf.Tensor)
        self.assertEqual(total.numpy(), sum(range(self.n)))
        gathered = hvd.allgather(np.array([self.r]))
        self.assertIsInstance(gathered, tf.Tensor)
        self.assertEqual(gathered.numpy().tolist(), list(range(self.n)))
        root = hvd.broadcast(tf.constant([self.r]), 0)
        self.assertIsInstance(root, tf.Tensor)
        self.assertEqual(root.numpy().tolist(), [0])
        self.assertIs(hvd_alias.DistributedOptimizer,
                      hvd.DistributedOptimizer)
        with self.assertRaises(RuntimeError):
            hvd.broadcast_global_variables(0)
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(hvd.DistributedOptimizer(
                keras.optimizers.SGD(0.1)))
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd.Max)


def main():
    hvd.init()
    suite = unittest.TestSuite()
    for name in unittest.TestLoader().getTestCaseNames(Keras):
        suite.addTest(Keras(name))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=0).run(suite)
    if result.wasSuccessful():
        print("kerascheck: rank %d: ok %d (Keras %d)"
              % (hvd.rank(), result.testsRun, keras_major()))
    hvd.shutdown()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
