"""Run in every rank under horovodrun (-np 4): horovod.torch's process
sets (static, from hvd.init, and with HOROVOD_DYNAMIC_PROCESS_SETS=1
dynamic), join with uneven batches, and Adasum, against references each
rank computes itself.

Prints "torchpset: rank R: ok N" when every test passed, else the
failures, and exits 1.
"""

import os
import sys
import unittest

import torch

import horovod.torch as hvd

torch.set_num_threads(1)

DYNAMIC = os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS") == "1"
EVENS, ODDS = hvd.ProcessSet([0, 2]), hvd.ProcessSet([3, 1])


def mine():
    return EVENS if hvd.rank() % 2 == 0 else ODDS


class ProcessSets(unittest.TestCase):

    def test_registered(self):
        self.assertEqual(ODDS.ranks, [1, 3])
        self.assertNotEqual(EVENS.process_set_id, ODDS.process_set_id)
        self.assertEqual(mine().size(), 2)
        self.assertEqual(mine().rank(), hvd.rank() // 2)
        self.assertTrue(mine().included())
        other = ODDS if mine() is EVENS else EVENS
        self.assertFalse(other.included())
        with self.assertRaises(ValueError):
            other.rank()
        self.assertEqual(hvd.global_process_set.ranks, [0, 1, 2, 3])

    def test_collectives_on_my_set(self):
        ps, r = mine(), hvd.rank()
        peers = ps.ranks
        x = torch.full((5,), float(r + 1))
        self.assertTrue(torch.equal(
            hvd.allreduce(x, op=hvd.Sum, name="s", process_set=ps),
            torch.full((5,), float(sum(p + 1 for p in peers)))))
        avg = hvd.allreduce(x, name="a", process_set=ps)
        self.assertTrue(torch.allclose(
            avg, torch.full((5,), sum(p + 1 for p in peers) / 2.0)))
        g = hvd.allgather(torch.full((r + 1, 2), r), name="g", process_set=ps)
        want = torch.cat([torch.full((p + 1, 2), p) for p in peers])
        self.assertTrue(torch.equal(g, want))
        b = hvd.broadcast(torch.tensor([r]), root_rank=peers[1], name="b",
                          process_set=ps)
        self.assertEqual(b.item(), peers[1])
        out, got = hvd.alltoall(torch.arange(4) + 10 * r,
                                splits=[1, 3], name="t", process_set=ps)
        self.assertEqual(got.tolist(), [1, 1] if ps.rank() == 0 else [3, 3])
        rs = hvd.reducescatter(torch.ones(4, 2) * (r + 1), op=hvd.Sum,
                               name="rs", process_set=ps)
        self.assertEqual(tuple(rs.shape), (2, 2))
        self.assertTrue(torch.equal(rs, torch.full(
            (2, 2), float(sum(p + 1 for p in peers)))))
        hvd.barrier(process_set=ps)
        other = ODDS if ps is EVENS else EVENS
        with self.assertRaises(ValueError):
            hvd.allreduce(x, name="no", process_set=other)

    def test_optimizer_on_a_set_matches_its_combined_batch(self):
        ps = mine()
        torch.manual_seed(5)
        model = torch.nn.Linear(3, 1)
        ref = torch.nn.Linear(3, 1)
        ref.load_state_dict(model.state_dict())
        xs = [torch.randn(4, 3, generator=torch.Generator().manual_seed(p))
              for p in ps.ranks]
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            named_parameters=model.named_parameters(), process_set=ps)
        model(xs[ps.rank()]).sum().backward()
        opt.step()
        ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
        (ref(torch.cat(xs)).sum() / len(xs)).backward()
        ropt.step()
        self.assertTrue(torch.allclose(model.weight, ref.weight, atol=1e-6))

    def test_optimizer_of_a_set_outside_it_keeps_its_gradients(self):
        # Every rank builds the evens' optimizer, as Horovod's
        # test_optimizer_process_sets does: the odd ranks take part in
        # nothing and step on their own gradients, and nobody waits.
        torch.manual_seed(6)
        model = torch.nn.Linear(3, 1)
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(
            hvd.rank()))
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            named_parameters=model.named_parameters(), process_set=EVENS)
        model(x).sum().backward()
        mine_grad = x.sum(0, keepdim=True)
        opt.step()
        if hvd.rank() % 2:
            self.assertTrue(torch.allclose(model.weight.grad, mine_grad))
        else:
            evens = [torch.randn(4, 3, generator=torch.Generator(
                ).manual_seed(p)).sum(0, keepdim=True) for p in (0, 2)]
            self.assertTrue(torch.allclose(model.weight.grad,
                                           (evens[0] + evens[1]) / 2))
        hvd.barrier()

    def test_dynamic_sets(self):
        if not DYNAMIC:
            with self.assertRaises(ValueError):
                hvd.add_process_set([0, 1])
            return
        pair = hvd.add_process_set([0, 1])
        self.assertIsNotNone(pair.process_set_id)
        with self.assertRaises(ValueError):
            hvd.add_process_set(hvd.ProcessSet([1, 0]))
        if hvd.rank() < 2:
            s = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="p",
                              process_set=pair)
            self.assertEqual(s.item(), 2.0)
        self.assertTrue(hvd.remove_process_set(pair))
        self.assertIsNone(pair.process_set_id)
        self.assertFalse(hvd.remove_process_set(hvd.global_process_set))


