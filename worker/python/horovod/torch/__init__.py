"""horovod.torch on libhvd: Horovod's PyTorch API, so that a training
script written for Horovod runs unchanged on this runtime.

    import horovod.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Launch with ``horovodrun -np 4 python train.py``. Collectives take CPU
tensors by data pointer (no copy in Python); CUDA tensors are handed to
libhvd once torch's current stream has finished writing them.
"""

from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError, HostsUpdatedInterrupt)
from horovod.torch.compression import Compression  # noqa: F401
from horovod.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters)
from horovod.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set,
    allgather, allgather_async, allreduce, allreduce_, allreduce_async,
    alltoall, alltoall_async, grouped_reducescatter,
    grouped_reducescatter_async, reducescatter, reducescatter_async,
    allreduce_async_, barrier, broadcast, broadcast_, broadcast_async,
    broadcast_async_, ccl_built, cross_rank, cross_size, cuda_built,
    ddl_built, gloo_built, gloo_enabled, global_process_set,
    grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    init, is_homogeneous, is_initialized, join, local_rank, local_size,
    mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
    remove_process_set, rocm_built, shutdown, size, sparse_allreduce_async,
    start_timeline, stop_timeline, synchronize)
from horovod.torch.optimizer import DistributedOptimizer  # noqa: F401
from horovod.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from horovod.torch import elastic  # noqa: F401
