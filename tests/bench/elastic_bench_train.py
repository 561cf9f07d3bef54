"""The training script of tests/bench/elastic_bench.py, run unchanged on
our horovod package (libhvd) and on real Horovod 0.28.1: hvd.elastic.run
with hvd.elastic.TorchState, a tiny MLP (or torchvision's ResNet-18 on
random 3x32x32 images), one torch thread per process.

Each process appends JSON lines to its own file in --logdir:
  {"ev": "start", "t": ..., "host": ..., "pid": ...}
  {"ev": "step", "t": ..., "rank": ..., "size": ..., "step": ...,
   "commit_s": ...}
    (time.time() once the step, and its commit if any, is done; commit_s:
    the seconds state.commit() took, or null)
  {"ev": "kill", "t": ...}  (just before the process SIGKILLs itself)
  {"ev": "done", "t": ...}

--kill-step S: the process with the last rank of the first world, which
horovodrun places on the last host, SIGKILLs itself before step S (once).
Training ends --extra-steps steps after the first step at --end-size
ranks (or at --max-steps, a safety net), so every rank stops at the same
step.
"""

import argparse
import json
import os
import signal
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd

p = argparse.ArgumentParser()
p.add_argument("--logdir", required=True)
p.add_argument("--model", choices=("mlp", "resnet18"), default="mlp")
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--commit-every", type=int, default=1,
               help="state.commit() every N steps; 0: never")
p.add_argument("--kill-step", type=int, default=-1)
p.add_argument("--end-size", type=int, required=True)
p.add_argument("--extra-steps", type=int, default=5)
p.add_argument("--max-steps", type=int, default=100000)
args = p.parse_args()

torch.set_num_threads(1)
host = os.environ.get("HOROVOD_HOSTNAME", "?")
log = open(os.path.join(args.logdir, "%s-%d.jsonl" % (host, os.getpid())),
           "a", buffering=1)


def emit(ev, **kw):
    kw["ev"] = ev
    kw["t"] = time.time()
    log.write(json.dumps(kw) + "\n")


emit("start", host=host, pid=os.getpid())
hvd.init()
first_rank, first_size = hvd.rank(), hvd.size()
torch.manual_seed(1)

if args.model == "resnet18":
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    data = torch.randn(args.batch_size, 3, 32, 32)
else:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    data = torch.randn(args.batch_size, 64)
target = torch.randint(0, 10, (args.batch_size,))
lr = 0.01
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9),
    named_parameters=model.named_parameters())


@hvd.elastic.run
def train(state):
    while state.step < args.max_steps:
        if state.end_at is not None and state.step >= state.end_at:
            break
        if (state.step == args.kill_step and first_size > 1
                and first_rank == first_size - 1
                and hvd.size() == first_size):
            emit("kill", rank=hvd.rank(), size=hvd.size(), step=state.step)
            log.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
        state.step += 1
        if state.end_at is None and hvd.size() == args.end_size:
            state.end_at = state.step + args.extra_steps
        commit_s = None
        if args.commit_every > 0 and state.step % args.commit_every == 0:
            t0 = time.perf_counter()
            state.commit()
            commit_s = time.perf_counter() - t0
        emit("step", rank=hvd.rank(), size=hvd.size(), step=state.step,
             commit_s=commit_s)


def on_reset():
    for group in optimizer.param_groups:
        group["lr"] = lr * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, step=0, end_at=None)
state.register_reset_callbacks([on_reset])
train(state)
emit("done", rank=hvd.rank(), size=hvd.size())
