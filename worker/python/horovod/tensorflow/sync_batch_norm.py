"""Horovod's SyncBatchNormalization: batch statistics over every rank's
batch, on tf.keras's BatchNormalization (Keras 3, or Keras 2 from
tf_keras under TF_USE_LEGACY_KERAS=1, whichever tf.keras is when this
module is first imported)."""

import inspect

import tensorflow as tf

from horovod.tensorflow import mpi_ops
from horovod.tensorflow.mpi_ops import Sum, global_process_set


# Keras 2's BatchNormalization takes fused and calls
# _moments(inputs, reduction_axes, keep_dims, mask); Keras 3's calls
# _moments(inputs, mask).
_KERAS2 = "reduction_axes" in inspect.signature(
    tf.keras.layers.BatchNormalization._moments).parameters


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """tf.keras.layers.BatchNormalization whose training-time mean and
    variance are those of the batches of every rank of process_set
    together: each channel's count, sum and sum of squares go through one
    allreduce (in float32 for half types, float64 otherwise), whose
    gradient carries the backward pass over the ranks too.

    Arguments are BatchNormalization's, and process_set. fused must stay
    False (Keras 2's fused kernel computes its statistics alone), as in
    Horovod.
    """

    def __init__(self, fused=False, process_set=global_process_set,
                 **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support "
                             "fused=True.")
        if _KERAS2:
            kwargs["fused"] = False
        super().__init__(**kwargs)
        self.process_set = process_set

    if _KERAS2:
        def _moments(self, inputs, reduction_axes, keep_dims, mask=None):
            if mask is not None or self.process_set.size() == 1:
                return super()._moments(inputs, reduction_axes, keep_dims,
                                        mask=mask)
            return self._sync_moments(inputs, list(reduction_axes),
                                      keep_dims)
    else:
        def _moments(self, inputs, mask):
            if mask is not None or self.process_set.size() == 1:
                return super()._moments(inputs, mask)
            return self._sync_moments(inputs, list(self._reduction_axes),
                                      False)

    def _sync_moments(self, inputs, axes, keep_dims):
        wide = tf.float64 if inputs.dtype == tf.float64 else tf.float32
        x = tf.cast(inputs, wide)
        count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), wide)
        s = tf.reduce_sum(x, axes, keepdims=keep_dims)
        sq = tf.reduce_sum(x * x, axes, keepdims=keep_dims)
        shape = tf.shape(s)
        n = tf.size(s)
        stats = mpi_ops._allreduce(
            tf.concat([tf.reshape(s, [-1]), tf.reshape(sq, [-1]), [count]],
                      0), op=Sum, process_set=self.process_set)
        total = stats[-1]
        mean = stats[:n] / total
        var = tf.maximum(stats[n:2 * n] / total - mean * mean, 0)
        return (tf.cast(tf.reshape(mean, shape), inputs.dtype),
                tf.cast(tf.reshape(var, shape), inputs.dtype))