class Join(unittest.TestCase):

    def test_uneven_batches(self):
        # Rank r has r + 1 batches; the joined ranks add zeros.
        r, n = hvd.rank(), hvd.size()
        for i in range(r + 1):
            s = hvd.allreduce(torch.ones(2) * (r + 1), op=hvd.Sum,
                              name="batch.%d" % i)
            want = float(sum(k + 1 for k in range(i, n)))
            self.assertTrue(torch.equal(s, torch.full((2,), want)))
        self.assertEqual(hvd.join(), n - 1)

    def test_gathers_fail_at_once_while_a_rank_has_joined(self):
        # Horovod's test_horovod_join_allgather: each rank joins in turn
        # while the others allgather unnamed. The joined rank makes no
        # unnamed call, so the others' names drift ahead of its own; each
        # allgather must fail by itself instead of waiting for the others.
        r, n = hvd.rank(), hvd.size()
        t = torch.ones(3, 2)
        for first in range(n):
            if r != first:
                with self.assertRaisesRegex(
                        hvd.HorovodInternalError,
                        "not supported while ranks have joined"):
                    hvd.allgather(t)
            got = hvd.join()
            self.assertNotEqual(got, first)
            self.assertEqual(hvd.allgather_object(got), [got] * n)


class Adasum(unittest.TestCase):

    def test_matches_the_tree(self):
        r, n = hvd.rank(), hvd.size()
        vs = [torch.randn(6, generator=torch.Generator().manual_seed(k),
                          dtype=torch.float64) for k in range(n)]
        got = hvd.allreduce(vs[r], op=hvd.Adasum, name="ada")
        level = list(vs)
        while len(level) > 1:
            nxt = []
            for a, b in zip(level[::2], level[1::2]):
                d = float(a @ b)
                nxt.append((1 - d / (2 * float(a @ a))) * a +
                           (1 - d / (2 * float(b @ b))) * b)
            level = nxt
        self.assertTrue(torch.allclose(got, level[0], atol=1e-12))
        with self.assertRaises(NotImplementedError):
            hvd.allreduce(vs[r], op=hvd.Adasum, name="ada.ps",
                          process_set=mine())


def main():
    hvd.init(process_sets=[] if DYNAMIC else [EVENS, ODDS])
    if DYNAMIC:
        for ps in (EVENS, ODDS):
            hvd.add_process_set(ps)
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for case in (ProcessSets, Join, Adasum):
        for name in loader.getTestCaseNames(case):
            suite.addTest(case(name))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=0).run(suite)
    if result.wasSuccessful():
        print("torchpset: rank %d: ok %d" % (hvd.rank(), result.testsRun))
    hvd.shutdown()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
