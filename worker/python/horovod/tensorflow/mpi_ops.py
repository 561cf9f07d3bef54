"""Horovod's TensorFlow collectives on libhvd.

Each collective is one libhvd call on the tensor's memory. In eager mode a
CPU tensor is handed over by DLPack (no copy) and the result comes back by
DLPack from a new buffer; inside ``tf.function`` (the graphs ``model.fit``
builds included) the call runs in a ``tf.numpy_function``, which hands it
the tensor's memory the same way. GPU tensors are staged through host
memory. Gradients are Horovod's, through ``tf.custom_gradient``.
"""

import ctypes
import hashlib
import re
import weakref

import numpy as np
import tensorflow as tf

from horovod.common import libhvd
from horovod.common.basics import (  # noqa: F401
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    rank, rocm_built, shutdown, size, start_timeline, stop_timeline)
from horovod.common.exceptions import HorovodInternalError
from horovod.common.ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    handle_average_backwards_compatibility, libop)
from horovod.common.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set,
    select)

_DTYPES = {"uint8": libhvd.UINT8, "int8": libhvd.INT8,
           "int16": libhvd.INT16, "int32": libhvd.INT32,
           "int64": libhvd.INT64, "float16": libhvd.FLOAT16,
           "bfloat16": libhvd.BFLOAT16, "float32": libhvd.FLOAT32,
           "float64": libhvd.FLOAT64}

# libhvd refuses longer names; grouped calls add a suffix to each part.
_NAME_MAX = 200


def _auto_name(kind, tensor=None):
    """A name every rank gives the same unnamed collective, as Horovod
    names its ops.

    In eager mode each rank runs its collectives one at a time, in program
    order, so one name per kind pairs them up; a name that counted calls
    would set the ranks apart for good once one rank skipped a call (an
    exception on one rank). In a graph, the graph's unique name for the
    kind and the tensor's name (the op name Horovod's would have), which
    the same program gives the same collective on every rank.
    """
    if tf.executing_eagerly():
        return "%s.noname" % kind
    base = kind
    tensor_name = getattr(tensor, "name", None)
    if isinstance(tensor_name, str):
        base = "%s.%s" % (kind, tensor_name)
    base = re.sub(r"[^A-Za-z0-9_.]", "_", base)
    name = tf.compat.v1.get_default_graph().unique_name(base)
    if len(name) > _NAME_MAX:
        digest = hashlib.sha1(name.encode()).hexdigest()[:16]
        half = (_NAME_MAX - len(digest) - 2) // 2
        name = "%s.%s.%s" % (name[:half], digest, name[-half:])
    return name


# Types that collectives move but never reduce, as libhvd's type of the
# same size.
_MOVED = {"bool": libhvd.UINT8, "uint16": libhvd.INT16}


def _libdtype(dtype, moved=False):
    """libhvd's type for dtype; moved: the collective only moves data
    (allgather, broadcast, alltoall), so bool and uint16 go too."""
    name = tf.as_dtype(dtype).name
    dt = _DTYPES.get(name, _MOVED.get(name) if moved else None)
    if dt is None:
        raise ValueError("Tensor type %s is not supported." % name)
    return dt


def _contig(a):
    """a as a C-contiguous array of the same shape (np.ascontiguousarray
    would make a scalar 1-D)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _cname(name):
    return name.encode()


def _wait(handle, what, name):
    rc = libhvd.lib.hvd_wait(handle)
    # Ranks that disagree about the collective (shapes, types, root).
    if rc < 0 and libhvd.lib.hvd_err_name(rc) == b"HVD_EMISMATCH":
        # Horovod's ops fail with FailedPreconditionError when the ranks
        # disagree; a failed peer stays a HorovodInternalError.
        raise tf.errors.FailedPreconditionError(None, None,
                                                libhvd.message(rc))
    if rc < 0:
        raise HorovodInternalError(libhvd.message(rc))


def _submit(rc):
    return libhvd.check(rc, submit=True)


def _ptr(a):
    return a.ctypes.data if a.size else None


# TensorFlow's kernels take only tensors whose memory is aligned to this
# (Eigen's largest alignment), and DLPack hands memory over as it is.
_ALIGN = 64


def _empty(shape, dtype):
    """A C-contiguous array whose data is _ALIGN-aligned."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    return raw[off:off + nbytes].view(dtype).reshape(shape)


# The collectives on numpy arrays (C-contiguous, host memory). Each blocks
# until the result is in place.

