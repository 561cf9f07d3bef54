"""An elastic training script in the style of Horovod's integration tests
(test/integration/data/elastic_torch_main.py): a tiny model trained with
hvd.elastic.run and TorchState; rank 0 appends one JSON line per epoch to
--logfile (epoch, batch, commits, host, the rank the process started
with, rank, size, number of rendezvous); --exit-schedule makes chosen
processes (by the rank they started with) fail at a given epoch and
batch, by an exception or by SIGKILL; with --discovery-schedule, rank 0
waits at the end of an epoch for the notice of the host change the
schedule announces for the next one."""

import argparse
import json
import os
import signal
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd
from horovod.common.elastic import notification_manager

parser = argparse.ArgumentParser()
parser.add_argument("--batches-per-epoch", type=int, default=10)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--epoch-wait", type=float, default=0.0)
parser.add_argument("--logfile", required=True)
parser.add_argument("--discovery-schedule", default="[]")
parser.add_argument("--discovery-wait", type=float, default=10)
parser.add_argument("--exit-schedule", default="{}")
parser.add_argument("--exit-mode", default="exception")
args = parser.parse_args()

hvd.init()
torch.manual_seed(1)
data = torch.randn(32, 2)
target = (data.sum(1) > 0).long()
lr = 0.01
model = torch.nn.Sequential(torch.nn.Linear(2, 2))
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=lr * hvd.size()),
    named_parameters=model.named_parameters())

hostname = os.environ.get("HOROVOD_HOSTNAME")
start_rank = int(os.environ.get("HOROVOD_RANK", 0))
schedule = json.loads(args.discovery_schedule)
epoch_to_hosts = {e: h for e, h in schedule if e is not None}
default_hosts = schedule[-1][1] if schedule else []
exit_schedule = json.loads(args.exit_schedule)


def check_exit(epoch, batch):
    if start_rank in exit_schedule.get(str((epoch, batch)), []):
        if args.exit_mode == "exception":
            raise RuntimeError("exit epoch=%d batch=%d start_rank=%d"
                               % (epoch, batch, start_rank))
        os.kill(os.getpid(), signal.SIGKILL)


def log_state(state):
    with open(args.logfile, "a") as f:
        f.write(json.dumps({
            "epoch": state.epoch, "batch": state.batch,
            "commits": state.commits, "hostname": hostname,
            "start_rank": start_rank, "rank": hvd.rank(),
            "size": hvd.size(), "rendezvous": state.rendezvous,
            "weight": model[0].weight.sum().item()}) + "\n")


@hvd.elastic.run
def train(state):
    state.rendezvous += 1
    while state.epoch < args.epochs:
        while state.batch < args.batches_per_epoch:
            check_exit(state.epoch, state.batch)
            optimizer.zero_grad()
            F.cross_entropy(model(data), target).backward()
            optimizer.step()
            state.batch += 1
            state.commits += 1
            state.commit()
        if hvd.rank() == 0:
            log_state(state)
            now = epoch_to_hosts.get(state.epoch, default_hosts)
            nxt = epoch_to_hosts.get(state.epoch + 1, default_hosts)
            if args.discovery_wait > 0 and now != nxt:
                # The notice for the next epoch's hosts must come.
                start = time.monotonic()
                state._last_updated_timestamp = 0
                while state._host_messages.empty():
                    notification_manager.poll()
                    if time.monotonic() - start > args.discovery_wait:
                        raise TimeoutError("no notice of the host change")
                    time.sleep(0.1)
        if args.epoch_wait > 0:
            time.sleep(args.epoch_wait)
        state.epoch += 1
        state.batch = 0
        state.commits += 1
        state.commit()


def on_reset():
    for group in optimizer.param_groups:
        group["lr"] = lr * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, batch=0, epoch=0, commits=0,
                               rendezvous=0)
state.register_reset_callbacks([on_reset])
train(state)
