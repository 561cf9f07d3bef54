"""Gradient compression for allreduce, as in Horovod."""

import torch

from horovod.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16.

    For float32 tensors, libhvd converts on the wire itself and sums in
    float32, so no float16 copy is made in Python; other floating-point
    dtypes are cast in Python, as Horovod does.
    """

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.type(ctx) if ctx is not None else tensor


class Compression:
    """The compressors, as ``hvd.Compression.none`` and ``.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
