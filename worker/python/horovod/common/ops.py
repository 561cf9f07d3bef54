"""Horovod's reduction ops (the values Horovod gives hvd.Average and the
others) and the rules every front end applies to them."""

import warnings

from horovod.common import libhvd

Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_LIBOPS = {Average: libhvd.AVERAGE, Sum: libhvd.SUM, Adasum: libhvd.ADASUM,
           Min: libhvd.MIN, Max: libhvd.MAX, Product: libhvd.PRODUCT}


def libop(op):
    """libhvd's value of a Horovod op, or Horovod's ValueError."""
    if op not in _LIBOPS:
        raise ValueError("unknown reduction op %r: use hvd.Average, hvd.Sum, "
                         "hvd.Adasum, hvd.Min, hvd.Max or hvd.Product"
                         % (op,))
    return _LIBOPS[op]


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated ``average`` against ``op``: op
    wins, both is an error, neither is Average."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please "
                             "provide only one of them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and "
                      "will be removed in v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average


def check_adasum(op, process_set):
    """Horovod's conditions for Adasum: the global process set, and a
    power-of-two number of ranks (NotImplementedError otherwise)."""
    if op != Adasum:
        return
    if process_set.process_set_id != 0:
        raise NotImplementedError("Adasum does not support non-global "
                                  "process sets yet.")
    n = libhvd.lib.hvd_size()
    if n & (n - 1):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks "
                                  "is not supported yet.")
