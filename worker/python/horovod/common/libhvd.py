"""The ctypes binding of libhvd, the C runtime (worker/include/hvd.h).

Nothing here is compiled against a framework: tensors are passed to
libhvd by data pointer, so one build serves every torch version.
tests/python/test_binding.py checks the constants and signatures below
against the header.

The library is found, in this order, at ``$HVD_LIBRARY`` (a path), next
to this package (``horovod/_lib/``, where ``pip install`` puts it), or
by the dynamic linker's search for ``libhvd.so.0``.
"""

import ctypes
import ctypes.util
import os

from horovod.common.exceptions import HorovodInternalError

# libhvd's dtypes (enum hvd_dtype).
UINT8, INT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, INT16 = range(9)
# libhvd's reductions (enum hvd_op).
SUM, AVERAGE, MIN, MAX, PRODUCT, ADASUM = range(6)
# libhvd's compression of an allreduce (enum hvd_compression).
COMPRESS_NONE, COMPRESS_FP16 = 0, 1

# The codes of worker/include/hvd.h that are a call the program got wrong.
EINVAL = -1
ENOTINIT = -13
ENOTMEMBER = -23


class AllreduceOpts(ctypes.Structure):
    """struct hvd_allreduce_opts."""

    _fields_ = [("prescale", ctypes.c_double),
                ("postscale", ctypes.c_double),
                ("compression", ctypes.c_int)]


def _candidates():
    env = os.environ.get("HVD_LIBRARY")
    if env:
        return [env]
    here = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "_lib")
    found = ctypes.util.find_library("hvd")
    return [os.path.join(here, "libhvd.so.0"), os.path.join(here, "libhvd.so"),
            "libhvd.so.0"] + ([found] if found else [])


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError(
        "horovod: cannot load libhvd: tried %s; set HVD_LIBRARY to the "
        "path of libhvd.so (for a build tree: build/worker/libhvd.so)"
        % "; ".join(tried))


lib, path = _load()

_c = ctypes
_SIG = {
    "hvd_init": (_c.c_int, []),
    "hvd_shutdown": (_c.c_int, []),
    "hvd_rank": (_c.c_int, []),
    "hvd_size": (_c.c_int, []),
    "hvd_local_rank": (_c.c_int, []),
    "hvd_local_size": (_c.c_int, []),
    "hvd_cross_rank": (_c.c_int, []),
    "hvd_cross_size": (_c.c_int, []),
    "hvd_device": (_c.c_int, []),
    "hvd_barrier": (_c.c_int, []),
    "hvd_allreduce_ex_async": (_c.c_int, [
        _c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int,
        _c.c_char_p, _c.POINTER(AllreduceOpts), _c.POINTER(_c.c_void_p)]),
    "hvd_grouped_allreduce_async": (_c.c_int, [
        _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_void_p),
        _c.POINTER(_c.c_size_t), _c.c_int, _c.c_int, _c.c_int, _c.c_char_p,
        _c.POINTER(_c.c_void_p)]),
    "hvd_grouped_allgather_async": (_c.c_int, [
        _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_size_t), _c.c_int,
        _c.c_int, _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_size_t),
        _c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "hvd_broadcast_async": (_c.c_int, [
        _c.c_void_p, _c.c_size_t, _c.c_int, _c.c_int, _c.c_char_p,
        _c.POINTER(_c.c_void_p)]),
    "hvd_allgather_async": (_c.c_int, [
        _c.c_void_p, _c.c_size_t, _c.c_int, _c.POINTER(_c.c_void_p),
        _c.POINTER(_c.c_size_t), _c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "hvd_reducescatter_async": (_c.c_int, [
        _c.c_void_p, _c.c_void_p, _c.c_size_t, _c.c_size_t, _c.c_int,
        _c.c_int, _c.c_char_p, _c.POINTER(AllreduceOpts),
        _c.POINTER(_c.c_void_p)]),
    "hvd_alltoall_async": (_c.c_int, [
        _c.c_void_p, _c.POINTER(_c.c_size_t), _c.c_int,
        _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_size_t), _c.c_char_p,
        _c.POINTER(_c.c_void_p)]),
    "hvd_poll": (_c.c_int, [_c.c_void_p]),
    "hvd_wait": (_c.c_int, [_c.c_void_p]),
    "hvd_last_error": (_c.c_char_p, []),
    "hvd_strerror": (_c.c_char_p, [_c.c_int]),
    "hvd_err_name": (_c.c_char_p, [_c.c_int]),
    "hvd_built": (_c.c_int, [_c.c_char_p]),
    "hvd_transport": (_c.c_char_p, []),
    "hvd_allreduce": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.c_size_t,
                                 _c.c_int, _c.c_int, _c.c_char_p]),
    "hvd_host_updates": (_c.c_int, [_c.POINTER(_c.c_uint64)]),
    "hvd_start_timeline": (_c.c_int, [_c.c_char_p, _c.c_int]),
    "hvd_add_process_set": (_c.c_int, [_c.POINTER(_c.c_int), _c.c_int]),
    "hvd_remove_process_set": (_c.c_int, [_c.c_int]),
    "hvd_use_process_set": (_c.c_int, [_c.c_int]),
    "hvd_next_shapes": (_c.c_int, [
        _c.POINTER(_c.c_int64), _c.POINTER(_c.c_int), _c.c_int]),
    "hvd_process_set_size": (_c.c_int, [_c.c_int]),
    "hvd_process_set_rank": (_c.c_int, [_c.c_int]),
    "hvd_join": (_c.c_int, []),
    "hvd_use_cuda_stream": (_c.c_int, [_c.c_int, _c.c_void_p]),
    "hvd_stop_timeline": (_c.c_int, []),
    "hvd_free": (None, [_c.c_void_p]),
}
for _name, (_res, _args) in _SIG.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def free(ptr):
    """Frees a host buffer libhvd handed out (an allgather's or an
    alltoall's result), with libhvd's own hvd_free."""
    lib.hvd_free(ptr)


