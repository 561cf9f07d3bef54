"""Gradient compression for allreduce, as in Horovod."""

import tensorflow as tf

from horovod.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, as Horovod's does:
    compress() casts them (others pass unchanged) and decompress() casts
    back. hvd.allreduce of a float32 tensor skips the cast: libhvd
    converts on the wire itself and sums in float32."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx is not None else tensor


class Compression:
    """The compressors, as ``hvd.Compression.none`` and ``.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
