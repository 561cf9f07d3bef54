"""Joining the job and asking about it: Horovod's basic functions, on
libhvd."""

import ctypes
import os
import threading

from horovod.common import libhvd
from horovod.common import process_sets as ps

_lock = threading.Lock()
_state = {"init": False, "homogeneous": True}

_NOT_INIT = "Horovod has not been initialized; use hvd.init()."


def init(comm=None, process_sets=None):
    """Joins the job: reads what horovodrun (or mpirun) handed this rank,
    meets the other ranks and starts libhvd's background thread.

    A second call while initialized does nothing, as in Horovod. Outside
    horovodrun or mpirun the job is this process alone (size 1).

    Arguments:
        comm: None, or a list of every rank (in any order). Horovod also
            takes a subset of the ranks, or an MPI communicator, as the
            global set: not supported here (NotImplementedError); use a
            process set instead.
        process_sets: a list of ProcessSet to register on every rank (in
            addition to hvd.global_process_set), or "dynamic" to allow
            hvd.add_process_set() later (sets
            HOROVOD_DYNAMIC_PROCESS_SETS=1).
    """
    if process_sets is None:
        process_sets = []
    elif isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("process_sets takes a list of ProcessSet or "
                             "\"dynamic\", not %r" % (process_sets,))
        process_sets = []
        os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    if comm is not None and not isinstance(comm, (list, tuple, range)):
        raise NotImplementedError(
            "hvd.init(comm=<MPI communicator>) is not supported by this "
            "runtime: use process sets")
    with _lock:
        if _state["init"]:
            return
        libhvd.check(libhvd.lib.hvd_init())
        _state["init"] = True
        if comm and sorted(comm) != list(range(libhvd.lib.hvd_size())):
            raise NotImplementedError(
                "hvd.init(comm=%r): a subset of the ranks as the global "
                "set is not supported by this runtime; start only those "
                "ranks, or use hvd.ProcessSet" % (list(comm),))
        _state["homogeneous"] = _same_local_size()
        ps._init_process_sets(list(process_sets))


def shutdown():
    """Leaves the job and stops libhvd's background thread. Operations
    still running fail with HorovodInternalError."""
    with _lock:
        if _state["init"]:
            _state["init"] = False
            libhvd.lib.hvd_shutdown()


def is_initialized():
    """True between init() and shutdown()."""
    return _state["init"]


def _query(fn):
    value = fn()
    if value < 0:
        raise ValueError(_NOT_INIT)
    return value


def size():
    """The number of ranks in the job."""
    return _query(libhvd.lib.hvd_size)


def rank():
    """This process's rank, 0 to size() - 1."""
    return _query(libhvd.lib.hvd_rank)


def local_size():
    """The number of ranks on this host."""
    return _query(libhvd.lib.hvd_local_size)


def local_rank():
    """This process's rank among the ranks of its host."""
    return _query(libhvd.lib.hvd_local_rank)


def cross_size():
    """The number of hosts that have a rank of this local rank."""
    return _query(libhvd.lib.hvd_cross_size)


def cross_rank():
    """This host's index among the hosts that have this local rank."""
    return _query(libhvd.lib.hvd_cross_rank)


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    if not _state["init"]:
        raise ValueError(_NOT_INIT)
    return _state["homogeneous"]


def _same_local_size():
    """Whether every rank has the same local size (a collective, run by
    init on every rank)."""
    n = local_size()
    mine = (ctypes.c_int32 * 2)(n, -n)
    out = (ctypes.c_int32 * 2)()
    handle = ctypes.c_void_p()
    libhvd.check(libhvd.lib.hvd_allreduce_ex_async(
        ctypes.addressof(mine), ctypes.addressof(out), 2, libhvd.INT32,
        libhvd.MAX, b"horovod.init.local_size", None, ctypes.byref(handle)),
        submit=True)
    libhvd.check(libhvd.lib.hvd_wait(handle))
    return out[0] == -out[1]


def mpi_threads_supported():
    """Horovod's question about MPI's threading; MPI is not used by a job
    horovodrun started, so this raises ValueError there, as Horovod does
    when MPI is not enabled."""
    if not mpi_enabled():
        raise ValueError("Horovod MPI is not enabled; Please make sure it's "
                         "installed and enabled.")
    return True


def mpi_enabled():
    """True when this job runs over MPI (started by mpirun)."""
    return libhvd.transport() == "mpi"


def mpi_built():
    """True when libhvd was built with its MPI backend."""
    return libhvd.built("mpi")


def gloo_enabled():
    """False: this runtime's controller is its own, not Gloo."""
    return False


def gloo_built():
    """False: libhvd has no Gloo; real Horovod ranks use horovodrun's Gloo
    store instead."""
    return False


def nccl_built():
    """Nonzero (NCCL's version code) when libhvd was built with NCCL."""
    return libhvd.built("nccl")


def ddl_built():
    """False: IBM DDL is not supported."""
    return False


def ccl_built():
    """False: oneCCL is not supported."""
    return False


def cuda_built():
    """True when libhvd was built with CUDA."""
    return bool(libhvd.built("cuda"))


def rocm_built():
    """False: ROCm is not supported."""
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing rank 0's timeline (a Chrome trace) to file_path,
    replacing one that runs; other ranks do nothing.

    Unlike Horovod, HOROVOD_TIMELINE=DYNAMIC is not needed first.
    """
    if not _state["init"]:
        raise ValueError(_NOT_INIT)
    libhvd.check(libhvd.lib.hvd_start_timeline(file_path.encode(),
                                               int(bool(mark_cycles))))


def stop_timeline():
    """Stops the timeline and closes its file (nothing if none runs)."""
    if not _state["init"]:
        raise ValueError(_NOT_INIT)
    libhvd.check(libhvd.lib.hvd_stop_timeline())
