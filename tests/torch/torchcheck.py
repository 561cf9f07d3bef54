"""Run in every rank under horovodrun: horovod.torch (our package on
libhvd) against serial references that each rank computes itself, since
every rank's input is a function of its rank.

Prints "torchcheck: rank R: ok N" when every test passed, else the
failures, and exits 1.
"""

import os
import sys
import time
import unittest
import warnings

import torch

import horovod.torch as hvd
from horovod.common.exceptions import HorovodInternalError

torch.set_num_threads(1)

INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def data(r, dtype, shape=(3, 5)):
    """Rank r's input: small values, so that products and sums of every
    dtype stay exact."""
    g = torch.Generator().manual_seed(1000 + r)
    if dtype == torch.uint8:
        t = torch.randint(1, 3, shape, generator=g)
    else:
        t = torch.randint(-2, 3, shape, generator=g)
        t[t == 0] = 1
    return t.to(dtype)


def reference(dtype, op, n, shape=(3, 5)):
    parts = [data(r, dtype, shape).double() for r in range(n)]
    stack = torch.stack(parts)
    if op in (hvd.Sum, hvd.Average):
        out = stack.sum(0)
        if op == hvd.Average:
            out = (torch.div(out, n, rounding_mode="trunc")
                   if dtype in INTS else out / n)
    elif op == hvd.Min:
        out = stack.min(0).values
    elif op == hvd.Max:
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    return out.to(dtype)


def close(a, b, dtype):
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)


