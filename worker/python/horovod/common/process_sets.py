"""Process sets: groups of ranks that run collectives among themselves,
as in Horovod.

Register them at start-up with ``hvd.init(process_sets=[...])``, or, with
``HOROVOD_DYNAMIC_PROCESS_SETS=1`` (or ``hvd.init(process_sets="dynamic")``),
later with ``hvd.add_process_set()``; every rank makes the same calls in
the same order. Pass one as ``process_set=`` to any collective: only its
ranks call it. A set's collective runs on the job's transport, the ranks
outside it taking part from their background threads without data, so
they never wait for it.
"""

import ctypes
import os
import threading

from horovod.common import libhvd


class ProcessSet:
    """A set of ranks (any order; kept sorted), as in Horovod.

    ``process_set_id`` is None until the set is registered; ``size()`` and
    ``rank()`` are None until then too.
    """

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list "
                             "of process ranks (MPI communicators are not "
                             "supported by this runtime)") from None
        if any(not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list "
                             "of process ranks")
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set, or None if not registered."""
        if self.process_set_id is None:
            return None
        return _answer(libhvd.lib.hvd_process_set_size(self.process_set_id))

    def rank(self):
        """This rank's place in the set, or None if not registered.

        Collectives still name roots by global rank (``hvd.rank()``).

        Raises:
            ValueError: this rank is not in the set.
        """
        if self.process_set_id is None:
            return None
        return _answer(libhvd.lib.hvd_process_set_rank(self.process_set_id))

    def included(self):
        """Whether this rank is in the set (None without ranks)."""
        if self.ranks is None:
            return None
        return libhvd.lib.hvd_rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=None)" % (
            self.process_set_id, self.ranks)

    __repr__ = __str__


def _answer(rc):
    if rc == libhvd.ENOTMEMBER:
        raise ValueError("Process is not part of provided process set.")
    if rc == libhvd.EINVAL:
        raise ValueError("Process set does not exist or has not been "
                         "registered.")
    return libhvd.check(rc)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _dynamic():
    return os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS", "") not in (
        "", "0")


def _register(process_set):
    """Adds the set on every rank (a collective); its id, or None when a
    set of these ranks exists already."""
    ranks = (ctypes.c_int * len(process_set.ranks))(*process_set.ranks)
    rc = libhvd.lib.hvd_add_process_set(ranks, len(process_set.ranks))
    if rc == libhvd.EINVAL and "exists already" in libhvd.message(rc):
        return None
    process_set.process_set_id = libhvd.check(rc, submit=True)
    return process_set.process_set_id


def _init_process_sets(process_sets):
    """Registers hvd.init()'s process sets; called on every rank."""
    global_process_set.ranks = list(range(libhvd.lib.hvd_size()))
    for i, ps in enumerate(process_sets):
        if not isinstance(ps, ProcessSet):
            raise ValueError("process_sets entry number %d is not a "
                             "ProcessSet: %r" % (i, ps))
        if _register(ps) is None:
            raise ValueError("Horovod could not be initialized because "
                             "process_sets entry number %d is a duplicate: "
                             "%s" % (i, ps))


def add_process_set(process_set):
    """Registers a new process set after hvd.init() and returns it; every
    rank calls it with the same ranks.

    Requires HOROVOD_DYNAMIC_PROCESS_SETS=1. No set of the same ranks may
    exist.

    Arguments:
        process_set: a ProcessSet, or a list of ranks.
    """
    if not _dynamic():
        raise ValueError("Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow adding "
                         "process sets after Horovod initialization.")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if _register(process_set) is None:
        raise ValueError("Attempted to add a duplicate process set: %s"
                         % (process_set,))
    return process_set


def remove_process_set(process_set):
    """Removes a registered process set on every rank and invalidates it;
    returns whether it was removed (never the global set).

    Requires HOROVOD_DYNAMIC_PROCESS_SETS=1; no collective of the set may
    still be running.
    """
    if not _dynamic():
        raise ValueError("Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow "
                         "removing process sets after Horovod "
                         "initialization.")
    psid = process_set.process_set_id
    if psid is None or psid == 0:
        return False
    process_set._invalidate()
    return libhvd.lib.hvd_remove_process_set(psid) == 0


# The set libhvd sends this thread's collectives to (libhvd's is per
# thread too): a call only when it changes.
_current = threading.local()


def select(process_set):
    """Makes this thread's next collectives go to process_set."""
    psid = getattr(process_set, "process_set_id", None)
    if psid is None:
        raise ValueError("process_set %r is not registered: pass it to "
                         "hvd.init(process_sets=...) or hvd.add_process_set()"
                         % (process_set,))
    if getattr(_current, "id", 0) != psid:
        libhvd.lib.hvd_use_process_set(psid)
        _current.id = psid
