"""Process sets: groups of ranks that run collectives among themselves.

Only the global process set (every rank) is supported by this runtime so
far; collectives accept it wherever Horovod takes a ``process_set``.
"""

from horovod.common import basics


class ProcessSet:
    """A set of ranks, as in Horovod. ``ranks`` None means every rank."""

    def __init__(self, ranks_or_comm=None):
        if ranks_or_comm is not None and not isinstance(
                ranks_or_comm, (list, tuple, range)):
            raise ValueError("ProcessSet takes a list of ranks")
        self.ranks = (sorted(set(ranks_or_comm))
                      if ranks_or_comm is not None else None)
        self.process_set_id = 0 if ranks_or_comm is None else None

    def _global(self):
        return self.process_set_id == 0

    def size(self):
        """The number of ranks in the set."""
        return basics.size() if self._global() else len(self.ranks)

    def rank(self):
        """This rank's place in the set."""
        if self._global():
            return basics.rank()
        return self.ranks.index(basics.rank())

    def included(self):
        """Whether this rank belongs to the set."""
        return self._global() or basics.rank() in self.ranks

    def __eq__(self, other):
        return (isinstance(other, ProcessSet) and
                self.process_set_id == other.process_set_id and
                self.ranks == other.ranks)

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks or ())))

    def __repr__(self):
        if self._global():
            return "ProcessSet(process_set_id=0, ranks=all)"
        return "ProcessSet(ranks=%r)" % (self.ranks,)


global_process_set = ProcessSet()


def check_supported(process_set):
    """Raises for a process set other than the global one."""
    if process_set is not global_process_set and not (
            isinstance(process_set, ProcessSet) and process_set._global()):
        raise NotImplementedError(
            "process sets other than the global one are not supported yet "
            "by this runtime")


def add_process_set(process_set):
    """Horovod's dynamic process sets; not supported yet."""
    raise NotImplementedError(
        "hvd.add_process_set() is not supported yet by this runtime")


def remove_process_set(process_set):
    """Horovod's dynamic process sets; not supported yet."""
    raise NotImplementedError(
        "hvd.remove_process_set() is not supported yet by this runtime")
