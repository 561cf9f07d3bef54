"""horovod.tensorflow.DistributedOptimizer: a TensorFlow 1-style
(tf.compat.v1.train) optimizer whose compute_gradients() allreduces the
gradients, as Horovod's; a Keras optimizer goes to
horovod.tensorflow.keras.DistributedOptimizer."""

import tensorflow as tf

from horovod.tensorflow.compression import Compression
from horovod.tensorflow.gradient_tape import allreduce_gradients
from horovod.tensorflow.mpi_ops import Average, global_process_set
from horovod.tensorflow.util import keras_major


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    """Wraps a tf.compat.v1.train.Optimizer; gradients are allreduced in
    compute_gradients(), so minimize() and apply_gradients() see them."""

    def __init__(self, optimizer, name, use_locking, hvd_args):
        self._optimizer = optimizer
        self._hvd_args = hvd_args
        super().__init__(name=name or "Distributed%s" % type(
            optimizer).__name__, use_locking=use_locking)

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, with the
        gradients allreduced over the ranks."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads = allreduce_gradients([g for g, _ in pairs],
                                    [v for _, v in pairs], **self._hvd_args)
        return list(zip(grads, [v for _, v in pairs]))

    def apply_gradients(self, *args, **kwargs):
        """The wrapped optimizer's apply_gradients()."""
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False,
                         device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """An optimizer that averages (by default) the gradients over the
    ranks before applying them, as Horovod's.

    A Keras optimizer is handed to horovod.tensorflow.keras's
    DistributedOptimizer; a tf.compat.v1.train.Optimizer is wrapped, its
    compute_gradients() (and so minimize()) allreducing the gradients.
    backward_passes_per_step > 1 is for Keras optimizers only here.
    """
    if keras_major(optimizer) is not None:
        from horovod.tensorflow import keras as hvd_keras
        return hvd_keras.DistributedOptimizer(
            optimizer, name=name, compression=compression,
            sparse_as_dense=sparse_as_dense,
            gradient_predivide_factor=gradient_predivide_factor, op=op,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients,
            num_groups=num_groups, groups=groups, process_set=process_set,
            scale_local_gradients=scale_local_gradients)
    if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
        raise ValueError("DistributedOptimizer takes a Keras optimizer or a "
                         "tf.compat.v1.train.Optimizer, not %r"
                         % (optimizer,))
    if backward_passes_per_step > 1:
        raise NotImplementedError(
            "backward_passes_per_step > 1 with a tf.compat.v1 optimizer: use "
            "a Keras optimizer")
    return _DistributedOptimizer(optimizer, name, use_locking, dict(
        compression=compression, sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups, groups=groups, process_set=process_set))
