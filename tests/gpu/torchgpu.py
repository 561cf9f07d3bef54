"""horovod.torch on CUDA tensors, run in every rank under horovodrun.

For tests/gpu/run.sh on a machine with a GPU: the collectives on CUDA
tensors, the hand-off of torch's current stream (libhvd must read a tensor
only after the kernels queued before the call have run), and
DistributedOptimizer on a model on the GPU. Each rank's input is a small
integer function of its rank, so every order of summation gives the exact
result that the rank computes itself.

Prints "torchgpu: rank R: ok N" when all N checks passed, else each failure
and exits 1; with no CUDA device it prints "torchgpu: SKIP: ..." and exits
77. TORCHGPU_DEVICE=cpu runs the same checks on CPU tensors (the stream
check then has no stream to hand off), to try the script without a GPU.
"""

import os
import sys

import torch

import horovod.torch as hvd

failures = []
checks = 0


def check(ok, what):
    """Counts a check; keeps its description when it failed."""
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def same(got, want, what):
    """got (any device) has want's values exactly, and want's device."""
    check(got.device == want.device, "%s: on %s, not %s"
          % (what, got.device, want.device))
    check(torch.equal(got.cpu(), want.cpu()), "%s: %s, want %s"
          % (what, got.cpu().tolist()[:4], want.cpu().tolist()[:4]))


def collectives(dev, r, n):
    """allreduce, allreduce_, allgather and broadcast_ on dev's tensors."""
    for dt in (torch.float32, torch.float16, torch.float64, torch.int32):
        x = torch.arange(1000, device=dev).to(dt) % 7 + r
        want = (torch.arange(1000, device=dev).to(torch.float64) % 7 * n
                + n * (n - 1) / 2).to(dt)
        same(hvd.allreduce(x, op=hvd.Sum, name="sum.%s" % dt), want,
             "allreduce sum %s" % dt)
        y = x.clone()
        hvd.allreduce_(y, op=hvd.Sum, name="sum_.%s" % dt)
        same(y, want, "allreduce_ sum %s" % dt)
    avg = hvd.allreduce(torch.full((64,), 2.0 * (r + 1), device=dev),
                        name="avg")
    same(avg, torch.full((64,), float(n + 1), device=dev), "allreduce average")
    g = hvd.allgather(torch.full((r + 1, 3), r, device=dev, dtype=torch.int64),
                      name="gather")
    want = torch.cat([torch.full((i + 1, 3), i, dtype=torch.int64)
                      for i in range(n)]).to(dev)
    same(g, want, "allgather")
    b = torch.full((5,), float(r), device=dev)
    hvd.broadcast_(b, root_rank=n - 1, name="bcast")
    same(b, torch.full((5,), float(n - 1), device=dev), "broadcast_")


def stream_hand_off(dev, r, n):
    """A tensor written by a late kernel on a side stream: the allreduce,
    called right after on that stream, must see the write."""
    if dev.type != "cuda":
        return
    side = torch.cuda.Stream(dev)
    x = torch.zeros(1 << 20, device=dev)
    torch.cuda.synchronize(dev)
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # some 50 ms of GPU time
        x.add_(r + 1)
        h = hvd.allreduce_async_(x, op=hvd.Sum, name="late")
    hvd.synchronize(h)
    torch.cuda.synchronize(dev)
    same(x, torch.full((1 << 20,), n * (n + 1) / 2, device=dev),
         "allreduce_async_ after a late kernel on a side stream")


def optimizer(dev, r, n):
    """One SGD step through DistributedOptimizer from broadcast weights:
    rank r's gradient is (r + 1) everywhere, so the averaged step is
    lr * (n + 1) / 2 on every rank."""
    torch.manual_seed(100 + r)  # different weights until the broadcast
    model = torch.nn.Linear(8, 1, bias=False).to(dev)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    w0 = hvd.broadcast(model.weight.detach().clone(), 0, name="w0")
    same(model.weight.detach(), w0, "broadcast_parameters")
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.5),
        named_parameters=model.named_parameters())
    opt.zero_grad()
    loss = (r + 1) * model(torch.ones(1, 8, device=dev)).sum()
    loss.backward()
    opt.step()
    step = torch.full_like(w0, 0.5 * (n + 1) / 2)
    same(model.weight.detach(), w0 - step, "DistributedOptimizer step")


def main():
    want = os.environ.get("TORCHGPU_DEVICE", "cuda")
    if want == "cuda" and not torch.cuda.is_available():
        print("torchgpu: SKIP: no CUDA device (torch %s)" % torch.__version__)
        return 77
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    dev = torch.device("cpu")
    if want == "cuda":
        dev = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    collectives(dev, r, n)
    stream_hand_off(dev, r, n)
    optimizer(dev, r, n)
    hvd.shutdown()
    for f in failures:
        print("torchgpu: rank %d: FAIL: %s" % (r, f))
    if failures:
        return 1
    print("torchgpu: rank %d: ok %d (torch %s on %s)"
          % (r, checks, torch.__version__, dev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
