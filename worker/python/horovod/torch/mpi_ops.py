"""horovod.torch's collectives, run by libhvd on the tensors' memory.

Each call hands libhvd the tensor's data pointer: nothing is copied in
Python, and libhvd's background thread negotiates, fuses and runs the
operation. An ``_async`` call returns an int handle for ``poll()`` and
``synchronize()``; the plain forms wait, and take part in autograd.
"""

import ctypes
import itertools

import torch

from horovod.common import libhvd
from horovod.common.basics import (  # noqa: F401 (re-exported)
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
    local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    rank, rocm_built, shutdown, size, start_timeline, stop_timeline)
from horovod.common.exceptions import HorovodInternalError
from horovod.common.ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, check_adasum,
    handle_average_backwards_compatibility, libop)
from horovod.common.process_sets import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, remove_process_set,
    select)
from horovod.torch.compression import Compression, FP16Compressor

_DTYPES = {
    torch.uint8: libhvd.UINT8, torch.int8: libhvd.INT8,
    torch.int16: libhvd.INT16, torch.int32: libhvd.INT32,
    torch.int64: libhvd.INT64, torch.float16: libhvd.FLOAT16,
    torch.bfloat16: libhvd.BFLOAT16, torch.float32: libhvd.FLOAT32,
    torch.float64: libhvd.FLOAT64,
}


class _Pending:
    """An operation libhvd runs: its handles, the tensors it uses (kept
    alive until it ends) and how to make its result."""

    __slots__ = ("handles", "keep", "finish", "name")

    def __init__(self, handles, keep, finish, name):
        self.handles = handles
        self.keep = keep
        self.finish = finish
        self.name = name


_pending = {}
_inflight = {}  # name: the handle of the last operation of that name
_next_handle = itertools.count(1)
_group_names = itertools.count(1)


def _claim(name):
    """Horovod's ValueError for a name whose last operation still runs."""
    prev = _inflight.get(name) if name is not None else None
    if prev is not None and prev in _pending and not poll(prev):
        raise ValueError("an operation named %r is already in flight; names "
                         "must be unique among unfinished operations"
                         % (name,))


def _register(handles, keep, finish, name=None):
    handle = next(_next_handle)
    _pending[handle] = _Pending(handles, keep, finish, name)
    if name is not None:
        _inflight[name] = handle
    return handle


def _combine(parts, name):
    """One handle for the handles of parts, whose results it lists."""
    pend = [_pending.pop(h) for h in parts]
    return _register([h for p in pend for h in p.handles],
                     [p.keep for p in pend],
                     lambda: [p.finish() for p in pend], name)


def _dtype(tensor):
    """libhvd's dtype for tensor, or Horovod's ValueError."""
    dt = _DTYPES.get(tensor.dtype)
    if dt is None:
        raise ValueError("Tensor type %s is not supported." % tensor.type())
    if not tensor.is_contiguous():
        raise ValueError("Tensor is required to be contiguous.")
    return dt


def _ready(tensor):
    """libhvd reads a CUDA tensor after what torch's current stream has
    queued so far (an event it records there); nothing waits here."""
    if tensor.is_cuda:
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        libhvd.lib.hvd_use_cuda_stream(1, stream)


def _cname(name):
    return name.encode() if name is not None else None


def _submit_allreduce(tensor, output, name, op, prescale, postscale, wire):
    """One libhvd allreduce of tensor into output; its ctypes handle."""
    dt = _dtype(tensor)
    _ready(tensor)
    opts = None
    if prescale != 1.0 or postscale != 1.0 or wire:
        opts = ctypes.byref(libhvd.AllreduceOpts(prescale, postscale, wire))
    handle = ctypes.c_void_p()
    libhvd.next_shapes([tensor.shape])
    libhvd.check(libhvd.lib.hvd_allreduce_ex_async(
        tensor.data_ptr(), output.data_ptr(), tensor.numel(), dt,
        libop(op), _cname(name), opts, ctypes.byref(handle)), submit=True)
    return handle