def _np_allreduce(a, name, op, pre, post, wire, process_set):
    select(process_set)
    a = _contig(a)
    out = _empty(a.shape, a.dtype)
    opts = None
    if pre != 1.0 or post != 1.0 or wire:
        opts = ctypes.byref(libhvd.AllreduceOpts(pre, post, wire))
    h = ctypes.c_void_p()
    libhvd.next_shapes([a.shape])
    _submit(libhvd.lib.hvd_allreduce_ex_async(
        _ptr(a), _ptr(out), a.size, _libdtype(a.dtype), libop(op),
        _cname(name), opts, ctypes.byref(h)))
    _wait(h, "allreduce", name)
    return out


def _np_grouped_allreduce(arrays, name, op, process_set):
    select(process_set)
    arrays = [_contig(a) for a in arrays]
    outs = [_empty(a.shape, a.dtype) for a in arrays]
    n = len(arrays)
    h = ctypes.c_void_p()
    libhvd.next_shapes([a.shape for a in arrays])
    _submit(libhvd.lib.hvd_grouped_allreduce_async(
        (ctypes.c_void_p * n)(*[_ptr(a) for a in arrays]),
        (ctypes.c_void_p * n)(*[_ptr(o) for o in outs]),
        (ctypes.c_size_t * n)(*[a.size for a in arrays]), n,
        _libdtype(arrays[0].dtype), libop(op), _cname(name),
        ctypes.byref(h)))
    _wait(h, "grouped allreduce", name)
    return outs


