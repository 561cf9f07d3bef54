"""Horovod's SyncBatchNormalization for Keras 3: batch statistics over
every rank's batch."""

import keras
import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.mpi_ops import Sum, global_process_set


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization whose training-time mean and
    variance are those of the batches of every rank of process_set
    together: each channel's count, sum and sum of squares go through one
    allreduce (in float32 for half types, float64 otherwise), whose
    gradient carries the backward pass over the ranks too.

    Arguments are BatchNormalization's, and process_set.
    """

    def __init__(self, *args, process_set=global_process_set, **kwargs):
        super().__init__(*args, **kwargs)
        self.process_set = process_set

    def _moments(self, inputs, mask):
        if mask is not None or self.process_set.size() == 1:
            return super()._moments(inputs, mask)
        wide = tf.float64 if inputs.dtype == tf.float64 else tf.float32
        x = tf.cast(inputs, wide)
        axes = list(self._reduction_axes)
        shape = tf.shape(x)
        count = tf.cast(tf.reduce_prod(tf.gather(shape, axes)), wide)
        s = tf.reshape(tf.reduce_sum(x, axes), [-1])
        sq = tf.reshape(tf.reduce_sum(x * x, axes), [-1])
        n = tf.shape(s)[0]
        stats = mpi_ops._allreduce(tf.concat([s, sq, [count]], 0), op=Sum,
                                   process_set=self.process_set)
        total = stats[-1]
        mean = stats[:n] / total
        var = tf.maximum(stats[n:2 * n] / total - mean * mean, 0)
        return tf.cast(mean, inputs.dtype), tf.cast(var, inputs.dtype)
