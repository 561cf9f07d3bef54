"""Run in every rank under horovodrun: horovod.tensorflow (our package on
libhvd) against serial references that each rank computes itself, since
every rank's input is a function of its rank; in eager mode and inside
tf.function.

Prints "tfcheck: rank R: ok N" when every test passed, else the failures,
and exits 1.
"""

import os
import sys
import unittest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.threading.set_intra_op_parallelism_threads(1)

INTS = [tf.uint8, tf.int8, tf.int16, tf.int32, tf.int64]
FLOATS = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def data(r, dtype, shape=(3, 5)):
    """Rank r's input: small nonzero values, so that sums and products of
    every dtype stay exact."""
    g = np.random.default_rng(1000 + r)
    lo = 1 if dtype == tf.uint8 else -2
    t = g.integers(lo, 3, size=shape)
    t[t == 0] = 1
    return tf.cast(tf.constant(t), dtype)


def reference(dtype, op, n, shape=(3, 5)):
    parts = np.stack([tf.cast(data(r, dtype, shape), tf.float64).numpy()
                      for r in range(n)])
    if op in (hvd.Sum, hvd.Average):
        out = parts.sum(0)
        if op == hvd.Average:
            out = np.trunc(out / n) if dtype in INTS else out / n
    elif op == hvd.Min:
        out = parts.min(0)
    elif op == hvd.Max:
        out = parts.max(0)
    else:
        out = parts.prod(0)
    return out


def close(a, b, dtype):
    tol = {tf.float16: 1e-2, tf.bfloat16: 5e-2}.get(dtype, 1e-6)
    return np.allclose(tf.cast(a, tf.float64).numpy(), b, rtol=tol, atol=tol)