def next_shapes(shapes):
    """Tells libhvd the shapes of the tensors of this thread's next
    collective call (one shape, or one per tensor of a grouped call), so
    that ranks that disagree about them fail as Horovod's do."""
    dims = [int(d) for s in shapes for d in s]
    ndims = [len(s) for s in shapes]
    check(lib.hvd_next_shapes((_c.c_int64 * max(len(dims), 1))(*dims),
                              (_c.c_int * max(len(ndims), 1))(*ndims),
                              len(shapes)))


def built(feature):
    """libhvd's hvd_built(): nonzero when built with feature."""
    return lib.hvd_built(feature.encode())


def transport():
    """The host transport chosen at hvd_init ("" before)."""
    return lib.hvd_transport().decode()


def host_updates():
    """libhvd's hvd_host_updates(): (timestamp, changes) of the host
    notices horovodrun sent since the last call; changes is 0 for none."""
    ts = _c.c_uint64(0)
    changes = lib.hvd_host_updates(_c.byref(ts))
    return ts.value, changes


def any_rank(flag, name):
    """Whether flag is true on any rank (a collective of every rank,
    named name); raises HorovodInternalError when it fails."""
    mine = _c.c_int32(1 if flag else 0)
    out = _c.c_int32(0)
    check(lib.hvd_allreduce(_c.byref(mine), _c.byref(out), 1, INT32, MAX,
                            name.encode()))
    return out.value != 0


def message(rc):
    """The text of the last failure in this thread, or the code's."""
    last = lib.hvd_last_error()
    text = last.decode("utf-8", "replace") if last else ""
    return text or lib.hvd_strerror(rc).decode()


def check(rc, submit=False):
    """Raises what Horovod raises for a failed call, or returns rc.

    A call the program got wrong, found when it is submitted, is a
    ValueError; anything else, and any failure of a running operation,
    is a HorovodInternalError.
    """
    if rc >= 0:
        return rc
    msg = message(rc)
    if rc == ENOTINIT:
        raise ValueError("Horovod has not been initialized; use hvd.init().")
    if submit and rc in (EINVAL, ENOTMEMBER):
        raise ValueError(msg)
    raise HorovodInternalError(msg)
