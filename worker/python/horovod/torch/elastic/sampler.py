"""ElasticSampler: Horovod's sampler that splits a dataset among the
ranks and, after a reset, splits what is left of the epoch among the
new ranks."""

import math
import random

import torch.utils.data

from horovod.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Splits a dataset among the ranks, like DistributedSampler, and
    remembers how much of the epoch the job has processed, so that after
    a reset the samples not yet processed are split among the ranks of
    the new job.

    Use it so:

    1. track it in the ``TorchState`` (``TorchState(..., sampler=s)``),
       which saves, restores and synchronizes it;
    2. call ``record_batch`` after each batch is processed;
    3. call ``set_epoch(epoch + 1)`` at the end of each epoch (not at the
       start: that would forget a partly processed epoch).

    The epoch's order (shuffled with ``seed + epoch``) is the same on
    every rank; the samples not yet processed are dealt out in turn,
    rank r taking every ``hvd.size()``-th one from position r. When they
    do not divide evenly, the first ones are repeated to fill the last
    round (as DistributedSampler does), so those few are processed twice.

    Arguments:
        dataset: the dataset (its length must not change).
        shuffle: shuffle the order in each epoch (default True).
        seed: the shuffle's seed, the same on every rank (default 0).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch (call it at the end of the previous one): nothing
        of it is processed yet, and with shuffle its order is new."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every rank has processed a batch of batch_size
        samples (batch_idx is accepted for Horovod's signature)."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        """What the TorchState keeps: the epoch and the number of its
        samples processed."""
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def load_state_dict(self, state_dict):
        """Takes the epoch and progress of state_dict, and splits what is
        left of the epoch among the current ranks."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Reads hvd.size() and hvd.rank() again and splits the samples
        of the epoch not yet processed among the ranks."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) /
                                         self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:self.total_size - len(indices)]
        self.indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
