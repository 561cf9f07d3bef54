"""horovod.tensorflow.keras on libhvd: Horovod's Keras API for Keras 3 on
the TensorFlow backend (also importable as ``horovod.keras``).

    import horovod.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.01 * hvd.size(),
                                                 warmup_epochs=5)])
"""

import keras
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
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow import reduce_ops as _reduce
from horovod.tensorflow.gradient_tape import allreduce_gradients
from horovod.tensorflow.keras import callbacks  # noqa: F401


def _distributed_class(base):
    """base with an apply() that allreduces the gradients first."""

    def apply(self, grads, trainable_variables=None):
        variables = (list(trainable_variables)
                     if trainable_variables is not None
                     else list(self._trainable_variables))
        grads = allreduce_gradients(list(grads), variables, **self._hvd_args)
        return super(cls, self).apply(grads, trainable_variables)

    cls = type(base.__name__, (base,), {
        "apply": apply, "__module__": base.__module__,
        "_hvd_distributed": True,
        "__doc__": "%s whose gradients are allreduced over the ranks "
                   "first (horovod.tensorflow.keras.DistributedOptimizer)."
                   % base.__name__})
    return cls


def DistributedOptimizer(optimizer, name=None, device_dense='',
                         device_sparse='', compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0,
                         op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """A Keras 3 optimizer like optimizer (same class and configuration)
    whose gradients are allreduced over the ranks (an average by default)
    before every update, in model.fit's train step or any apply().

    Arguments are Horovod's. backward_passes_per_step > 1 uses Keras 3's
    gradient_accumulation_steps, which averages what it accumulates, so it
    needs average_aggregated_gradients=True. device_dense, device_sparse
    and scale_local_gradients are accepted and ignored.
    """
    if getattr(optimizer, "_hvd_distributed", False):
        raise ValueError("the optimizer is a DistributedOptimizer already")
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if backward_passes_per_step > 1:
        if not average_aggregated_gradients:
            raise NotImplementedError(
                "backward_passes_per_step > 1 with Keras 3 accumulates with "
                "the optimizer's gradient_accumulation_steps, which averages "
                "the gradients: pass average_aggregated_gradients=True")
        config["gradient_accumulation_steps"] = backward_passes_per_step
    opt = _distributed_class(optimizer.__class__).from_config(config)
    opt._hvd_args = dict(compression=compression,
                         sparse_as_dense=sparse_as_dense, op=op,
                         gradient_predivide_factor=gradient_predivide_factor,
                         num_groups=num_groups, groups=groups,
                         process_set=process_set)
    return opt


def broadcast_global_variables(root_rank):
    """Horovod's TF1 broadcast of the global variables: Keras 3 has no
    global variables to broadcast. Use
    ``hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank)`` in
    model.fit, or ``hvd.broadcast_variables(model.variables, root_rank)``.
    """
    raise NotImplementedError(
        "broadcast_global_variables: Keras 3 has no global variables; use "
        "hvd.callbacks.BroadcastGlobalVariablesCallback(%d) or "
        "hvd.broadcast_variables(model.variables, root_rank=%d)"
        % (root_rank, root_rank))


def allreduce(value, name=None, average=None, prescale_factor=1.0,
              postscale_factor=1.0, op=None, compression=Compression.none):
    """The allreduce of a value (a number, array or tensor) over the ranks,
    as a NumPy value (an average by default)."""
    return _reduce.allreduce(tf.convert_to_tensor(value), average=average,
                             op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor,
                             compression=compression, name=name).numpy()


def allgather(value, name=None):
    """Every rank's value concatenated along the first dimension, as a
    NumPy value."""
    return _ops.allgather(tf.convert_to_tensor(value), name=name).numpy()


def broadcast(value, root_rank, name=None):
    """root_rank's value on every rank, as a NumPy value."""
    return _ops.broadcast(tf.convert_to_tensor(value), root_rank,
                          name=name).numpy()


def reducescatter(value, name=None, op=Average):
    """This rank's rows of the reduction of value over the ranks, as a
    NumPy value."""
    return _ops.reducescatter(tf.convert_to_tensor(value), name=name,
                              op=op).numpy()


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """Loads a Keras model saved with model.save() and makes its optimizer
    a DistributedOptimizer, keeping the optimizer's state.

    Arguments:
        filepath: the .keras file.
        custom_optimizers: optimizer classes the file names, besides
            Keras's own.
        custom_objects: other custom objects, as keras.models.load_model
            takes.
        compression: the DistributedOptimizer's compression.
    """
    objects = dict(custom_objects or {})
    for c in custom_optimizers or []:
        objects.setdefault(c.__name__, c)
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    opt = getattr(model, "optimizer", None)
    if opt is not None and not getattr(opt, "_hvd_distributed", False):
        # The same object, so its variables (momentum, Adam's moments)
        # stay; only its class gains the allreduce.
        opt.__class__ = _distributed_class(opt.__class__)
        opt._hvd_args = dict(compression=compression, sparse_as_dense=False,
                             op=Average, gradient_predivide_factor=1.0,
                             num_groups=0, groups=None,
                             process_set=global_process_set)
    return model