class Collectives(unittest.TestCase):
    """Every collective, dtype and op, eager and in tf.function."""

    def setUp(self):
        self.r, self.n = hvd.rank(), hvd.size()

    def test_basics(self):
        self.assertTrue(hvd.is_initialized())
        self.assertEqual(int(hvd.size_op()), self.n)
        self.assertEqual(int(hvd.rank_op()), self.r)
        self.assertTrue(0 <= hvd.local_rank() < hvd.local_size())

    def test_allreduce_every_dtype_and_op(self):
        graph = tf.function(lambda t, op: hvd.allreduce(t, op=op))
        for dtype in INTS + FLOATS:
            for op in OPS:
                with self.subTest(dtype=dtype.name, op=op):
                    want = reference(dtype, op, self.n)
                    got = hvd.allreduce(data(self.r, dtype), op=op)
                    self.assertEqual(got.dtype, dtype)
                    self.assertTrue(close(got, want, dtype), got)
                    got = graph(data(self.r, dtype), op)
                    self.assertTrue(close(got, want, dtype), got)

    def test_options(self):
        x = data(self.r, tf.float32)
        want = reference(tf.float32, hvd.Sum, self.n)
        got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5,
                            postscale_factor=4.0)
        self.assertTrue(close(got, want * 2, tf.float32))
        got = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
        self.assertTrue(close(got, want, tf.float32))
        got = hvd.allreduce(tf.cast(x, tf.float64), op=hvd.Sum,
                            compression=hvd.Compression.fp16)
        self.assertEqual(got.dtype, tf.float64)
        self.assertTrue(close(got, want, tf.float64))
        with self.assertWarns(DeprecationWarning):
            got = hvd.allreduce(x, average=False)
        self.assertTrue(close(got, want, tf.float32))

    def test_grouped_allreduce(self):
        xs = [data(self.r, tf.float32), data(self.r, tf.int32, (7,)),
              data(self.r, tf.float32, (2,))]
        outs = hvd.grouped_allreduce(xs, op=hvd.Sum)
        for x, o in zip(xs, outs):
            self.assertTrue(close(o, reference(x.dtype, hvd.Sum, self.n,
                                               tuple(x.shape)), x.dtype))
        outs = tf.function(lambda *t: hvd.grouped_allreduce(list(t)))(*xs)
        self.assertTrue(close(outs[0], reference(tf.float32, hvd.Average,
                                                 self.n), tf.float32))

    def test_sparse_allreduce(self):
        s = tf.IndexedSlices(tf.ones([2, 3]) * (self.r + 1),
                             tf.constant([self.r, 0], tf.int64),
                             dense_shape=tf.constant([self.n, 3], tf.int64))
        out = hvd.allreduce(s, op=hvd.Sum)
        self.assertIsInstance(out, tf.IndexedSlices)
        dense = tf.convert_to_tensor(out).numpy()
        for r in range(self.n):
            want = (r + 1) + (sum(range(1, self.n + 1)) if r == 0 else 0)
            self.assertTrue(np.allclose(dense[r], want), dense)

    def test_allgather(self):
        graph = tf.function(lambda t: hvd.allgather(t))
        for dtype in INTS + FLOATS:
            with self.subTest(dtype=dtype.name):
                x = tf.cast(tf.fill([self.r + 1, 2], self.r), dtype)
                want = np.concatenate([np.full((r + 1, 2), r)
                                       for r in range(self.n)])
                self.assertTrue(close(hvd.allgather(x), want, dtype))
                self.assertTrue(close(graph(x), want, dtype))
        g = tf.function(lambda t: hvd.allgather(t))(tf.fill([self.r + 1],
                                                            self.r))
        self.assertEqual(g.numpy().tolist(),
                         [r for r in range(self.n) for _ in range(r + 1)])
        outs = hvd.grouped_allgather([tf.constant([self.r]),
                                      tf.constant([[self.r, self.r]])])
        self.assertEqual(outs[0].numpy().tolist(), list(range(self.n)))

    def test_broadcast(self):
        graph = tf.function(lambda t, root: hvd.broadcast(t, root))
        for dtype in INTS + FLOATS:
            for root in range(self.n):
                with self.subTest(dtype=dtype.name, root=root):
                    want = tf.cast(data(root, dtype), tf.float64).numpy()
                    got = hvd.broadcast(data(self.r, dtype), root)
                    self.assertTrue(close(got, want, dtype))
                    got = graph(data(self.r, dtype), root)
                    self.assertTrue(close(got, want, dtype))
        v = tf.Variable(tf.fill([3], float(self.r)))
        hvd.broadcast_variables([v], root_rank=self.n - 1)
        self.assertEqual(v.numpy().tolist(), [self.n - 1.0] * 3)
        got = tf.function(lambda t: hvd.broadcast(t, 0))(
            tf.constant([self.r]))
        self.assertEqual(got.numpy().tolist(), [0])

    def test_alltoall_and_reducescatter_every_dtype(self):
        a2a = tf.function(lambda t: hvd.alltoall(t))
        rs = tf.function(lambda t: hvd.reducescatter(t, op=hvd.Sum))
        rows = 2 * self.n + 1
        share = rows // self.n + (1 if self.r < rows % self.n else 0)
        first = self.r * (rows // self.n) + min(self.r, rows % self.n)
        for dtype in INTS + FLOATS:
            x = data(self.r, dtype, (self.n * 2, 3))
            want = np.concatenate([tf.cast(data(r, dtype, (self.n * 2, 3)),
                                           tf.float64).numpy()[
                2 * self.r:2 * self.r + 2] for r in range(self.n)])
            y = data(self.r, dtype, (rows, 2))
            want_rs = reference(dtype, hvd.Sum, self.n, (rows, 2))[
                first:first + share]
            for mode, f, g in (("eager", hvd.alltoall,
                                lambda t: hvd.reducescatter(t, op=hvd.Sum)),
                               ("graph", a2a, rs)):
                with self.subTest(dtype=dtype.name, mode=mode):
                    out = f(x)
                    self.assertTrue(close(out, want, dtype))
                    self.assertTrue(close(g(y), want_rs, dtype))

    def test_alltoall_and_reducescatter(self):
        x = tf.range(self.n * 2) + 100 * self.r
        # Without splits, Horovod returns the rows alone.
        out = hvd.alltoall(x)
        out2, got = hvd.alltoall(x, splits=[2] * self.n)
        self.assertEqual(got.numpy().tolist(), [2] * self.n)
        self.assertEqual(out2.numpy().tolist(), out.numpy().tolist())
        want = [100 * r + 2 * self.r + k for r in range(self.n)
                for k in range(2)]
        self.assertEqual(out.numpy().tolist(), want)
        splits = [1] * (self.n - 1) + [self.n + 1]
        out, got = hvd.alltoall(tf.range(2 * self.n), splits=splits)
        self.assertEqual(sum(got.numpy().tolist()),
                         splits[self.r] * self.n)
        rows = 2 * self.n + 1
        x = tf.ones([rows, 3]) * (self.r + 1)
        mine = hvd.reducescatter(x, op=hvd.Sum)
        share = rows // self.n + (1 if self.r < rows % self.n else 0)
        self.assertEqual(tuple(mine.shape), (share, 3))
        self.assertTrue(np.allclose(mine.numpy(),
                                    self.n * (self.n + 1) / 2))
        avg = tf.function(lambda t: hvd.reducescatter(t))(x)
        self.assertTrue(np.allclose(avg.numpy(), (self.n + 1) / 2))

    def test_gradients(self):
        x = tf.Variable(data(self.r, tf.float64))
        with tf.GradientTape(persistent=True) as tape:
            s = tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum))
            g = tf.reduce_sum(hvd.allgather(x) * 2.0)
            b = tf.reduce_sum(hvd.broadcast(x, 0) * 3.0)
        self.assertTrue(np.allclose(tape.gradient(s, x), self.n))
        self.assertTrue(np.allclose(tape.gradient(g, x), 2.0))
        want_b = 3.0 if self.r == 0 else 0.0
        self.assertTrue(np.allclose(tape.gradient(b, x), want_b))

    def test_objects(self):
        self.assertEqual(hvd.broadcast_object({"r": self.r}, root_rank=0),
                         {"r": 0})
        self.assertEqual(hvd.allgather_object(("x", self.r)),
                         [("x", r) for r in range(self.n)])

    def test_moved_types(self):
        # bool and uint16 travel (Horovod gathers and broadcasts them).
        for dtype in (tf.bool, tf.uint16):
            with self.subTest(dtype=dtype.name):
                x = tf.cast(tf.fill([2], self.r % 2 + 1), dtype)
                got = hvd.allgather(x)
                self.assertEqual(got.dtype, dtype)
                want = [r % 2 + 1 for r in range(self.n) for _ in range(2)]
                self.assertEqual(tf.cast(got, tf.int32).numpy().tolist(),
                                 tf.cast(tf.constant(want), dtype).numpy()
                                 .astype(int).tolist())
                root = hvd.broadcast(x, 0)
                self.assertEqual(tf.cast(root, tf.int32).numpy().tolist(),
                                 [1, 1])

    def test_tf1_graph(self):
        # Independent collectives of a TF1 graph on two inter-op threads:
        # every rank runs them in the order they were built.
        with tf.Graph().as_default():
            outs = [hvd.allreduce(tf.fill([3], float(self.r + i)),
                                  op=hvd.Sum) for i in range(8)]
            v = tf.compat.v1.Variable([float(self.r)] * 2)
            (assigned,) = hvd.broadcast_([v], root_rank=0)
            config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2)
            bcast = hvd.broadcast_global_variables(0)
            with tf.compat.v1.Session(config=config) as sess:
                sess.run(v.initializer)
                got = sess.run(outs)
                self.assertEqual(sess.run(assigned).tolist(), [0.0, 0.0])
                sess.run(v.assign([float(self.r)] * 2))
                sess.run(bcast)
                self.assertEqual(sess.run(v).tolist(), [0.0, 0.0])
                self.assertEqual(hvd.broadcast_object(self.r), 0)
        # TensorFlow 2 has no global variables to broadcast.
        with self.assertRaises(RuntimeError):
            hvd.broadcast_global_variables(0)
        base = sum(range(self.n))
        for i, g in enumerate(got):
            self.assertEqual(g.tolist(), [base + self.n * i] * 3)

    def test_same_tensor_twice_in_tf_function(self):
        @tf.function
        def twice(t):
            return hvd.allreduce(t, op=hvd.Sum) + hvd.allreduce(t, op=hvd.Max)

        got = twice(tf.constant([float(self.r)]))
        self.assertEqual(got.numpy().tolist(),
                         [sum(range(self.n)) + self.n - 1])

    def test_errors(self):
        # A collective that refuses its arguments fails as Horovod's ops
        # and tf.numpy_function do.
        with self.assertRaises(tf.errors.InvalidArgumentError):
            hvd.allreduce(tf.constant([True]))
        with self.assertRaises(tf.errors.InvalidArgumentError):
            hvd.broadcast(tf.ones(2), root_rank=self.n)
        # Ranks that disagree fail everywhere as Horovod's ops do.
        with self.assertRaises(tf.errors.FailedPreconditionError):
            hvd.allreduce(tf.ones(self.r + 1), name="mismatch.count")
        with self.assertRaises(tf.errors.FailedPreconditionError):
            hvd.broadcast(tf.ones(2), root_rank=self.r, name="mismatch.root")
        with self.assertRaises(tf.errors.InvalidArgumentError):
            hvd.reducescatter(tf.constant(1.0))
        with self.assertRaises(tf.errors.InvalidArgumentError):
            hvd.alltoall(tf.ones([self.n + 1]))
        if self.n & (self.n - 1) == 0:
            a = hvd.allreduce(tf.constant([1.0, 0.0]) if self.r % 2 == 0
                              else tf.constant([0.0, 1.0]), op=hvd.Adasum)
            self.assertTrue(np.allclose(a.numpy(), [1.0, 1.0]), a)


