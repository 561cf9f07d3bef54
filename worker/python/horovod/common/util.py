"""horovod.common.util: the helpers of Horovod's module of that name that
training scripts and Horovod's own tests import, on libhvd.

Horovod's front ends are compiled extensions, one per framework; here they
are Python modules over one libhvd, so a front end is "available" when its
framework can be imported, and the built-with questions go to libhvd.
"""

import contextlib
import functools
import importlib.util
import os

from horovod.common import basics
from horovod.common import ops

# The framework each front end needs; MXNet has no front end here.
_FRAMEWORKS = {"horovod.torch": "torch",
               "horovod.tensorflow": "tensorflow",
               "horovod.keras": "keras"}


def _cache(f):
    """Remembers f's result for each set of arguments."""
    cached = {}

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        key = (args, frozenset(kwargs.items()))
        if key not in cached:
            cached[key] = f(*args, **kwargs)
        return cached[key]

    return wrapper


@_cache
def extension_available(ext_base_name, verbose=False):
    """True when the front end ext_base_name (``"horovod.torch"``,
    ``"horovod.tensorflow"``) can be used: its framework is installed.
    With verbose, says why not."""
    framework = _FRAMEWORKS.get(ext_base_name)
    ok = framework is not None and \
        importlib.util.find_spec(framework) is not None
    if verbose and not ok:
        print("%s is not available: %s" % (
            ext_base_name, "%s is not installed" % framework if framework
            else "this horovod package has no such front end"))
    return ok


@_cache
def gpu_available(ext_base_name, verbose=False):
    """True when the front end is available and libhvd was built with
    CUDA."""
    return extension_available(ext_base_name, verbose) and \
        basics.cuda_built()


def mpi_built(verbose=False):
    """True when libhvd was built with its MPI backend."""
    return bool(basics.mpi_built())


def gloo_built(verbose=False):
    """False: libhvd has no Gloo (its own controller takes Gloo's place)."""
    return basics.gloo_built()


def nccl_built(verbose=False):
    """NCCL's version code when libhvd was built with NCCL, else 0."""
    return basics.nccl_built()


def ddl_built(verbose=False):
    """False: IBM DDL is not supported."""
    return basics.ddl_built()


def ccl_built(verbose=False):
    """False: oneCCL is not supported."""
    return basics.ccl_built()


@contextlib.contextmanager
def env(**kwargs):
    """Sets the environment variables given (None leaves one alone) for the
    body of a ``with``, and puts back what was there before."""
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    saved = {k: os.environ.get(k) for k in kwargs}
    os.environ.update(kwargs)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def get_average_backwards_compatibility_fun(reduce_ops):
    """A function (op, average) -> op that applies Horovod's rule for the
    deprecated ``average`` argument with reduce_ops' Average and Sum."""
    def impl(op, average):
        chosen = ops.handle_average_backwards_compatibility(op, average)
        if op is not None:
            return op
        return reduce_ops.Average if chosen == ops.Average else reduce_ops.Sum
    return impl


def num_rank_is_power_2(num_rank):
    """True when num_rank is a power of two (what Adasum needs)."""
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


def split_list(l, n):
    """l cut into n consecutive pieces whose lengths differ by one at
    most, the longer ones first."""
    q, r = divmod(len(l), n)
    bounds = [i * q + min(i, r) for i in range(n + 1)]
    return [l[bounds[i]:bounds[i + 1]] for i in range(n)]


def is_iterable(x):
    """True when iter(x) works."""
    try:
        iter(x)
    except TypeError:
        return False
    return True


@_cache
def is_version_greater_equal_than(ver, target):
    """True when version string ver is target or later.

    Raises:
        ValueError: either is not a string, or not a version.
    """
    from packaging import version
    if not isinstance(ver, str) or not isinstance(target, str):
        raise ValueError("is_version_greater_equal_than takes two strings, "
                         "not %s and %s" % (type(ver).__name__,
                                            type(target).__name__))
    try:
        return version.parse(ver) >= version.parse(target)
    except version.InvalidVersion as e:
        raise ValueError(str(e)) from e
