"""Run under horovodrun: the last rank kills itself in the middle of a
training step; every other rank must see HorovodInternalError from
step(), with libhvd's account of the failure. The ranks outlive
horovodrun's SIGTERM (as a script that saves a checkpoint on SIGTERM
would), so that each reports what it saw."""

import os
import signal
import sys

import torch

import horovod.torch as hvd

torch.set_num_threads(1)
signal.signal(signal.SIGTERM, lambda *_: None)
hvd.init()
model = torch.nn.Linear(64, 64)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
for step in range(1000):
    opt.zero_grad()
    model(torch.randn(8, 64)).sum().backward()
    if step == 3 and hvd.rank() == hvd.size() - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        opt.step()
    except hvd.HorovodInternalError as e:
        print("torchkill: rank %d: HorovodInternalError at step %d: %s"
              % (hvd.rank(), step, e), flush=True)
        sys.exit(3)
print("torchkill: rank %d: no error" % hvd.rank(), flush=True)
