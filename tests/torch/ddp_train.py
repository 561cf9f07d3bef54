"""The peer of examples/pytorch_train.py for the training benchmark: the
same model, data (its FakeData), batch, optimizer and threads, with
torch's own DistributedDataParallel over gloo. Started by horovodrun, which sets
torch.distributed's env (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)."""

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
import torchvision.transforms as transforms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fake-size", type=int, default=50000)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    torch.set_num_threads(args.threads)
    data = torchvision.datasets.FakeData(
        size=args.fake_size, image_size=(3, 32, 32), num_classes=10,
        transform=transforms.Compose([
            transforms.ToTensor(),
            transforms.Normalize((0.4914, 0.4822, 0.4465),
                                 (0.2470, 0.2435, 0.2616))]))
    sampler = torch.utils.data.distributed.DistributedSampler(
        data, num_replicas=size, rank=rank)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size,
                                         sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(
        torchvision.models.resnet18(num_classes=10))
    opt = torch.optim.SGD(model.parameters(), lr=0.0125 * size, momentum=0.9,
                          weight_decay=5e-5)
    t0, timed = None, 0
    for i, (x, y) in enumerate(loader):
        if i >= args.steps:
            break
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if i + 1 == args.warmup:
            t0 = time.perf_counter()
        elif i + 1 > args.warmup:
            timed += 1
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print("ddp_train: %.1f samples/s over %d ranks (%d timed steps)"
              % (timed * args.batch_size * size / elapsed, size, timed),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