class SyncBatchNorm(unittest.TestCase):
    """SyncBatchNormalization against BatchNormalization on the combined
    batch."""

    def test_matches_batch_norm_on_the_combined_batch(self):
        n, r = hvd.size(), hvd.rank()
        rng = np.random.default_rng(11)
        xs = rng.standard_normal((n, 4, 3, 3, 2)).astype(np.float32) * 2 + 1
        sbn = hvd.SyncBatchNormalization(momentum=0.5)
        bn = tf.keras.layers.BatchNormalization(momentum=0.5)
        with tf.GradientTape() as tape:
            x = tf.constant(xs[r])
            tape.watch(x)
            y = sbn(x, training=True)
            loss = tf.reduce_sum(y * tf.range(2, dtype=tf.float32))
        gx = tape.gradient(loss, x)
        with tf.GradientTape() as tape:
            allx = tf.constant(xs.reshape(-1, 3, 3, 2))
            tape.watch(allx)
            ally = bn(allx, training=True)
            # Each rank's loss term, summed over the ranks by the
            # allreduce's gradient.
            loss = tf.reduce_sum(ally * tf.range(2, dtype=tf.float32))
        gall = tape.gradient(loss, allx)
        self.assertTrue(np.allclose(y.numpy(), ally.numpy()[4 * r:4 * r + 4],
                                    atol=1e-4))
        self.assertTrue(np.allclose(gx.numpy(), gall.numpy()[4 * r:4 * r + 4],
                                    atol=1e-4), (gx, gall))
        self.assertTrue(np.allclose(sbn.moving_mean.numpy(),
                                    bn.moving_mean.numpy(), atol=1e-5))


