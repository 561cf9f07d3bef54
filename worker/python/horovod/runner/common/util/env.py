"""What a worker learns from its environment."""

import os

# The launchers whose variables name a process's rank and size, in the
# order they are tried: horovodrun, Open MPI's mpirun, then PMI (MPICH,
# Intel MPI, Slurm).
_RANK_SIZE_VARS = (("HOROVOD_RANK", "HOROVOD_SIZE"),
                   ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                   ("PMI_RANK", "PMI_SIZE"))


def get_env_rank_and_size():
    """(rank, size) from the launcher's variables, or (0, 1) without a
    launcher.

    Raises:
        RuntimeError: one variable of a pair is set without the other.
    """
    for rank_var, size_var in _RANK_SIZE_VARS:
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError(
                "cannot tell this process's rank and size: %s is set but "
                "not %s" % ((rank_var, size_var) if rank is not None
                            else (size_var, rank_var)))
    return 0, 1
