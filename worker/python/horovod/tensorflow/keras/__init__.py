"""horovod.tensorflow.keras on libhvd: Horovod's Keras API on tf.keras,
which is Keras 3 with TensorFlow 2.16 and later, or Keras 2 (the tf_keras
package) when TensorFlow runs with TF_USE_LEGACY_KERAS=1. Also importable
as ``horovod.keras``.

    import horovod.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.01 * hvd.size(),
                                                 warmup_epochs=5)])

The callbacks are built on whatever tf.keras is when this module is first
imported, as Horovod's are; DistributedOptimizer and load_model take the
optimizers of either Keras.
"""

import warnings

import tensorflow as tf

from horovod.common.exceptions import (  # noqa: F401
    HorovodInternalError, HostsUpdatedInterrupt)
from horovod.tensorflow import (  # noqa: F401
    Adasum, Average, Compression, Max, Min, Product, ProcessSet, Sum,
    add_process_set, allgather_object, broadcast_object, broadcast_variables,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, global_process_set, init, is_homogeneous, is_initialized,
    join, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
    shutdown, size, start_timeline, stop_timeline, SyncBatchNormalization)
from horovod.tensorflow import functions as _functions
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import reduce_ops as _reduce
from horovod.tensorflow.keras import _keras2, _keras3
from horovod.tensorflow.keras import callbacks, elastic  # noqa: F401
from horovod.tensorflow.util import keras_major


def _implementation(optimizer):
    """The module that makes DistributedOptimizers of optimizer's Keras."""
    major = keras_major(optimizer)
    if major is None:
        raise ValueError("DistributedOptimizer takes a Keras optimizer "
                         "(tf.keras.optimizers), not %s"
                         % type(optimizer).__name__)
    return _keras3 if major >= 3 else _keras2


def DistributedOptimizer(optimizer, name=None, device_dense='',
                         device_sparse='', compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0,
                         op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """An optimizer like optimizer (same class and configuration) whose
    gradients are allreduced over the ranks (an average by default)
    before they are applied: in model.fit's train step, minimize(),
    apply_gradients() and Horovod's _compute_gradients().

    Arguments are Horovod's:
        optimizer: a tf.keras optimizer (Keras 3's, or tf_keras's and its
            legacy ones under TF_USE_LEGACY_KERAS=1).
        name: the new optimizer's name.
        compression: hvd.Compression.none or .fp16.
        sparse_as_dense: allreduce IndexedSlices as dense tensors.
        gradient_predivide_factor: divide by this before the sum and by
            size / factor after.
        op: hvd.Average or hvd.Sum.
        backward_passes_per_step: backward passes whose gradients add up
            before one allreduce and update (Keras 3: the optimizer's
            gradient_accumulation_steps, each pass allreduced).
        average_aggregated_gradients: divide those sums by
            backward_passes_per_step.
        num_groups, groups: how gradients are grouped into one call each
            (groups: a number of groups, or lists of variables).
        process_set: the ranks taking part.
        scale_local_gradients: divide the gradients of the variables given
            to register_local_var() by the number of ranks.
        device_dense, device_sparse: accepted; libhvd places the work.
    """
    if getattr(optimizer, "_hvd_distributed", False):
        raise ValueError("the optimizer is a DistributedOptimizer already")
    if op != Average and op != Sum:
        raise ValueError("op currently only supports Average and Sum")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` "
                      "and will be removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups, num_groups = num_groups, 0
    if groups is not None and not isinstance(groups, list) and \
            not (isinstance(groups, int) and groups > 0):
        raise ValueError("groups should be a non-negative integer or a list "
                         "of list of tf.Variable.")
    config = _config(compression, sparse_as_dense, op,
                     gradient_predivide_factor, groups, process_set,
                     backward_passes_per_step, average_aggregated_gradients,
                     scale_local_gradients)
    return _implementation(optimizer).make(optimizer, config, name)


def _config(compression, sparse_as_dense, op, gradient_predivide_factor,
            groups, process_set, backward_passes_per_step=1,
            average_aggregated_gradients=False, scale_local_gradients=True):
    """The Horovod settings a distributed optimizer class carries."""
    return dict(
        hvd_args=dict(compression=compression,
                      sparse_as_dense=sparse_as_dense, op=op,
                      gradient_predivide_factor=gradient_predivide_factor,
                      num_groups=0, groups=groups, process_set=process_set),
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        scale_local_gradients=scale_local_gradients)


def broadcast_global_variables(root_rank):
    """Horovod's TF1 broadcast of the global variables. In eager mode
    (TensorFlow 2) it raises RuntimeError, as Horovod's does: use
    ``hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank)`` in
    model.fit, or ``hvd.broadcast_variables(model.variables, root_rank)``.
    """
    return _functions.broadcast_global_variables(root_rank)


def allreduce(value, name=None, average=None, prescale_factor=1.0,
              postscale_factor=1.0, op=None, compression=Compression.none):
    """The allreduce of a value (a number, array or tensor) over the ranks,
    an average by default, as a tensor (Horovod's return value in eager
    mode). name names the constant made of value."""
    return _reduce.allreduce(tf.convert_to_tensor(value, name=name),
                             average=average, op=op,
                             prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor,
                             compression=compression)


def allgather(value, name=None):
    """Every rank's value (a number, array or tensor) concatenated along
    the first dimension, as a tensor."""
    return _ops.allgather(tf.convert_to_tensor(value, name=name))


def broadcast(value, root_rank, name=None):
    """root_rank's value (a number, array or tensor) on every rank, as a
    tensor."""
    return _ops.broadcast(tf.convert_to_tensor(value, name=name), root_rank)


def reducescatter(value, name=None, op=Average):
    """This rank's rows of the reduction (an average by default) of value
    over the ranks, as a tensor."""
    return _ops.reducescatter(tf.convert_to_tensor(value, name=name), op=op)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """Loads a model saved with model.save() by tf.keras and makes its
    optimizer a DistributedOptimizer, keeping the optimizer's state.

    Arguments:
        filepath: the saved model.
        custom_optimizers: optimizer classes the file names, besides
            Keras's own.
        custom_objects: other custom objects, as tf.keras.models.load_model
            takes.
        compression: the DistributedOptimizer's compression.
        legacy_opts: accepted for Horovod's signature: the optimizer is
            made distributed after loading, whatever its kind.
    """
    objects = dict(custom_objects or {})
    for c in custom_optimizers or []:
        objects.setdefault(c.__name__, c)
    model = tf.keras.models.load_model(filepath,
                                       custom_objects=objects or None)
    opt = getattr(model, "optimizer", None)
    if opt is not None and not getattr(opt, "_hvd_distributed", False):
        impl = _implementation(opt)
        # The same object, so its variables (momentum, Adam's moments)
        # stay; only its class gains the allreduce.
        opt.__class__ = impl.distributed_class(
            opt.__class__, _config(compression, False, Average, 1.0, None,
                                   global_process_set))
        opt._hvd_setup()
    return model
