"""horovod.tensorflow on libhvd: Horovod's TensorFlow API, so that a
training script written for Horovod runs unchanged on this runtime, with
today's TensorFlow (2.16 and later, with Keras 3 or, under
TF_USE_LEGACY_KERAS=1, Keras 2 from the tf_keras package).

    import horovod.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)

Launch with ``horovodrun -np 4 python train.py``. Collectives work in
eager mode, inside ``tf.function`` and in TF1 graphs; CPU tensors go to
libhvd by DLPack without a copy, GPU tensors through host memory.
"""

from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError, HostsUpdatedInterrupt)
from horovod.tensorflow import elastic, util  # noqa: F401
from horovod.tensorflow.compression import Compression  # noqa: F401
from horovod.tensorflow.functions import (  # noqa: F401
    allgather_object, broadcast_global_variables, broadcast_object,
    broadcast_object_fn, broadcast_variables)
from horovod.tensorflow.gradient_tape import (  # noqa: F401
    DistributedGradientTape, PartialDistributedGradientTape)
from horovod.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, _allreduce,
    _grouped_allreduce, add_process_set, allgather, alltoall, barrier,
    broadcast, broadcast_, ccl_built, cross_rank, cross_size, cuda_built,
    ddl_built, gloo_built, gloo_enabled, global_process_set,
    grouped_allgather, grouped_reducescatter,
    handle_average_backwards_compatibility, init, is_homogeneous,
    is_initialized, join, local_rank, local_rank_op, local_size,
    local_size_op, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    process_set_included_op, rank, rank_op, reducescatter,
    remove_process_set, rocm_built, shutdown, size, size_op, start_timeline,
    stop_timeline)
from horovod.tensorflow.optimizer import DistributedOptimizer  # noqa: F401
from horovod.tensorflow.reduce_ops import (  # noqa: F401
    allreduce, grouped_allreduce)
from horovod.tensorflow.sync_batch_norm import (  # noqa: F401
    SyncBatchNormalization)
from horovod.tensorflow.util import _executing_eagerly  # noqa: F401
