"""ResNet-18 on CIFAR-10 with horovod.torch, written the way Horovod's
guide writes a PyTorch script:

    horovodrun -np 4 -H localhost:4 python3 examples/pytorch_train.py

It reads CIFAR-10 from --data-dir when the python version of the data set
(cifar-10-batches-py) is there, and otherwise trains on torchvision's
FakeData of the same shape (3x32x32 images, 10 classes), so that it runs
on a machine without the data set or a network. It uses a GPU per rank
when torch sees one (--no-cuda: never).

At the end rank 0 prints the throughput, every rank checks that its
weights equal rank 0's, and rank 0 saves a checkpoint if --checkpoint is
given.
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.data.distributed
import torchvision
import torchvision.transforms as transforms

import horovod.torch as hvd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.path.expanduser("~/data"),
                   help="where cifar-10-batches-py is (default ~/data)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0,
                   help="stop each epoch after this many steps (0: all)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.0125,
                   help="learning rate for one rank (scaled by the size)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-5, help="weight decay")
    p.add_argument("--fp16-allreduce", action="store_true",
                   help="send gradients as float16")
    p.add_argument("--fake-size", type=int, default=50000,
                   help="samples of FakeData when CIFAR-10 is not on disk")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per rank")
    p.add_argument("--warmup", type=int, default=2,
                   help="steps left out of the throughput")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--checkpoint", help="rank 0 saves the model here")
    p.add_argument("--no-cuda", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def dataset(args):
    tf = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465),
                             (0.2470, 0.2435, 0.2616))])
    if os.path.isdir(os.path.join(args.data_dir, "cifar-10-batches-py")):
        return torchvision.datasets.CIFAR10(args.data_dir, train=True,
                                            download=False, transform=tf), \
            "CIFAR-10 from %s" % args.data_dir
    return torchvision.datasets.FakeData(
        size=args.fake_size, image_size=(3, 32, 32), num_classes=10,
        transform=tf), "FakeData (CIFAR-10 not in %s)" % args.data_dir


def weights_digest(model):
    h = hashlib.sha256()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available() and not args.no_cuda
    if cuda:
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)
    device = torch.device("cuda" if cuda else "cpu")

    data, what = dataset(args)
    # Each rank reads its own part of every epoch.
    sampler = torch.utils.data.distributed.DistributedSampler(
        data, num_replicas=hvd.size(), rank=hvd.rank())
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size,
                                         sampler=sampler)

    model = torchvision.models.resnet18(num_classes=10).to(device)
    # The learning rate grows with the number of ranks, as the guide says.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum, weight_decay=args.wd)
    # Every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = (hvd.Compression.fp16 if args.fp16_allreduce
                   else hvd.Compression.none)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression)

    if hvd.rank() == 0:
        print("pytorch_train: %d ranks, %s, batch %d per rank, %s"
              % (hvd.size(), what, args.batch_size, device), flush=True)
    timed_steps, t0 = 0, None
    model.train()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, steps = 0.0, 0
        for i, (x, y) in enumerate(loader):
            if args.steps and i >= args.steps:
                break
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
            if i + 1 == args.warmup:
                t0 = time.perf_counter()
            elif i + 1 > args.warmup:
                timed_steps += 1
            if hvd.rank() == 0 and args.log_every and \
                    (i + 1) % args.log_every == 0:
                print("pytorch_train: epoch %d step %d loss %.4f"
                      % (epoch, i + 1, loss.item()), flush=True)
        # The epoch's loss, averaged over the ranks.
        avg = hvd.allreduce(torch.tensor(total / max(steps, 1)),
                            name="avg_loss").item()
        if hvd.rank() == 0:
            print("pytorch_train: epoch %d: mean loss %.4f over %d steps"
                  % (epoch, avg, steps), flush=True)
    elapsed = time.perf_counter() - t0 if t0 is not None else 0.0
    if hvd.rank() == 0 and timed_steps and elapsed > 0:
        rate = timed_steps * args.batch_size * hvd.size() / elapsed
        print("pytorch_train: %.1f samples/s over %d ranks (%d timed steps)"
              % (rate, hvd.size(), timed_steps), flush=True)

    digests = hvd.allgather_object(weights_digest(model))
    if len(set(digests)) != 1:
        print("pytorch_train: rank %d: weights differ between ranks: %s"
              % (hvd.rank(), digests), file=sys.stderr, flush=True)
        sys.exit(1)
    if hvd.rank() == 0:
        print("pytorch_train: weights equal on all %d ranks" % hvd.size(),
              flush=True)
        if args.checkpoint:
            torch.save(model.state_dict(), args.checkpoint)
            print("pytorch_train: saved %s" % args.checkpoint, flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