def _gathered(buf, counts, like, what, name):
    """The rows libhvd gathered into buf (freed here)."""
    row = int(np.prod(like.shape[1:])) if like.ndim > 1 else 1
    total = sum(counts)
    try:
        if row and any(c % row for c in counts):
            raise HorovodInternalError(
                "%s %s: ranks may differ in the first dimension only"
                % (what, name))
        out = _empty((total // row if row else 0,) + like.shape[1:],
                     like.dtype)
        if total:
            ctypes.memmove(out.ctypes.data, buf.value,
                           total * out.itemsize)
    finally:
        if buf.value:
            libhvd.free(buf.value)
    return out


def _np_allgather(a, name, process_set):
    select(process_set)
    a = _contig(a if a.ndim else a.reshape(1))
    n = process_set.size()
    counts = (ctypes.c_size_t * n)()
    buf = ctypes.c_void_p()
    h = ctypes.c_void_p()
    libhvd.next_shapes([a.shape])
    _submit(libhvd.lib.hvd_allgather_async(
        _ptr(a), a.size, _libdtype(a.dtype, moved=True), ctypes.byref(buf),
        counts, _cname(name), ctypes.byref(h)))
    _wait(h, "allgather", name)
    return _gathered(buf, list(counts), a, "allgather", name)


def _np_broadcast(a, root_rank, name, process_set):
    select(process_set)
    out = _empty(np.shape(a), np.asarray(a).dtype)
    out[...] = a
    h = ctypes.c_void_p()
    libhvd.next_shapes([out.shape])
    _submit(libhvd.lib.hvd_broadcast_async(
        _ptr(out), out.size, _libdtype(out.dtype, moved=True),
        int(root_rank), _cname(name), ctypes.byref(h)))
    _wait(h, "broadcast", name)
    return out


def _split_rows(rows, n):
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def _np_reducescatter(a, name, op, pre, post, process_set):
    select(process_set)
    a = _contig(a)
    if a.ndim == 0:
        raise ValueError("reducescatter needs a tensor of at least one "
                         "dimension")
    n = process_set.size()
    row = int(np.prod(a.shape[1:])) if a.ndim > 1 else 1
    mine = _split_rows(a.shape[0], n)[process_set.rank()]
    out = _empty((mine,) + a.shape[1:], a.dtype)
    opts = None
    if pre != 1.0 or post != 1.0:
        opts = ctypes.byref(libhvd.AllreduceOpts(pre, post, 0))
    h = ctypes.c_void_p()
    libhvd.next_shapes([a.shape])
    _submit(libhvd.lib.hvd_reducescatter_async(
        _ptr(a), _ptr(out), a.size, max(row, 1), _libdtype(a.dtype),
        libop(op), _cname(name), opts, ctypes.byref(h)))
    _wait(h, "reducescatter", name)
    return out


def _np_alltoall(a, splits, name, process_set):
    select(process_set)
    a = _contig(a)
    if a.ndim == 0:
        raise ValueError("alltoall needs a tensor of at least one "
                         "dimension")
    n = process_set.size()
    if splits is None:
        if a.shape[0] % n:
            raise ValueError("alltoall: the first dimension (%d) does not "
                             "divide among %d ranks: give splits"
                             % (a.shape[0], n))
        rows = [a.shape[0] // n] * n
    else:
        rows = [int(x) for x in np.asarray(splits).reshape(-1)]
        if len(rows) != n or min(rows) < 0 or sum(rows) != a.shape[0]:
            raise ValueError("alltoall: splits must be %d non-negative "
                             "numbers of rows that add up to %d, not %r"
                             % (n, a.shape[0], rows))
    row = int(np.prod(a.shape[1:])) if a.ndim > 1 else 1
    send = (ctypes.c_size_t * n)(*[k * row for k in rows])
    got = (ctypes.c_size_t * n)()
    buf = ctypes.c_void_p()
    h = ctypes.c_void_p()
    libhvd.next_shapes([a.shape])
    _submit(libhvd.lib.hvd_alltoall_async(
        _ptr(a), send, _libdtype(a.dtype, moved=True), ctypes.byref(buf),
        got, _cname(name), ctypes.byref(h)))
    _wait(h, "alltoall", name)
    out = _gathered(buf, list(got), a, "alltoall", name)
    return out, np.array([c // row if row else 0 for c in got],
                         dtype=np.int32)


# From tensors to arrays and back.

def _dlpack_ptr(capsule):
    """The data pointer of a DLPack capsule (DLManagedTensor's DLTensor:
    data, then the device; byte_offset after shape and strides)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p = get(capsule, b"dltensor")
    data = ctypes.c_void_p.from_address(p).value
    offset = ctypes.c_uint64.from_address(p + 40).value
    return (data or 0) + offset


def _as_array(t):
    """A host numpy array on t's memory (DLPack, no copy) for CPU eager
    tensors; a host copy otherwise."""
    t = tf.convert_to_tensor(t)
    n = t.shape.num_elements()
    if "GPU" not in t.device.upper() and t.dtype.name in _DTYPES and n:
        try:
            cap = tf.experimental.dlpack.to_dlpack(t)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError):
            cap = None
        if cap is not None:
            dtype = np.dtype(t.dtype.as_numpy_dtype)
            raw = (ctypes.c_byte * (n * dtype.itemsize)).from_address(
                _dlpack_ptr(cap))
            return _Held(np.frombuffer(raw, dtype=dtype).reshape(t.shape),
                         (cap, t))
    return _Held(t.numpy(), None)


class _Held:
    """An array and what keeps its memory alive."""

    __slots__ = ("array", "keep")

    def __init__(self, array, keep):
        self.array = array
        self.keep = keep


def _to_tensor(a, like):
    """A tensor of a on like's device: by DLPack from host memory when it
    lives on the CPU."""
    if a.size and a.flags.c_contiguous and a.ctypes.data % _ALIGN == 0 and \
            "GPU" not in like.device.upper():
        try:
            return tf.experimental.dlpack.from_dlpack(a.__dlpack__())
        except (tf.errors.InvalidArgumentError, ValueError, TypeError,
                AttributeError, BufferError):
            pass  # a dtype DLPack lacks (bfloat16): a copy
    with tf.device(like.device):
        return tf.convert_to_tensor(a)


# The collective each TF1 graph traced last (see _run).
_last_collective = weakref.WeakKeyDictionary()


def _run(fn, tensors, tout, shape=None, name=None):
    """fn on the tensors' arrays: at once in eager mode, as a
    tf.numpy_function inside a graph."""
    if tf.executing_eagerly():
        held = [_as_array(t) for t in tensors]
        try:
            out = fn(*[h.array for h in held])
        except (ValueError, TypeError) as e:
            # What tf.numpy_function makes of them, here as in a graph:
            # Horovod's ops fail with InvalidArgumentError too.
            raise tf.errors.InvalidArgumentError(None, None, str(e)) from e
        del held
        if isinstance(out, tuple):
            return tuple(_to_tensor(o, tensors[0]) for o in out)
        return _to_tensor(out, tensors[0])
    graph = tf.compat.v1.get_default_graph()
    # Each collective blocks one of TensorFlow's inter-op threads until
    # every rank has submitted it. A tf.function orders stateful ops as
    # they were traced (automatic control dependencies), the same order on
    # every rank; a TF1 graph runs independent ops in any order, and with
    # as few threads as cores two ranks can each block every thread on
    # collectives the other has not reached. So there each collective
    # waits for the one traced before it (in the same TF1 control-flow
    # context: an op inside a v1 while loop cannot be waited for outside).
    if getattr(graph, "_add_control_dependencies", False):
        return tf.numpy_function(fn, list(tensors), tout, stateful=True,
                                 name=name)
    last = _last_collective.get(graph)
    if last is not None and last._get_control_flow_context() is not \
            graph._get_control_flow_context():
        last = None
    with tf.control_dependencies([last] if last is not None else []):
        out = tf.numpy_function(fn, list(tensors), tout, stateful=True,
                                name=name)
    first = out[0] if isinstance(out, (list, tuple)) else out
    _last_collective[graph] = first.op
    return out


def _unknown_first(t):
    return tf.TensorShape([None]).concatenate(t.shape[1:]) \
        if t.shape.rank else tf.TensorShape([None])


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0,
               postscale_factor=1.0, ignore_name_scope=False,
               process_set=global_process_set, wire=0):
    """Horovod's low-level allreduce (a sum by default), differentiable:
    the gradient is the allreduce of the gradient, with the same op and
    factors."""
    name = name or _auto_name("allreduce", tensor)

    @tf.custom_gradient
    def run(x):
        out = _run(lambda a: _np_allreduce(a, name, op, prescale_factor,
                                           postscale_factor, wire,
                                           process_set),
                   [x], x.dtype)
        if not tf.executing_eagerly():
            out.set_shape(x.shape)

        def grad(dy):
            return _allreduce(dy, op=op, prescale_factor=prescale_factor,
                              postscale_factor=postscale_factor,
                              process_set=process_set)
        return out, grad

    return run(tf.convert_to_tensor(tensor))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0,
                       postscale_factor=1.0, ignore_name_scope=False,
                       process_set=global_process_set):
    """Allreduces of a list of tensors that complete together (one libhvd
    call per dtype when unscaled)."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    if len({t.dtype for t in tensors}) > 1 or prescale_factor != 1.0 or \
            postscale_factor != 1.0:
        base = name or _auto_name("grouped_allreduce")
        return [_allreduce(t, "%s.%d" % (base, i), op, prescale_factor,
                           postscale_factor, process_set=process_set)
                for i, t in enumerate(tensors)]
    name = name or _auto_name("grouped_allreduce", tensors[0])

    @tf.custom_gradient
    def run(*xs):
        outs = _run(lambda *arrays: tuple(_np_grouped_allreduce(
            list(arrays), name, op, process_set)),
            list(xs), [x.dtype for x in xs])
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if not tf.executing_eagerly():
            for o, x in zip(outs, xs):
                o.set_shape(x.shape)

        def grad(*dys):
            return _grouped_allreduce(list(dys), op=op,
                                      process_set=process_set)
        return outs, grad

    return list(run(*tensors))


def allgather(tensor, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension, in rank
    order (ranks may differ in that dimension only); differentiable: each
    rank's gradient is its rows of the averaged gradient."""
    name = name or _auto_name("allgather", tensor)

    @tf.custom_gradient
    def run(x):
        out = _run(lambda a: _np_allgather(a, name, process_set), [x],
                   x.dtype)
        if not tf.executing_eagerly():
            out.set_shape(_unknown_first(x))

        def grad(dy):
            reduced = _allreduce(dy, op=Average, process_set=process_set)
            rows = tf.reshape(tf.shape(x)[0] if x.shape.rank else 1, [1])
            counts = allgather(rows, process_set=process_set)
            return tf.split(reduced, counts, num=process_set.size(),
                            axis=0)[process_set.rank()]
        return out, grad

    return run(tf.convert_to_tensor(tensor))


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """Allgathers of a list of tensors; the list of results."""
    base = name or _auto_name("grouped_allgather")
    return [allgather(t, "%s.%d" % (base, i), process_set=process_set)
            for i, t in enumerate(tensors)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """root_rank's tensor on every rank; differentiable: the root's
    gradient is the average of every rank's, the others' zero."""
    name = name or _auto_name("broadcast", tensor)

    @tf.custom_gradient
    def run(x):
        out = _run(lambda a: _np_broadcast(a, root_rank, name, process_set),
                   [x], x.dtype)
        if not tf.executing_eagerly():
            out.set_shape(x.shape)

        def grad(dy):
            reduced = _allreduce(dy, op=Average, process_set=process_set)
            return reduced if rank() == root_rank else reduced * 0
        return out, grad

    return run(tf.convert_to_tensor(tensor))


def broadcast_(variables, root_rank, name=None,
               process_set=global_process_set):
    """Assigns root_rank's values to the variables on every rank. Returns
    the variables in eager mode; in a graph, the assignments' results
    (running one broadcasts and assigns)."""
    base = name or _auto_name("broadcast_")
    out = [v.assign(broadcast(v, root_rank, "%s.%d" % (base, i),
                              process_set=process_set))
           for i, v in enumerate(variables)]
    return list(variables) if tf.executing_eagerly() else out


def reducescatter(tensor, name=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=global_process_set,
                  ignore_name_scope=False):
    """Reduces tensor over the ranks; rank r gets its block of rows of the
    first dimension (split as evenly as they go, lower ranks one more).
    Differentiable: the gradient is the allgather of the gradient, times
    the size for Sum and the scale factors, as Horovod defines it."""
    name = name or _auto_name("reducescatter", tensor)

    @tf.custom_gradient
    def run(x):
        out = _run(lambda a: _np_reducescatter(a, name, op, prescale_factor,
                                               postscale_factor,
                                               process_set),
                   [x], x.dtype)
        if not tf.executing_eagerly():
            out.set_shape(_unknown_first(x))

        def grad(dy):
            factor = (process_set.size() if op == Sum else 1) * \
                prescale_factor * postscale_factor
            g = dy * tf.cast(factor, dy.dtype) if factor != 1 else dy
            return allgather(g, process_set=process_set)
        return out, grad

    return run(tf.convert_to_tensor(tensor))


def grouped_reducescatter(tensors, name=None, op=Average,
                          prescale_factor=1.0, postscale_factor=1.0,
                          process_set=global_process_set,
                          ignore_name_scope=False):
    """Reducescatters of a list of tensors; the list of this rank's
    rows."""
    base = name or _auto_name("grouped_reducescatter")
    return [reducescatter(t, "%s.%d" % (base, i), op, prescale_factor,
                          postscale_factor, process_set)
            for i, t in enumerate(tensors)]


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[r] rows of tensor's first dimension to each rank r (or
    as many to each when splits is None); returns the rows received, in
    rank order, and, when splits is given, how many came from each rank
    (int32), as Horovod does. Differentiable: the gradient goes back the
    way the rows came."""
    name = name or _auto_name("alltoall", tensor)
    x = tf.convert_to_tensor(tensor)
    sp = tf.zeros([0], tf.int32) if splits is None else \
        tf.cast(tf.convert_to_tensor(splits), tf.int32)

    @tf.custom_gradient
    def run(x):
        out, got = _run(
            lambda a, s: _np_alltoall(a, None if splits is None else s, name,
                                      process_set),
            [x, sp], [x.dtype, tf.int32])
        if not tf.executing_eagerly():
            out.set_shape(_unknown_first(x))
            got.set_shape([None])

        def grad(dy, *_):
            back, _ = alltoall(dy, splits=got, process_set=process_set)
            return back
        return (out, got), grad

    out, got = run(x)
    return out if splits is None else (out, got)


def join():
    """Tells the other ranks that this one has no more data: until every
    rank has joined, their allreduces go on with it adding zeros. Returns
    the rank that joined last."""
    rc = libhvd.lib.hvd_join()
    if rc < 0:
        raise HorovodInternalError(libhvd.message(rc))
    return rc


def barrier(process_set=global_process_set):
    """Returns once every rank of process_set has called it."""
    select(process_set)
    libhvd.check(libhvd.lib.hvd_barrier(), submit=True)


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the process set), as a tensor."""
    n = size() if process_set_id == 0 else \
        libhvd.lib.hvd_process_set_size(process_set_id)
    return tf.constant(n, dtype=tf.int32, name=name)


def local_size_op(name=None):
    """The number of ranks on this host, as a tensor."""
    return tf.constant(local_size(), dtype=tf.int32, name=name)


def rank_op(name=None):
    """This rank, as a tensor."""
    return tf.constant(rank(), dtype=tf.int32, name=name)


def local_rank_op(name=None):
    """This rank's place on its host, as a tensor."""
    return tf.constant(local_rank(), dtype=tf.int32, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is in the process set, as a tensor."""
    inc = process_set_id == 0 or \
        libhvd.lib.hvd_process_set_rank(process_set_id) >= 0
    return tf.constant(int(inc), dtype=tf.int32, name=name)
