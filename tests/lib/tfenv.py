"""Where the TensorFlow tests find things: the Python of the TensorFlow
venv, the horovod package and libhvd, from the environment meson sets
(HVD_TF_PYTHON, HVD_PYTHONPATH, HVD_LIBRARY) or the tree and its build."""

import os

import hvdtest

ROOT = hvdtest.ROOT
PY = os.environ.get("HVD_TF_PYTHON",
                    os.path.join(ROOT, "build-venv-tf", "bin", "python"))
PYPATH = os.environ.get("HVD_PYTHONPATH",
                        os.path.join(ROOT, "worker", "python"))
LIB = os.environ.get("HVD_LIBRARY",
                     os.path.join(hvdtest.BUILD, "worker", "libhvd.so"))