class Collectives(unittest.TestCase):
    """Every collective, every dtype and op, against the reference."""

    def setUp(self):
        self.r, self.n = hvd.rank(), hvd.size()

    def test_basics(self):
        self.assertTrue(hvd.is_initialized())
        self.assertEqual(self.n, int(os.environ["HOROVOD_SIZE"]))
        self.assertEqual(self.r, int(os.environ["HOROVOD_RANK"]))
        self.assertEqual(hvd.local_rank(), int(os.environ["HOROVOD_LOCAL_RANK"]))
        self.assertEqual(hvd.local_size(), int(os.environ["HOROVOD_LOCAL_SIZE"]))
        self.assertEqual(hvd.cross_size(), 1)
        self.assertEqual(hvd.cross_rank(), 0)
        self.assertTrue(hvd.is_homogeneous())
        self.assertFalse(hvd.mpi_enabled())
        self.assertFalse(hvd.gloo_enabled())
        self.assertFalse(hvd.rocm_built())
        with self.assertRaises(ValueError):
            hvd.mpi_threads_supported()
        hvd.init()  # a second init does nothing

    def test_allreduce_every_dtype_and_op(self):
        for dtype in INTS + FLOATS:
            for op in OPS:
                with self.subTest(dtype=dtype, op=op):
                    t = data(self.r, dtype)
                    before = t.clone()
                    out = hvd.allreduce(t, op=op, name="ar.%s.%d" % (dtype, op))
                    self.assertEqual(out.dtype, dtype)
                    self.assertEqual(out.shape, t.shape)
                    self.assertTrue(torch.equal(t, before), "input changed")
                    want = reference(dtype, op, self.n)
                    if dtype in INTS:
                        self.assertTrue(torch.equal(out, want), (out, want))
                    else:
                        self.assertTrue(close(out, want, dtype), (out, want))

    def test_allreduce_in_place_and_async(self):
        want = reference(torch.float32, hvd.Sum, self.n)
        t = data(self.r, torch.float32)
        self.assertIs(hvd.allreduce_(t, op=hvd.Sum), t)
        self.assertTrue(close(t, want, torch.float32))
        t = data(self.r, torch.float32)
        h = hvd.allreduce_async_(t, op=hvd.Sum, name="inplace.async")
        self.assertIs(hvd.synchronize(h), t)
        self.assertTrue(close(t, want, torch.float32))
        h = hvd.allreduce_async(data(self.r, torch.float32), op=hvd.Sum)
        while not hvd.poll(h):
            pass
        self.assertTrue(close(hvd.synchronize(h), want, torch.float32))
        self.assertIsNone(hvd.synchronize(h))

    def test_average_is_default_and_deprecated_flag(self):
        t = data(self.r, torch.float64)
        self.assertTrue(close(hvd.allreduce(t),
                              reference(torch.float64, hvd.Average, self.n),
                              torch.float64))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = hvd.allreduce(t, average=False)
        self.assertTrue(any(issubclass(x.category, DeprecationWarning)
                            for x in w))
        self.assertTrue(close(out, reference(torch.float64, hvd.Sum, self.n),
                              torch.float64))
        with self.assertRaises(ValueError):
            hvd.allreduce(t, average=True, op=hvd.Sum)

    def test_scaling(self):
        t = data(self.r, torch.float32)
        out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5,
                            postscale_factor=3.0)
        want = reference(torch.float32, hvd.Sum, self.n) * 1.5
        self.assertTrue(close(out, want, torch.float32), (out, want))
        # Integers scale in float64 and truncate toward zero, float16
        # through float32, as Horovod's do.
        for dt in (torch.int32, torch.int64, torch.float16):
            t = torch.tensor([7, -7, 3], dtype=dt)
            pre = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5)
            scaled = (t.double() * 0.5).to(dt) if dt != torch.float16 \
                else (t.float() * 0.5).to(dt)
            self.assertTrue(torch.equal(pre, scaled * self.n), (dt, pre))
            post = hvd.allreduce(t, op=hvd.Sum, postscale_factor=0.5)
            self.assertTrue(torch.equal(
                post, (t.double() * self.n * 0.5).to(dt)), (dt, post))
            rs = hvd.reducescatter(torch.stack([t] * self.n), op=hvd.Sum,
                                   prescale_factor=0.5)
            self.assertTrue(torch.equal(rs, (scaled * self.n).view(1, 3)),
                            (dt, rs))

    def test_fp16_compression(self):
        t = data(self.r, torch.float32) / 3
        want = sum(data(r, torch.float32) / 3 for r in range(self.n)) / self.n
        out = hvd.allreduce(t, compression=hvd.Compression.fp16)
        self.assertEqual(out.dtype, torch.float32)
        self.assertTrue(torch.allclose(out, want, atol=2e-3), (out, want))
        t64 = t.double()
        out = hvd.allreduce(t64, compression=hvd.Compression.fp16)
        self.assertEqual(out.dtype, torch.float64)
        self.assertTrue(torch.allclose(out, want.double(), atol=2e-3))

    def test_grouped_allreduce(self):
        ts = [data(self.r, torch.float32, (k + 1, 2)) for k in range(4)]
        outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="group")
        for k, o in enumerate(outs):
            self.assertTrue(close(o, reference(torch.float32, hvd.Sum, self.n,
                                               (k + 1, 2)), torch.float32))
        mixed = [data(self.r, torch.float32), data(self.r, torch.int32)]
        outs = hvd.grouped_allreduce(mixed, op=hvd.Max, postscale_factor=1.0)
        self.assertTrue(torch.equal(outs[1],
                                    reference(torch.int32, hvd.Max, self.n)))
        ts = [data(self.r, torch.float64, (2,)) for _ in range(3)]
        h = hvd.grouped_allreduce_async_(ts, op=hvd.Sum, prescale_factor=2.0)
        res = hvd.synchronize(h)
        for t, o in zip(ts, res):
            self.assertIs(t, o)
            self.assertTrue(close(t, 2 * reference(torch.float64, hvd.Sum,
                                                   self.n, (2,)),
                                  torch.float64))
        self.assertEqual(len(hvd.grouped_allreduce_(ts)), 3)

    def test_allgather(self):
        for dtype in INTS + FLOATS:
            with self.subTest(dtype=dtype):
                t = data(self.r, dtype, (self.r + 1, 3))
                out = hvd.allgather(t)
                want = torch.cat([data(r, dtype, (r + 1, 3))
                                  for r in range(self.n)])
                self.assertTrue(torch.equal(out, want))
        empty = torch.zeros((0, 2)) if self.r == 0 else torch.ones((1, 2))
        out = hvd.allgather(empty)
        self.assertEqual(tuple(out.shape), (self.n - 1, 2))
        outs = hvd.grouped_allgather([torch.tensor([self.r]),
                                      torch.tensor([[self.r, self.r]])])
        self.assertEqual(outs[0].tolist(), list(range(self.n)))
        self.assertEqual(outs[1].tolist(), [[r, r] for r in range(self.n)])

    def test_broadcast(self):
        for dtype in INTS + FLOATS:
            for root in range(self.n):
                with self.subTest(dtype=dtype, root=root):
                    t = data(self.r, dtype)
                    before = t.clone()
                    out = hvd.broadcast(t, root)
                    self.assertTrue(torch.equal(out, data(root, dtype)))
                    self.assertTrue(torch.equal(t, before))
        t = data(self.r, torch.int64)
        self.assertIs(hvd.broadcast_(t, self.n - 1), t)
        self.assertTrue(torch.equal(t, data(self.n - 1, torch.int64)))

    def test_reducescatter(self):
        n = self.n
        for dtype in INTS + FLOATS:
            for op in OPS:
                for shape in ((2 * n + 1, 3), (max(n - 1, 1), 2), (5,)):
                    with self.subTest(dtype=dtype, op=op, shape=shape):
                        out = hvd.reducescatter(data(self.r, dtype, shape),
                                                op=op)
                        rows = [shape[0] // n + (r < shape[0] % n)
                                for r in range(n)]
                        first = sum(rows[:self.r])
                        want = reference(dtype, op, n, shape)[
                            first:first + rows[self.r]]
                        self.assertEqual(out.shape, want.shape)
                        if dtype in INTS:
                            self.assertTrue(torch.equal(out, want))
                        else:
                            self.assertTrue(close(out, want, dtype))
        t = data(self.r, torch.float32, (n, 2))
        out = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=0.5,
                                postscale_factor=4.0)
        want = 2 * reference(torch.float32, hvd.Sum, n, (n, 2))[self.r]
        self.assertTrue(close(out, want.unsqueeze(0), torch.float32))
        outs = hvd.grouped_reducescatter([t, t.double()], op=hvd.Sum)
        self.assertEqual([o.dtype for o in outs],
                         [torch.float32, torch.float64])
        self.assertTrue(close(outs[1], reference(torch.float32, hvd.Sum, n,
                                                 (n, 2))[self.r:self.r + 1],
                              torch.float64))
        # Horovod's gradient: the allgather, times the size for Sum.
        x = torch.ones((2 * n, 3), requires_grad=True)
        hvd.reducescatter(x, op=hvd.Sum).sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.full_like(x, n)))
        x = torch.ones((2 * n, 3), requires_grad=True)
        hvd.reducescatter(x).sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.ones_like(x)))
        with self.assertRaises(ValueError):
            hvd.reducescatter(torch.tensor(1.0))
        with self.assertRaises(HorovodInternalError):
            hvd.reducescatter(torch.ones(self.r + 2), name="rs.mismatch")

    def test_alltoall(self):
        n = self.n

        def rows(src, dst):
            return (src + dst) % 3

        def block(src, dst):
            return torch.full((rows(src, dst), 2), 100.0 * src + dst)

        t = torch.cat([block(self.r, k) for k in range(n)])
        splits = torch.tensor([rows(self.r, k) for k in range(n)])
        out, got = hvd.alltoall(t, splits=splits)
        self.assertTrue(torch.equal(out, torch.cat([block(s, self.r)
                                                    for s in range(n)])))
        self.assertEqual(got.tolist(), [rows(s, self.r) for s in range(n)])
        self.assertEqual(got.dtype, torch.int32)
        even = torch.arange(2 * n, dtype=torch.int64) + 10 * self.r
        out = hvd.alltoall(even)
        want = torch.cat([torch.arange(2 * self.r, 2 * self.r + 2) + 10 * s
                          for s in range(n)])
        self.assertTrue(torch.equal(out, want))
        h = hvd.alltoall_async(even, splits=[2] * n, name="a2a.async")
        out, got = hvd.synchronize(h)
        self.assertTrue(torch.equal(out, want))
        x = torch.ones((2 * n, 2), requires_grad=True)
        (hvd.alltoall(x) * 3).sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.full_like(x, 3.0)))
        with self.assertRaises(ValueError):
            hvd.alltoall(torch.ones(2 * n + 1))
        with self.assertRaises(ValueError):
            hvd.alltoall(torch.ones(3), splits=[1] * (n + 1))

    def test_sparse_allreduce(self):
        def sparse(r):
            idx = torch.tensor([[r % 3, 2], [1, r % 4]])
            return torch.sparse_coo_tensor(idx, torch.tensor([1.0 + r, 2.0]),
                                           (3, 4))
        want = sum(sparse(r).to_dense() for r in range(self.n))
        for op, div in ((hvd.Sum, 1), (hvd.Average, self.n)):
            out = hvd.sparse_allreduce_async(sparse(self.r), name="sp.%d" % op,
                                             op=op)()
            self.assertTrue(out.is_sparse)
            self.assertTrue(torch.allclose(out.to_dense(), want / div))
        with self.assertRaises(ValueError):
            hvd.sparse_allreduce_async(sparse(self.r), name="sp.max",
                                       op=hvd.Max)

    def test_barrier(self):
        hvd.barrier()

    def test_gradients(self):
        x = data(self.r, torch.float32).requires_grad_()
        hvd.allreduce(x, op=hvd.Sum).sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.full_like(x, self.n)))
        x = data(self.r, torch.float32).requires_grad_()
        hvd.allreduce(x).sum().backward()
        self.assertTrue(torch.allclose(x.grad, torch.ones_like(x)))
        # allgather: each rank gets its own rows of the average gradient.
        x = torch.ones((self.r + 1, 2), requires_grad=True)
        y = hvd.allgather(x)
        w = torch.arange(y.numel(), dtype=torch.float32).view_as(y)
        (y * w).sum().backward()
        first = sum(range(1, self.r + 1))
        self.assertTrue(torch.allclose(x.grad, w[first:first + self.r + 1]))
        # broadcast: the root gets the average gradient, the others zero.
        x = torch.ones(4, requires_grad=True)
        (hvd.broadcast(x, 0) * 2).sum().backward()
        want = 2.0 if self.r == 0 else 0.0
        self.assertTrue(torch.allclose(x.grad, torch.full((4,), want)))
        xs = [torch.ones(2, requires_grad=True) for _ in range(2)]
        sum(o.sum() for o in hvd.grouped_allreduce(xs, op=hvd.Sum)).backward()
        for x in xs:
            self.assertTrue(torch.equal(x.grad, torch.full((2,), self.n * 1.0)))
        # grouped_allgather: each tensor as allgather's, own rows of the
        # average gradient.
        xs = [torch.ones((self.r + 1, 2), requires_grad=True)
              for _ in range(3)]
        outs = hvd.grouped_allgather(xs)
        for k, y in enumerate(outs):
            w = torch.arange(y.numel(), dtype=torch.float32).view_as(y) + k
            (y * w).sum().backward()
            first = sum(range(1, self.r + 1))
            self.assertTrue(torch.allclose(xs[k].grad,
                                           w[first:first + self.r + 1]))

    def test_objects(self):
        obj = {"rank": self.r, "list": list(range(self.r))}
        got = hvd.broadcast_object(obj, root_rank=self.n - 1)
        self.assertEqual(got, {"rank": self.n - 1,
                               "list": list(range(self.n - 1))})
        self.assertEqual(hvd.allgather_object(("r", self.r)),
                         [("r", r) for r in range(self.n)])

    def test_broadcast_parameters(self):
        torch.manual_seed(self.r)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                    torch.nn.BatchNorm1d(3))
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        flat = torch.cat([v.double().flatten()
                          for _, v in sorted(model.state_dict().items())])
        torch.manual_seed(0)
        ref = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                  torch.nn.BatchNorm1d(3))
        want = torch.cat([v.double().flatten()
                          for _, v in sorted(ref.state_dict().items())])
        self.assertTrue(torch.equal(flat, want))
        torch.manual_seed(self.r + 7)
        lin = torch.nn.Linear(2, 2)
        hvd.broadcast_parameters(list(lin.named_parameters()), root_rank=1)
        torch.manual_seed(8)
        self.assertTrue(torch.equal(lin.weight, torch.nn.Linear(2, 2).weight))
        with self.assertRaises(ValueError):
            hvd.broadcast_parameters(3, root_rank=0)

    def test_errors(self):
        with self.assertRaises(ValueError):
            hvd.allreduce(torch.ones(2, dtype=torch.bool))
        with self.assertRaises(ValueError):
            hvd.allreduce(torch.ones(4, 4).t())
        with self.assertRaises(ValueError):
            hvd.broadcast(torch.ones(2), root_rank=self.n)
        with self.assertRaises(ValueError):
            hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)
        # Ranks that disagree fail on every rank, and the job goes on.
        with self.assertRaises(HorovodInternalError):
            hvd.allreduce(torch.ones(self.r + 1), name="mismatch.count")
        with self.assertRaises(RuntimeError):
            hvd.allreduce(torch.ones(2, dtype=torch.float32 if self.r == 0
                                     else torch.float64), name="mismatch.dt")
        with self.assertRaises(HorovodInternalError):
            hvd.broadcast(torch.ones(2), root_rank=self.r, name="mismatch.root")
        # The same number of elements in other shapes fails on every rank
        # too, as Horovod's shape check does; the gathers and scatters
        # compare every dimension but the first.
        shape = (6, 4) if self.r == 0 else (6, 2, 2)
        for what, call in (
                ("allreduce", lambda: hvd.allreduce(torch.ones(shape))),
                ("broadcast", lambda: hvd.broadcast(torch.ones(shape), 0)),
                ("allgather", lambda: hvd.allgather(torch.ones(shape))),
                ("alltoall", lambda: hvd.alltoall(torch.ones(
                    (2 * self.n,) + shape[1:]))),
                ("reducescatter", lambda: hvd.reducescatter(
                    torch.ones((2 * self.n,) + shape[1:]))),
                ("grouped_allreduce", lambda: hvd.grouped_allreduce(
                    [torch.ones(3), torch.ones(shape)]))):
            with self.assertRaisesRegex(HorovodInternalError,
                                        "Mismatched .*tensor shapes",
                                        msg=what):
                call()
        # Shapes that differ only in the first dimension gather.
        got = hvd.allgather(torch.ones((self.r + 1, 2, 3)))
        self.assertEqual(tuple(got.shape),
                         (self.n * (self.n + 1) // 2, 2, 3))
        # Adasum is an allreduce only: Horovod raises a RuntimeError.
        with self.assertRaises(HorovodInternalError):
            hvd.reducescatter(torch.ones(2 * self.n), op=hvd.Adasum)
        # A name still in flight: the other ranks join it only later.
        t = torch.ones(3)
        if self.r == 0:
            h = hvd.allreduce_async(t, name="dup")
            with self.assertRaises(ValueError):
                hvd.allreduce_async(t, name="dup")
        else:
            time.sleep(0.3)
            h = hvd.allreduce_async(t, name="dup")
        self.assertTrue(torch.equal(hvd.synchronize(h), t))
        self.assertTrue(torch.equal(hvd.allreduce(t, name="dup"), t))


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 2))


