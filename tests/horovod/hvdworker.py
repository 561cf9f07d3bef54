"""A rank that links real Horovod (horovod.torch), for tests/horovod.

Run under horovodrun with the Python of the venv that
scripts/install-horovod.sh builds. The first argument picks what it does:

  info      print this rank's place in the job as one JSON line
  coll      allreduce, allgather and broadcast against serial references
  train     train a small model with hvd.DistributedOptimizer; print a
            hash of the final weights
  die R     rank R kills itself (SIGKILL) after init; the others wait in
            an allreduce that can never finish, then until stopped
  sleep     init, say "ready", sleep (for the launcher's kill tests)
  spew N    init, then N numbered lines to stdout and stderr each
  firstop   init, then time one allreduce; rank 0 prints the time from
            HVD_T0 (the launcher's start, in time.time()) to its end

Every check failure raises, so the rank exits non-zero and horovodrun's
summary names it.
"""

import hashlib
import json
import os
import signal
import sys
import time

import torch
import horovod.torch as hvd


def info():
    print(json.dumps({
        "rank": hvd.rank(), "size": hvd.size(),
        "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(), "cross_size": hvd.cross_size(),
        "gloo": hvd.gloo_enabled(), "mpi": hvd.mpi_enabled(),
        "env_rank": int(os.environ.get("HOROVOD_RANK", -1)),
    }), flush=True)


def rank_tensor(r, n, dtype):
    """The data rank r contributes: small integers, exact in every dtype."""
    return (torch.arange(n, dtype=torch.float64) * (r + 1) + r).to(dtype)


def coll():
    size, rank = hvd.size(), hvd.rank()
    n = 1000
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
        name = str(dtype).split(".")[1]
        mine = rank_tensor(rank, n, dtype)
        want = sum(rank_tensor(r, n, torch.float64) for r in range(size))
        got = hvd.allreduce(mine, op=hvd.Sum, name="sum." + name)
        if not torch.equal(got.to(torch.float64), want):
            raise AssertionError("allreduce %s differs" % name)
        if dtype.is_floating_point:
            avg = hvd.allreduce(mine, op=hvd.Average, name="avg." + name)
            if not torch.allclose(avg.to(torch.float64), want / size):
                raise AssertionError("average %s differs" % name)
        # Ranks gather tensors of different first dimensions (r + 1 rows).
        rows = rank_tensor(rank, 3 * (rank + 1), dtype).reshape(-1, 3)
        gathered = hvd.allgather(rows, name="gather." + name)
        want_g = torch.cat([rank_tensor(r, 3 * (r + 1), dtype).reshape(-1, 3)
                            for r in range(size)])
        if not torch.equal(gathered, want_g):
            raise AssertionError("allgather %s differs" % name)
        root = size - 1
        b = hvd.broadcast(mine, root_rank=root, name="bcast." + name)
        if not torch.equal(b, rank_tensor(root, n, dtype)):
            raise AssertionError("broadcast %s differs" % name)
    print("coll ok", flush=True)


def train():
    torch.manual_seed(1234 + hvd.rank())  # different on purpose
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(),
                          momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    opt = hvd.DistributedOptimizer(opt,
                                   named_parameters=model.named_parameters())
    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 8, generator=g)
    y = (x.sum(dim=1) > 0).long()
    shard = slice(hvd.rank(), None, hvd.size())
    xs, ys = x[shard], y[shard]
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(20):
        for i in range(0, len(xs), 16):
            opt.zero_grad()
            loss = loss_fn(model(xs[i:i + 16]), ys[i:i + 16])
            loss.backward()
            opt.step()
    with torch.no_grad():
        acc = (model(x).argmax(dim=1) == y).float().mean().item()
    h = hashlib.sha256()
    for p in model.state_dict().values():
        h.update(p.detach().numpy().tobytes())
    print("weights %s accuracy %.3f" % (h.hexdigest()[:16], acc), flush=True)


def die(victim):
    if hvd.rank() == victim:
        print("rank %d kills itself" % victim, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    print("waiting", flush=True)
    try:
        hvd.allreduce(torch.ones(4), name="never")
    except hvd.HorovodInternalError:
        # Horovod saw the peer go; stay until the launcher stops this rank,
        # so that the dead rank is the job's only failure.
        print("lost a peer", flush=True)
        time.sleep(60)
    print("allreduce finished without the dead rank", flush=True)


def sleep():
    print("ready %s %s" % (os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
                           os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"]),
          flush=True)
    time.sleep(120)


def spew(n):
    r = hvd.rank()
    for i in range(n):
        sys.stdout.write("%d:out:%d:%s\n" % (r, i, "x" * (i % 300)))
        sys.stderr.write("%d:err:%d:%s\n" % (r, i, "x" * (i % 200)))
    sys.stdout.flush()
    sys.stderr.flush()


def firstop():
    hvd.allreduce(torch.ones(1), name="first")
    if hvd.rank() == 0:
        print("first allreduce %.3f" % (time.time() - float(
            os.environ["HVD_T0"])), flush=True)


def main():
    what = sys.argv[1]
    # Test hook: this rank is pointed at a port where no store listens, as
    # if a firewall or a wrong interface kept it from the store.
    lost = os.environ.get("HVD_TEST_LOST_RANK")
    if lost is not None and lost == os.environ.get("HOROVOD_RANK"):
        os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"] = os.environ[
            "HVD_TEST_LOST_PORT"]
    hvd.init()
    if what == "info":
        info()
    elif what == "coll":
        coll()
    elif what == "train":
        train()
    elif what == "die":
        die(int(sys.argv[2]))
    elif what == "sleep":
        sleep()
    elif what == "spew":
        spew(int(sys.argv[2]))
    elif what == "firstop":
        firstop()
    else:
        raise SystemExit("unknown mode %r" % what)
    hvd.shutdown()


if __name__ == "__main__":
    main()