class GradientTape(unittest.TestCase):
    """DistributedGradientTape against one process with the combined
    batch."""

    def run_steps(self, make_opt, steps=3, **tape_args):
        n, r = hvd.size(), hvd.rank()
        rng = np.random.default_rng(7)
        xs = rng.standard_normal((n, 4, 3)).astype(np.float32)
        ys = rng.standard_normal((n, 4, 1)).astype(np.float32)
        init = rng.standard_normal((3, 1)).astype(np.float32)

        def train(x, y, distributed):
            w = tf.Variable(init)
            opt = make_opt()
            for _ in range(steps):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((x @ w - y) ** 2)
                if distributed:
                    tape = hvd.DistributedGradientTape(tape, **tape_args)
                grads = tape.gradient(loss, [w])
                opt.apply_gradients(zip(grads, [w]))
            return w.numpy()

        mine = train(xs[r], ys[r], True)
        alone = train(xs.reshape(-1, 3), ys.reshape(-1, 1), False)
        return mine, alone

    def test_sgd_momentum(self):
        mine, alone = self.run_steps(
            lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9))
        self.assertTrue(np.allclose(mine, alone, atol=1e-5), (mine, alone))

    def test_adam_fp16_and_predivide(self):
        mine, alone = self.run_steps(
            lambda: tf.keras.optimizers.Adam(0.01),
            compression=hvd.Compression.fp16)
        self.assertTrue(np.allclose(mine, alone, atol=1e-2), (mine, alone))
        mine, alone = self.run_steps(
            lambda: tf.keras.optimizers.Adam(0.01),
            gradient_predivide_factor=2.0)
        self.assertTrue(np.allclose(mine, alone, atol=1e-5), (mine, alone))

    def test_distributed_optimizer_v1_and_keras(self):
        n, r = hvd.size(), hvd.rank()
        w = tf.Variable(tf.ones([2]))
        opt = hvd.DistributedOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5))
        opt.minimize(lambda: tf.reduce_sum(w * float(r)), var_list=[w])
        self.assertTrue(np.allclose(w.numpy(), 1 - 0.5 * (n - 1) / 2.0))
        k = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.5))
        self.assertTrue(getattr(k, "_hvd_distributed", False))
        k.apply_gradients([(tf.fill([2], float(r)), w)])
        self.assertTrue(np.allclose(w.numpy(), 1 - (n - 1) / 2.0))

    def test_local_sources(self):
        n, r = hvd.size(), hvd.rank()
        w, b = tf.Variable(tf.ones([2])), tf.Variable(tf.ones([2]))
        dense = tf.keras.layers.Dense(1)
        x = tf.fill([1, 2], float(r))
        with tf.GradientTape(persistent=True) as tape:
            loss = tf.reduce_sum(w * float(r) + b * float(r)) + \
                tf.reduce_sum(dense(x))
        # A local source keeps its own gradient, divided by the size.
        dt = hvd.DistributedGradientTape(tape)
        dt.register_local_source(b)
        gw, gb = dt.gradient(loss, [w, b])
        self.assertTrue(np.allclose(gw.numpy(), (n - 1) / 2.0))
        self.assertTrue(np.allclose(gb.numpy(), r / n))
        pt = hvd.PartialDistributedGradientTape(tape, local_layers=[dense])
        local, shared = pt.get_local_and_global_gradients(
            loss, [w] + dense.trainable_weights)
        self.assertEqual([v is w for v, _ in shared], [True])
        self.assertTrue(np.allclose(local[0][1].numpy(), r / n))

    def test_in_tf_function(self):
        n, r = hvd.size(), hvd.rank()
        w = tf.Variable(tf.ones([2]))

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(w * x)
            tape = hvd.DistributedGradientTape(tape)
            return tape.gradient(loss, [w])[0]

        g = step(tf.fill([2], float(r)))
        self.assertTrue(np.allclose(g.numpy(), (n - 1) / 2.0))


def main():
    hvd.init()
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for case in (Collectives, SyncBatchNorm, GradientTape):
        for name in loader.getTestCaseNames(case):
            suite.addTest(case(name))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=0).run(suite)
    if result.wasSuccessful():
        print("tfcheck: rank %d: ok %d" % (hvd.rank(), result.testsRun))
    hvd.shutdown()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