def _allreduce_async(tensor, output, name, op, prescale_factor,
                     postscale_factor, process_set, wire=0):
    select(process_set)
    check_adasum(op, process_set)
    _claim(name)
    h = _submit_allreduce(tensor, output, name, op, prescale_factor,
                          postscale_factor, wire)
    return _register([h], (tensor, output), lambda: output, name)


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing tensor over every rank into a new tensor; tensor
    is not modified.

    Arguments:
        tensor: The tensor to reduce; every rank gives one of the same
            shape and dtype under the same name.
        average: Deprecated: use op.
        name: Pairs this operation across ranks; unnamed calls pair up in
            call order.
        op: hvd.Average (the default), hvd.Sum, hvd.Min, hvd.Max or
            hvd.Product.
        prescale_factor: Multiplies the input before the reduction.
        postscale_factor: Multiplies the result.
        process_set: The ranks taking part (a registered ProcessSet).

    Returns:
        A handle for poll() and synchronize(), which returns the result.
    """
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, tensor.new(tensor.shape), name, op,
                            prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """allreduce_async() in place: the result overwrites tensor."""
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor,
                            postscale_factor, process_set)


def _wire(compression, tensor):
    """Whether libhvd itself sends tensor as float16."""
    return int(compression is FP16Compressor and
               tensor.dtype == torch.float32)


class HorovodAllreduce(torch.autograd.Function):
    """allreduce as an autograd function: the gradient is the allreduce,
    with the same op and factors, of the result's gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor,
                process_set, wire):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return synchronize(_allreduce_async(
            tensor, tensor.new(tensor.shape), name, op, prescale_factor,
            postscale_factor, process_set, wire))

    @staticmethod
    def backward(ctx, grad_output):
        op, pre, post, ps = ctx.args
        return (allreduce(grad_output.contiguous(), op=op,
                          prescale_factor=pre,
                          postscale_factor=post, process_set=ps),
                None, None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Reduces tensor over every rank and returns the result, a new
    tensor of the same shape and dtype; differentiable.

    Arguments are those of allreduce_async(), and compression:
    hvd.Compression.none or hvd.Compression.fp16 (float32 is sent as
    float16 and summed in float32).
    """
    op = handle_average_backwards_compatibility(op, average)
    wire = _wire(compression, tensor)
    sent, cctx = (tensor, None) if wire else compression.compress(tensor)
    out = HorovodAllreduce.apply(sent, name, op, prescale_factor,
                                 postscale_factor, process_set, wire)
    return out if wire else compression.decompress(out, cctx)


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """allreduce() in place; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set))


def _grouped_async(tensors, outputs, name, op, prescale_factor,
                   postscale_factor, process_set):
    select(process_set)
    check_adasum(op, process_set)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped allreduce of no tensors")
    if name is None:
        # libhvd names a group's parts after it; unnamed groups pair up in
        # call order, as unnamed single calls do.
        name = "grouped_allreduce.noname.%d" % next(_group_names)
    _claim(name)
    dts = {_dtype(t) for t in tensors}
    if len(dts) == 1 and prescale_factor == 1.0 and postscale_factor == 1.0:
        n = len(tensors)
        for t in tensors:
            _ready(t)
        sends = (ctypes.c_void_p * n)(*[t.data_ptr() for t in tensors])
        recvs = (ctypes.c_void_p * n)(*[o.data_ptr() for o in outputs])
        counts = (ctypes.c_size_t * n)(*[t.numel() for t in tensors])
        h = ctypes.c_void_p()
        libhvd.next_shapes([t.shape for t in tensors])
        libhvd.check(libhvd.lib.hvd_grouped_allreduce_async(
            sends, recvs, counts, n, dts.pop(), libop(op), _cname(name),
            ctypes.byref(h)), submit=True)
        handles = [h]
    else:
        # One libhvd group holds one dtype and no factors: run the parts
        # side by side under the names libhvd would give them.
        handles = [_submit_allreduce(
            t, o, None if name is None else "%s.%d" % (name, i), op,
            prescale_factor, postscale_factor, 0)
            for i, (t, o) in enumerate(zip(tensors, outputs))]
    return _register(handles, (tensors, outputs), lambda: list(outputs),
                     name)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Starts reducing a list of tensors as one operation that completes
    together; synchronize() returns the list of results."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_async(tensors, [t.new(t.shape) for t in tensors], name,
                          op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """grouped_allreduce_async() in place."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_async(tensors, tensors, name, op, prescale_factor,
                          postscale_factor, process_set)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce as an autograd function."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(_grouped_async(
            tensors, [t.new(t.shape) for t in tensors], name, op,
            prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        op, pre, post, ps = ctx.args
        out = grouped_allreduce([g.contiguous() for g in grads], op=op,
                                prescale_factor=pre,
                                postscale_factor=post, process_set=ps)
        return (None, None, None, None, None) + tuple(out)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors together; returns the list of results."""
    op = handle_average_backwards_compatibility(op, average)
    sent = [compression.compress(t) for t in tensors]
    out = HorovodGroupedAllreduce.apply(name, op, prescale_factor,
                                        postscale_factor, process_set,
                                        *[s for s, _ in sent])
    return [compression.decompress(o, c) for o, (_, c) in zip(out, sent)]


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """grouped_allreduce() in place; returns the list of tensors."""
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


