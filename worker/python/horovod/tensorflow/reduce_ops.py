"""Horovod's public allreduce and grouped_allreduce for TensorFlow:
compression, the deprecated ``average``, Adasum's conditions and
IndexedSlices, over mpi_ops' collectives."""

import tensorflow as tf

from horovod.common.ops import check_adasum
from horovod.tensorflow import mpi_ops as _ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import (
    Average, Sum, _allreduce, _grouped_allreduce, allgather,
    global_process_set, handle_average_backwards_compatibility)


def _compress(compression, tensor):
    """(what to send, the decompression context, libhvd's wire flag):
    under fp16 a float32 tensor goes as it is, on libhvd's own float16
    wire, which sums in float32."""
    if compression is Compression.fp16 and tensor.dtype == tf.float32:
        return tensor, None, 1
    sent, ctx = compression.compress(tensor)
    return sent, ctx, 0


def _sparse_allreduce(slices, op, name, process_set):
    """Horovod's IndexedSlices allreduce: every rank's values and indices
    gathered (duplicates add up when used); Average divides the values."""
    if op not in (Average, Sum):
        raise NotImplementedError("Only Average and Sum are supported for "
                                  "IndexedSlices (sparse) allreduce")
    base = name or _ops._auto_name("sparse_allreduce", slices.values)
    values = allgather(slices.values, "%s.values" % base,
                       process_set=process_set)
    indices = allgather(slices.indices, "%s.indices" % base,
                        process_set=process_set)
    if op == Average:
        values = values / tf.cast(process_set.size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense='', device_sparse='',
              compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False):
    """Reduces tensor over every rank of process_set (an average by
    default) and returns the result; differentiable.

    Arguments are Horovod's: ``op`` (Average, Sum, Adasum, Min, Max,
    Product; ``average`` is deprecated), ``compression``, the scale
    factors, ``name``, ``process_set``. ``device_dense`` and
    ``device_sparse`` are accepted and ignored (libhvd places the work). A
    ``tf.IndexedSlices`` is gathered, as Horovod does.
    """
    op = handle_average_backwards_compatibility(op, average)
    check_adasum(op, process_set)
    if isinstance(tensor, tf.IndexedSlices):
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("Pre/postscale_factor are not "
                                      "supported with tf.IndexedSlices")
        return _sparse_allreduce(tensor, op, name, process_set)
    sent, ctx, wire = _compress(compression, tf.convert_to_tensor(tensor))
    out = _allreduce(sent, name, op, prescale_factor, postscale_factor,
                     process_set=process_set, wire=wire)
    return compression.decompress(out, ctx)


def grouped_allreduce(tensors, average=None, device_dense='',
                      device_sparse='', compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set, name=None,
                      ignore_name_scope=False):
    """allreduce() of a list of tensors that complete together; the list
    of results."""
    op = handle_average_backwards_compatibility(op, average)
    check_adasum(op, process_set)
    tensors = list(tensors)
    if any(isinstance(t, tf.IndexedSlices) for t in tensors):
        return [allreduce(t, op=op, compression=compression,
                          prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor,
                          process_set=process_set) for t in tensors]
    sent = [_compress(compression, tf.convert_to_tensor(t)) for t in tensors]
    if any(w for _, _, w in sent):
        outs = [_allreduce(s, None if name is None else "%s.%d" % (name, i),
                           op, prescale_factor, postscale_factor,
                           process_set=process_set, wire=w)
                for i, (s, _, w) in enumerate(sent)]
    else:
        outs = _grouped_allreduce([s for s, _, _ in sent], name, op,
                                  prescale_factor, postscale_factor,
                                  process_set=process_set)
    return [compression.decompress(o, c) for o, (_, c, _) in zip(outs, sent)]