def batch(r, b, step):
    g = torch.Generator().manual_seed(50 + 1000 * step + r)
    return torch.randn(b, 6, generator=g), torch.randn(b, 2, generator=g)


class Optimizer(unittest.TestCase):
    """DistributedOptimizer equals one process with the combined batch."""

    def setUp(self):
        self.r, self.n = hvd.rank(), hvd.size()

    def run_both(self, make_opt, steps=4, b=4, passes=1, tol=1e-5, **kw):
        model = mlp(1)
        opt = hvd.DistributedOptimizer(
            make_opt(model.parameters()),
            named_parameters=model.named_parameters(),
            backward_passes_per_step=passes, **kw)
        ref = mlp(1)
        ref_opt = make_opt(ref.parameters())
        loss_fn = torch.nn.MSELoss()
        for step in range(steps):
            opt.zero_grad()
            x, y = batch(self.r, b, step)
            for part in range(passes):
                sl = slice(part * b // passes, (part + 1) * b // passes)
                (loss_fn(model(x[sl]), y[sl]) / passes).backward()
            opt.step()
            ref_opt.zero_grad()
            xs, ys = zip(*[batch(r, b, step) for r in range(self.n)])
            loss_fn(ref(torch.cat(xs)), torch.cat(ys)).backward()
            ref_opt.step()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            self.assertTrue(torch.allclose(p, q, atol=tol, rtol=tol),
                            (name, (p - q).abs().max()))
        return model

    def test_sgd_momentum(self):
        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))

    def test_adam(self):
        self.run_both(lambda p: torch.optim.Adam(p, lr=0.01))

    def test_backward_passes_per_step(self):
        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                      passes=2)

    def test_groups_and_predivide(self):
        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1), groups=2)
        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1),
                      gradient_predivide_factor=2.0)

    def test_fp16_compression(self):
        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1), tol=1e-2,
                      compression=hvd.Compression.fp16)

    def test_custom_compression(self):
        class Half(hvd.Compression.none):
            """A compressor of the user's own: Python casts, both ways."""

            @staticmethod
            def compress(tensor):
                return tensor.half(), tensor.dtype

            @staticmethod
            def decompress(tensor, ctx):
                return tensor.to(ctx)

        self.run_both(lambda p: torch.optim.SGD(p, lr=0.1), tol=1e-2,
                      compression=Half)

    def test_sparse_gradients(self):
        def model():
            torch.manual_seed(5)
            return torch.nn.Sequential(torch.nn.Embedding(10, 4, sparse=True),
                                       torch.nn.Flatten(),
                                       torch.nn.Linear(8, 1))

        def ids(r):
            return torch.tensor([[r, (r * 3) % 10], [(r + 5) % 10, 1]])

        for dense in (False, True):
            m, ref = model(), model()
            opt = hvd.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=0.5),
                named_parameters=m.named_parameters(), sparse_as_dense=dense)
            ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
            for _ in range(2):
                opt.zero_grad()
                m(ids(self.r)).pow(2).mean().backward()
                self.assertTrue(m[0].weight.grad.is_sparse)
                opt.step()
                ref_opt.zero_grad()
                ref(torch.cat([ids(r) for r in range(self.n)])) \
                    .pow(2).mean().backward()
                ref_opt.step()
            for p, q in zip(m.parameters(), ref.parameters()):
                self.assertTrue(torch.allclose(p, q, atol=1e-5), (dense, p, q))

    def test_unused_parameter_and_synchronize(self):
        model = mlp(2)
        extra = torch.nn.Parameter(torch.ones(3))
        params = list(model.parameters()) + [extra]
        opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1))
        x, y = batch(self.r, 4, 0)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with opt.skip_synchronize():
            opt.step()
        self.assertTrue(torch.equal(extra.grad, torch.zeros(3)))
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        everyone = hvd.allgather(flat.unsqueeze(0))
        self.assertTrue(all(torch.equal(row, flat) for row in everyone))

    def test_errors(self):
        model = mlp(3)
        sgd = torch.optim.SGD(model.parameters(), lr=0.1)
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(sgd, named_parameters=[
                ("a", p) for p in model.parameters()])
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(sgd, named_parameters=list(
                model.named_parameters())[:1])
        with self.assertRaises(ValueError):
            hvd.DistributedOptimizer(sgd, op=hvd.Sum,
                                     gradient_predivide_factor=2.0)
        opt = hvd.DistributedOptimizer(
            sgd, named_parameters=model.named_parameters())
        x, y = batch(self.r, 4, 0)
        torch.nn.functional.mse_loss(model(x), y).backward()
        with self.assertRaises(AssertionError):
            opt.zero_grad()
        with self.assertRaises(AssertionError):
            torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    def test_broadcast_optimizer_state(self):
        lr = 0.01 * (self.r + 1)
        makers = [lambda p: torch.optim.SGD(p, lr=0.1 * (self.r + 1),
                                            momentum=0.5 + 0.1 * self.r),
                  lambda p: torch.optim.Adam(p, lr=lr,
                                             betas=(0.8, 0.9 + self.r / 100))]
        # Every other torch optimizer but LBFGS, with a rank's own option.
        for cls in (torch.optim.Adadelta, torch.optim.Adagrad,
                    torch.optim.Adamax, torch.optim.AdamW, torch.optim.ASGD,
                    torch.optim.NAdam, torch.optim.RAdam,
                    torch.optim.RMSprop, torch.optim.Rprop):
            makers.append(lambda p, cls=cls: cls(p, lr=lr))
        for make in makers:
            model = mlp(4)
            opt = make(model.parameters())
            if self.r != 0:
                # Only the other ranks have state; rank 0 makes its own.
                x, y = batch(self.r, 4, 0)
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            hvd.broadcast_optimizer_state(opt, root_rank=0)
            sd = opt.state_dict()
            root = hvd.broadcast_object(sd, root_rank=0, name="sd")
            self.assertEqual(sd["param_groups"], root["param_groups"])
            self.assertEqual(sd["param_groups"][0]["lr"], root["param_groups"][0]["lr"])
            for pid, st in root["state"].items():
                for k, v in st.items():
                    mine = sd["state"][pid][k]
                    if torch.is_tensor(v):
                        self.assertTrue(torch.equal(mine, v), (pid, k))
                    else:
                        self.assertEqual(mine, v)
        with self.assertRaises(ValueError):
            hvd.broadcast_optimizer_state(
                torch.optim.LBFGS(mlp(5).parameters()), root_rank=0)


