"""horovod on libhvd: Horovod's Python API over this project's C runtime.

``import horovod.torch as hvd`` for PyTorch. This package replaces
Horovod's own; it is not Horovod and does not load Horovod's compiled
extensions.
"""

__version__ = "0.28.1+hvdc.0.1.0"
