"""Where the torch tests and benchmarks find things: the Python that sees
Debian's torch, the horovod package and libhvd, from the environment
meson sets (HVD_TORCH_PYTHON, HVD_PYTHONPATH, HVD_LIBRARY) or the build
tree; and horovodrun, as the integration tests find it (hvdtest)."""

import os

import hvdtest

ROOT = hvdtest.ROOT

HOROVODRUN = hvdtest.HOROVODRUN
BUILD = hvdtest.BUILD
PY = os.environ.get("HVD_TORCH_PYTHON", "/usr/bin/python3")
PYPATH = os.environ.get("HVD_PYTHONPATH",
                        os.path.join(ROOT, "worker", "python"))
LIB = os.environ.get("HVD_LIBRARY", os.path.join(BUILD, "worker", "libhvd.so"))