def _row_shape(tensor):
    """The shape of one row (all but the first dimension) and its size."""
    rows = tuple(tensor.shape[1:]) if tensor.dim() > 0 else ()
    row = 1
    for d in rows:
        row *= d
    return rows, row


def _take(buf, counts, tensor, what, name):
    """The tensor of rows libhvd gathered into buf (malloc()ed, freed
    here), whose per-rank element counts are counts, on tensor's device."""
    rows, row = _row_shape(tensor)
    total = sum(counts)
    try:
        bad = [r for r in range(len(counts)) if row and counts[r] % row]
        if bad:
            raise HorovodInternalError(
                "%s %s: rank %d sent %d elements, which are not rows of "
                "shape %s: ranks may differ in the first dimension only"
                % (what, name or "(unnamed)", bad[0], counts[bad[0]],
                   list(rows)))
        out = torch.empty((total // row if row else 0,) + rows,
                          dtype=tensor.dtype)
        if total:
            ctypes.memmove(out.data_ptr(), buf.value,
                           total * out.element_size())
    finally:
        if buf.value:
            libhvd.free(buf.value)
    return out.to(tensor.device) if tensor.is_cuda else out


def _host(tensor):
    """tensor, or its host copy for the calls libhvd takes on the host."""
    return tensor.cpu() if tensor.is_cuda else tensor


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's tensor along the first
    dimension, in rank order. Ranks may differ in the first dimension
    only.

    Returns:
        A handle for poll() and synchronize(), which returns the result.
    """
    select(process_set)
    n = process_set.size()
    _claim(name)
    dt = _dtype(tensor)
    src = _host(tensor)
    counts = (ctypes.c_size_t * n)()
    buf = ctypes.c_void_p()
    h = ctypes.c_void_p()
    libhvd.next_shapes([tensor.shape])
    libhvd.check(libhvd.lib.hvd_allgather_async(
        src.data_ptr(), src.numel(), dt, ctypes.byref(buf), counts,
        _cname(name), ctypes.byref(h)), submit=True)
    return _register([h], (src, counts, buf),
                     lambda: _take(buf, counts, tensor, "allgather", name),
                     name)


class HorovodAllgather(torch.autograd.Function):
    """allgather as an autograd function: each rank's gradient is its own
    rows of the average of the result's gradients."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output.contiguous(), op=Average,
                            process_set=ctx.process_set)
        counts = allgather(torch.tensor([ctx.rows], dtype=torch.int64),
                           process_set=ctx.process_set)
        offset = int(counts[:ctx.process_set.rank()].sum())
        return reduced.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension, in rank
    order, and returns the result; differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Starts allgathers of a list of tensors that complete together
    (tensor i is named "name.i"; one libhvd call when they share a dtype);
    synchronize() returns the list of results."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped allgather of no tensors")
    dts = {_dtype(t) for t in tensors}
    if len(dts) > 1:
        # libhvd groups one dtype: mixed ones go as parts of one handle.
        return _combine([allgather_async(t, None if name is None else
                                         "%s.%d" % (name, i), process_set)
                         for i, t in enumerate(tensors)], name)
    select(process_set)
    n = process_set.size()
    if name is None:
        name = "grouped_allgather.noname.%d" % next(_group_names)
    _claim(name)
    srcs = [_host(t) for t in tensors]
    k = len(srcs)
    sends = (ctypes.c_void_p * k)(*[s.data_ptr() for s in srcs])
    counts = (ctypes.c_size_t * k)(*[s.numel() for s in srcs])
    bufs = (ctypes.c_void_p * k)()
    got = (ctypes.c_size_t * (k * n))()
    h = ctypes.c_void_p()
    libhvd.next_shapes([t.shape for t in tensors])
    libhvd.check(libhvd.lib.hvd_grouped_allgather_async(
        sends, counts, k, dts.pop(), bufs, got, _cname(name),
        ctypes.byref(h)), submit=True)

    def finish():
        return [_take(ctypes.c_void_p(bufs[i]), got[i * n:(i + 1) * n],
                      tensors[i], "allgather", name) for i in range(k)]

    return _register([h], (srcs, sends, counts, bufs, got), finish, name)