class SyncBatchNorm(unittest.TestCase):
    """SyncBatchNorm equals BatchNorm on the ranks' batches together."""

    def test_matches_batch_norm_on_the_combined_batch(self):
        r, n = hvd.rank(), hvd.size()
        g = torch.Generator().manual_seed(7)
        xs = [torch.randn(2 + k, 3, 4, 4, generator=g) * (k + 1) + k
              for k in range(n)]
        ws = [torch.randn(x.shape, generator=g) for x in xs]
        sbn = hvd.SyncBatchNorm(3, momentum=0.3)
        bn = torch.nn.BatchNorm2d(3, momentum=0.3)
        with torch.no_grad():
            for m in (sbn, bn):
                m.weight.copy_(torch.tensor([0.5, 1.0, 2.0]))
                m.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        for _ in range(2):
            for m in (sbn, bn):
                m.zero_grad()
            x = xs[r].clone().requires_grad_()
            y = sbn(x)
            (y * ws[r]).sum().backward()
            full = torch.cat(xs).requires_grad_()
            yf = bn(full)
            (yf * torch.cat(ws)).sum().backward()
            first = sum(2 + k for k in range(r))
            mine = slice(first, first + 2 + r)
            tol = dict(atol=1e-4, rtol=1e-4)
            self.assertTrue(torch.allclose(y, yf[mine], **tol),
                            (y - yf[mine]).abs().max())
            self.assertTrue(torch.allclose(x.grad, full.grad[mine], **tol),
                            (x.grad - full.grad[mine]).abs().max())
            for a, b in ((sbn.weight, bn.weight), (sbn.bias, bn.bias)):
                summed = hvd.allreduce(a.grad, op=hvd.Sum)
                self.assertTrue(torch.allclose(summed, b.grad, **tol))
            self.assertTrue(torch.allclose(sbn.running_mean, bn.running_mean,
                                           **tol))
            self.assertTrue(torch.allclose(sbn.running_var, bn.running_var,
                                           **tol))
        sbn.eval()
        bn.eval()
        self.assertTrue(torch.allclose(sbn(xs[r]), bn(xs[r]), atol=1e-5))
        with self.assertRaises(ValueError):
            sbn(torch.ones(3))


def main():
    hvd.init()
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    only = sys.argv[1:]
    for case in (Collectives, Optimizer, SyncBatchNorm):
        for name in loader.getTestCaseNames(case):
            if not only or name in only:
                suite.addTest(case(name))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=0).run(suite)
    if result.wasSuccessful():
        print("torchcheck: rank %d: ok %d" % (hvd.rank(), result.testsRun))
    hvd.shutdown()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
