"""horovod on libhvd: Horovod's Python API over this project's C runtime.

``import horovod.torch as hvd`` for PyTorch. This package replaces
Horovod's own; it is not Horovod and does not load Horovod's compiled
extensions. Importing it where real Horovod is installed too is refused,
so that the two are never mixed in one process.
"""

import os
from importlib import metadata

__version__ = "0.28.1+hvdc.0.1.0"


def _refuse_real_horovod():
    try:
        dist = metadata.distribution("horovod")
    except metadata.PackageNotFoundError:
        return
    where = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    raise ImportError(
        "horovod: real Horovod %s is installed in this environment (%s), "
        "and this is horovodrun-c's horovod package (%s): the two cannot be "
        "mixed; uninstall one (pip uninstall horovod) or use another "
        "environment" % (dist.version, dist.locate_file(""), where))


_refuse_real_horovod()
