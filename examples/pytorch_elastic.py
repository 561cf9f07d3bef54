"""A CNN on CIFAR-10 with horovod.torch's elastic training, written the
way Horovod's elastic guide writes a PyTorch script:

    horovodrun -np 2 --min-np 1 --max-np 4 \
        --host-discovery-script ./discover_hosts.sh \
        python3 examples/pytorch_elastic.py

The job goes on when a process fails or when the discovery script lists
other hosts: every rank leaves the job and joins it again, the state
(model, optimizer, ElasticSampler, epoch, batch) comes back to its last
commit after a failure, rank 0's state goes to every rank, the learning
rate is scaled to the new size, and the sampler splits what is left of
the epoch among the new ranks.

It reads CIFAR-10 from --data-dir when the python version of the data set
(cifar-10-batches-py) is there, and otherwise trains on torchvision's
FakeData of the same shape (3x32x32 images, 10 classes). The default
model is a small CNN that trains quickly on CPUs; --model resnet18 takes
examples/pytorch_train.py's ResNet-18.

Rank 0 prints a line per epoch (the size, the mean loss, the samples the
job trained on in the epoch and how many of them were distinct), and at
the end a line starting "pytorch_elastic: done:" with the epochs, the
final size, the last epoch's loss and the samples trained on in all.
The samples count what the job kept: those of steps undone by a failure
are not counted twice.

For tests, --fail-at RANK:EPOCH makes the process that started as rank
RANK (its HOROVOD_RANK at the start) raise RuntimeError halfway through
epoch EPOCH (counted from 0).
"""

import argparse
import hashlib
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torchvision
import torchvision.transforms as transforms

import horovod.torch as hvd


def fail_at(text):
    """Parses --fail-at's RANK:EPOCH."""
    try:
        rank, epoch = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected RANK:EPOCH, got %r"
                                         % text) from None
    return rank, epoch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.path.expanduser("~/data"),
                   help="where cifar-10-batches-py is (default ~/data)")
    p.add_argument("--model", choices=("cnn", "resnet18"), default="cnn",
                   help="a small CNN (default) or ResNet-18")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank and step")
    p.add_argument("--batches-per-commit", type=int, default=10,
                   help="commit the state every this many steps (a "
                   "failure undoes at most this many)")
    p.add_argument("--lr", type=float, default=0.0125,
                   help="learning rate for one rank (scaled by the size)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=5e-5, help="weight decay")
    p.add_argument("--fake-size", type=int, default=5000,
                   help="samples of FakeData when CIFAR-10 is not on disk")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per rank")
    p.add_argument("--no-cuda", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fail-at", type=fail_at, metavar="RANK:EPOCH",
                   help="for tests: the process that started as rank RANK "
                   "raises RuntimeError halfway through epoch EPOCH")
    args = p.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.batches_per_commit < 1:
        p.error("--epochs, --batch-size and --batches-per-commit must be "
                "positive")
    return args


class Indexed(torch.utils.data.Dataset):
    """A dataset whose items also carry their index, so that the example
    can count which samples the job trained on."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x, y = self.data[i]
        return x, y, i


def dataset(args):
    """(dataset, description): CIFAR-10 from --data-dir, or FakeData."""
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


def make_model(name):
    """The small CNN ("cnn") or torchvision's ResNet-18 ("resnet18")."""
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=10)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(),
        nn.Linear(64, 10))


def weights_digest(model):
    """A digest of the model's parameters, to compare ranks."""
    h = hashlib.sha256()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Pending:
    """What this rank trained on since the state's last commit: the
    samples' indices, the sum of the steps' losses, the steps."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.indices, self.loss, self.steps = [], 0.0, 0


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
    # The rank this process started with: a later reset may change it.
    start_rank = int(os.environ.get("HOROVOD_RANK", "0"))

    data, what = dataset(args)
    # The elastic sampler deals out what is left of the epoch to the
    # ranks of the job as it is now.
    sampler = hvd.elastic.ElasticSampler(data, seed=args.seed)
    loader = torch.utils.data.DataLoader(Indexed(data),
                                         batch_size=args.batch_size,
                                         sampler=sampler)

    model = make_model(args.model).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum, weight_decay=args.wd)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())

    # No broadcast here: hvd.elastic.run gives every rank rank 0's state
    # before it trains, and again after each reset.
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0, batch=0, seen=[], loss_sum=0.0,
                                   loss_steps=0, samples=0,
                                   last_loss=float("nan"))
    pending = Pending()

    def on_reset():
        # The learning rate follows the number of ranks. What was trained
        # since the last commit is undone (after a failure) or already in
        # the state (a host change interrupts a commit).
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        pending.clear()
        if hvd.rank() == 0:
            print("pytorch_elastic: reset: %d ranks" % hvd.size(),
                  flush=True)
    state.register_reset_callbacks([on_reset])

    def gather():
        """Adds what every rank trained on since the last commit to the
        state (a collective)."""
        parts = hvd.allgather_object(
            (pending.indices, pending.loss, pending.steps),
            name="pytorch_elastic.pending")
        state.seen = state.seen + [i for p in parts for i in p[0]]
        state.loss_sum = state.loss_sum + sum(p[1] for p in parts)
        state.loss_steps = state.loss_steps + sum(p[2] for p in parts)
        pending.clear()

    if hvd.rank() == 0:
        print("pytorch_elastic: %d ranks, %s, %s, batch %d per rank, %s"
              % (hvd.size(), args.model, what, args.batch_size, device),
              flush=True)

    @hvd.elastic.run
    def train(state):
        model.train()
        while state.epoch < args.epochs:
            half = state.batch + len(loader) // 2
            for x, y, idx in loader:
                if args.fail_at == (start_rank, state.epoch) and \
                        state.batch == half:
                    raise RuntimeError("pytorch_elastic: process started as "
                                       "rank %d fails in epoch %d (--fail-at)"
                                       % (start_rank, state.epoch))
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                pending.indices.extend(idx.tolist())
                pending.loss += loss.item()
                pending.steps += 1
                state.sampler.record_batch(state.batch, args.batch_size)
                state.batch += 1
                if state.batch % args.batches_per_commit == 0:
                    gather()
                    state.commit()
            # The end of the epoch: report what the job trained on, and
            # commit the start of the next epoch.
            gather()
            state.last_loss = state.loss_sum / max(state.loss_steps, 1)
            if hvd.rank() == 0:
                print("pytorch_elastic: epoch %d: %d ranks, loss %.4f, "
                      "%d samples (%d distinct of %d)"
                      % (state.epoch, hvd.size(), state.last_loss,
                         len(state.seen), len(set(state.seen)), len(data)),
                      flush=True)
            state.samples += len(state.seen)
            state.epoch += 1
            state.batch = 0
            state.seen, state.loss_sum, state.loss_steps = [], 0.0, 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return state.last_loss

    final_loss = train(state)

    digests = hvd.allgather_object(weights_digest(model))
    if len(set(digests)) != 1:
        print("pytorch_elastic: rank %d: weights differ between ranks: %s"
              % (hvd.rank(), digests), file=sys.stderr, flush=True)
        sys.exit(1)
    if hvd.rank() == 0:
        print("pytorch_elastic: done: %d epochs, %d ranks, loss %.4f, "
              "%d samples" % (state.epoch, hvd.size(), final_loss,
                              state.samples), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
