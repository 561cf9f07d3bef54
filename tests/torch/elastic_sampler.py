"""ElasticSampler across resets in a real elastic job: every process
writes the dataset indices it trained on, one "epoch index" line each, to
DIR/seen.<pid>, and commits after every batch; rank 0 appends a line to
DIR/log at the end of each epoch (a discovery script counts them to add
and remove hosts). test_elastic.py checks that each epoch saw the whole
dataset."""

import argparse
import os
import time

import torch

import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--samples", type=int, default=240)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--step-wait", type=float, default=0.02)
args = parser.parse_args()

hvd.init()
dataset = torch.arange(args.samples, dtype=torch.float32).unsqueeze(1)
model = torch.nn.Linear(1, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=1e-6),
    named_parameters=model.named_parameters())
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
seen = open(os.path.join(args.dir, "seen.%d" % os.getpid()), "a")


@hvd.elastic.run
def train(state):
    while state.epoch < args.epochs:
        indices = list(iter(state.sampler))
        for b in range(0, len(indices), args.batch):
            batch = indices[b:b + args.batch]
            optimizer.zero_grad()
            model(dataset[batch]).sum().backward()
            optimizer.step()
            seen.write("".join("%d %d\n" % (state.epoch, i) for i in batch))
            seen.flush()
            state.sampler.record_batch(b // args.batch, len(batch))
            time.sleep(args.step_wait)
            state.commit()
        if hvd.rank() == 0:
            with open(os.path.join(args.dir, "log"), "a") as f:
                f.write("%d %d\n" % (state.epoch, hvd.size()))
        state.epoch += 1
        state.sampler.set_epoch(state.epoch)
        state.commit()


train(hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0))