class HorovodGroupedAllgather(torch.autograd.Function):
    """grouped_allgather as an autograd function: each tensor's gradient is
    what allgather's would be, the allreduces done as one group."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(
            list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        reduced = grouped_allreduce([g.contiguous() for g in grads],
                                    op=Average, process_set=ps)
        # Every rank's row counts, one row of them per rank.
        counts = allgather(torch.tensor([ctx.rows], dtype=torch.int64),
                           process_set=ps)
        offsets = counts[:ps.rank()].sum(dim=0)
        return (None, None) + tuple(
            r.narrow(0, int(o), n)
            for r, o, n in zip(reduced, offsets, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers of a list of tensors, together; the list of results;
    differentiable."""
    return list(HorovodGroupedAllgather.apply(name, process_set,
                                              *list(tensors)))


def _split_rows(rows, n):
    """Horovod's split of rows over n ranks: the first rows % n get one
    more."""
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing tensor over every rank and scattering the result:
    rank r gets its block of rows of the first dimension (the rows split
    as evenly as they go, the lower ranks taking one more).

    Arguments are those of allreduce_async(); op defaults to Average.

    Returns:
        A handle for poll() and synchronize(), which returns this rank's
        rows.

    Raises:
        HorovodInternalError: op is Adasum, which only allreduce supports
            (Horovod raises this RuntimeError too).
    """
    if op == Adasum:
        raise HorovodInternalError("reducescatter does not support Adasum: "
                                   "use hvd.Sum or hvd.Average")
    select(process_set)
    n = process_set.size()
    if tensor.dim() == 0:
        raise ValueError("reducescatter needs a tensor of at least one "
                         "dimension")
    _claim(name)
    dt = _dtype(tensor)
    _ready(tensor)
    rows, row = _row_shape(tensor)
    mine = _split_rows(tensor.shape[0], n)[process_set.rank()]
    output = tensor.new_empty((mine,) + rows)
    opts = None
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        opts = ctypes.byref(libhvd.AllreduceOpts(prescale_factor,
                                                 postscale_factor, 0))
    h = ctypes.c_void_p()
    libhvd.next_shapes([tensor.shape])
    libhvd.check(libhvd.lib.hvd_reducescatter_async(
        tensor.data_ptr(), output.data_ptr(), tensor.numel(), max(row, 1),
        dt, libop(op), _cname(name), opts, ctypes.byref(h)), submit=True)
    return _register([h], (tensor, output), lambda: output, name)


def _scaled_for_backward(grads, op, pre, post, n):
    """Horovod's gradient of a reducescatter, before its allgather."""
    factor = (n if op == Sum else 1) * pre * post
    return [g * factor if factor != 1 else g for g in grads]


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter as an autograd function: the gradient is the
    allgather of the result's gradients, times the size for Sum and the
    scale factors, as Horovod defines it."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor,
                postscale_factor):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return synchronize(reducescatter_async(
            tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        op, pre, post, ps = ctx.args
        g, = _scaled_for_backward([grad_output.contiguous()], op, pre, post,
                                  ps.size())
        return allgather(g, process_set=ps), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces tensor over every rank and returns this rank's rows of the
    result; differentiable. Arguments as reducescatter_async(), and
    compression."""
    sent, cctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(sent, name, op, process_set,
                                     prescale_factor, postscale_factor)
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescatters of a list of tensors that complete together;
    synchronize() returns the list of this rank's rows of each."""
    tensors = list(tensors)
    if name is None:
        name = "grouped_reducescatter.noname.%d" % next(_group_names)
    _claim(name)
    return _combine([reducescatter_async(t, "%s.%d" % (name, i), op,
                                         process_set, prescale_factor,
                                         postscale_factor)
                     for i, t in enumerate(tensors)], name)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """grouped_reducescatter as an autograd function."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor,
                *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor,
            postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        op, pre, post, ps = ctx.args
        gs = _scaled_for_backward([g.contiguous() for g in grads], op, pre,
                                  post, ps.size())
        return (None, None, None, None, None) + tuple(
            grouped_allgather(gs, process_set=ps))


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters of a list of tensors, together; the list of this
    rank's rows of each; differentiable."""
    sent = [compression.compress(t) for t in tensors]
    out = HorovodGroupedReducescatter.apply(name, op, process_set,
                                            prescale_factor, postscale_factor,
                                            *[s for s, _ in sent])
    return [compression.decompress(o, c) for o, (_, c) in zip(out, sent)]


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Starts sending rows of tensor's first dimension to every rank:
    splits[r] rows (in order) to rank r, or as many to each when splits is
    None (the first dimension must then divide evenly).

    Returns:
        A handle for poll() and synchronize(), which returns the rows
        every rank sent here, in rank order, and how many came from each
        (an int32 tensor).
    """
    select(process_set)
    n = process_set.size()
    if tensor.dim() == 0:
        raise ValueError("alltoall needs a tensor of at least one dimension")
    first = tensor.shape[0]
    if splits is None:
        if first % n:
            raise ValueError("alltoall: the first dimension (%d) does not "
                             "divide among %d ranks: give splits"
                             % (first, n))
        rows = [first // n] * n
    else:
        rows = [int(x) for x in (splits.tolist() if torch.is_tensor(splits)
                                 else splits)]
        if len(rows) != n or min(rows) < 0 or sum(rows) != first:
            raise ValueError("alltoall: splits must be %d non-negative "
                             "numbers of rows that add up to %d, not %r"
                             % (n, first, rows))
    _claim(name)
    dt = _dtype(tensor)
    src = _host(tensor)
    _, row = _row_shape(tensor)
    sendcounts = (ctypes.c_size_t * n)(*[k * row for k in rows])
    recvcounts = (ctypes.c_size_t * n)()
    buf = ctypes.c_void_p()
    h = ctypes.c_void_p()
    libhvd.next_shapes([tensor.shape])
    libhvd.check(libhvd.lib.hvd_alltoall_async(
        src.data_ptr(), sendcounts, dt, ctypes.byref(buf), recvcounts,
        _cname(name), ctypes.byref(h)), submit=True)

    def finish():
        out = _take(buf, recvcounts, tensor, "alltoall", name)
        got = [c // row if row else 0 for c in recvcounts]
        return out, torch.tensor(got, dtype=torch.int32)

    return _register([h], (src, sendcounts, recvcounts, buf), finish, name)


class HorovodAlltoall(torch.autograd.Function):
    """alltoall as an autograd function: the gradient goes back the way
    the rows came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(alltoall_async(tensor, splits, name,
                                                   process_set))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return out
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, *_):
        grad, _ = synchronize(alltoall_async(
            grad_output.contiguous(), ctx.received,
            process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of tensor to each rank r and returns the rows
    received, in rank order; with splits given, also how many came from
    each rank. Differentiable."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing a sparse COO tensor: every rank's indices and values
    are gathered (Sum keeps them all, Average also divides the values by
    the size; the result's duplicate indices add up when coalesced).

    Returns:
        A function that waits and returns the reduced sparse tensor, as in
        Horovod.
    """
    if op not in (Average, Sum):
        raise ValueError("sparse allreduce supports hvd.Average and hvd.Sum")
    # Gathered along the first dimension: one row per nonzero.
    indices = allgather_async(tensor._indices().t().contiguous(),
                              name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(tensor._values().contiguous(),
                             name="%s.values" % name, process_set=process_set)

    def wait():
        vals = synchronize(values)
        idx = synchronize(indices)
        if op == Average:
            vals = vals / process_set.size()
        return torch.sparse_coo_tensor(idx.t(), vals, tensor.size())

    return wait


def _broadcast_async(tensor, output, root_rank, name, process_set):
    select(process_set)
    _claim(name)
    dt = _dtype(output)
    _ready(output)
    h = ctypes.c_void_p()
    libhvd.next_shapes([output.shape])
    libhvd.check(libhvd.lib.hvd_broadcast_async(
        output.data_ptr(), output.numel(), dt, root_rank, _cname(name),
        ctypes.byref(h)), submit=True)
    return _register([h], (tensor, output), lambda: output, name)


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts copying root_rank's tensor to every rank, into a new tensor;
    tensor is not modified. Returns a handle."""
    return _broadcast_async(tensor, tensor.clone(), root_rank, name,
                            process_set)


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """broadcast_async() in place: root_rank's values overwrite tensor."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """broadcast as an autograd function: the root's gradient is the
    average of every rank's, the others' is zero."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output.contiguous(), op=Average,
                            process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank; differentiable."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast() in place; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name,
                                        process_set))


def poll(handle):
    """True when the operation of handle has completed, so that
    synchronize() will not wait."""
    pend = _pending.get(handle)
    if pend is None:
        raise ValueError("unknown handle %r" % (handle,))
    return all(libhvd.lib.hvd_poll(h) == 1 for h in pend.handles)


def synchronize(handle):
    """Waits for the operation of handle and returns its result (None for
    an unknown handle, as in Horovod).

    Raises:
        HorovodInternalError: the operation failed (a peer failed, or the
            ranks disagreed about it), with libhvd's account of why.
    """
    pend = _pending.pop(handle, None)
    if pend is None:
        return None
    if pend.name is not None and _inflight.get(pend.name) == handle:
        del _inflight[pend.name]
    failure = None
    for h in pend.handles:
        rc = libhvd.lib.hvd_wait(h)
        if rc < 0 and failure is None:
            failure = libhvd.message(rc)
    if failure is not None:
        raise HorovodInternalError(failure)
    return pend.finish()


def barrier(process_set=global_process_set):
    """Returns once every rank of process_set has called it."""
    select(process_set)
    libhvd.check(libhvd.lib.hvd_barrier(), submit=True)


def join(device=-1):
    """Tells the other ranks that this one has no more data (uneven data
    sets): until every rank has joined, their allreduces go on with this
    rank adding zeros (an average still divides by hvd.size()), and it
    blocks. Broadcasts, allgathers, alltoalls and reducescatters fail while
    a rank has joined, as in Horovod.

    Arguments:
        device: ignored (Horovod's device for its zero tensors): the
            zeros are made where the other ranks' tensors are.

    Returns:
        The rank that joined last.
    """
    rc = libhvd.lib.hvd_join()
    if rc < 0:
        raise HorovodInternalError(libhvd.message(rc))
    return rc
