"""horovod.keras: the same as horovod.tensorflow.keras (Keras on
TensorFlow's backend: Keras 3, or Keras 2 from tf_keras under
TF_USE_LEGACY_KERAS=1), plus Horovod's PartialDistributedOptimizer."""

from horovod.tensorflow.keras import *  # noqa: F401,F403
from horovod.tensorflow.keras import (  # noqa: F401
    DistributedOptimizer, allgather, allreduce, broadcast,
    broadcast_global_variables, callbacks, elastic, load_model,
    reducescatter)
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.gradient_tape import local_layer_variables
from horovod.tensorflow.mpi_ops import Average, global_process_set


def PartialDistributedOptimizer(optimizer, name=None, device_dense='',
                                device_sparse='',
                                compression=Compression.none,
                                sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1,
                                average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set,
                                local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose gradients for the trainable weights of
    local_layers (a tf.keras layer or a list of them) stay on this rank.
    The other arguments are DistributedOptimizer's."""
    local_vars = local_layer_variables(local_layers)
    opt = DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense,
        device_sparse=device_sparse, compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        groups=groups, process_set=process_set,
        scale_local_gradients=scale_local_gradients)
    for var in local_vars:
        opt.register_local_var(var)
    return opt
