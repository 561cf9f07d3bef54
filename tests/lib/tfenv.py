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

# What an elastic job's TensorFlow ranks get: the package, libhvd, quiet
# TensorFlow, Keras 3, and a fast host discovery.
ELASTIC_ENV = dict(PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
                   PYTHONDONTWRITEBYTECODE="1", TF_CPP_MIN_LOG_LEVEL="2",
                   TF_USE_LEGACY_KERAS=None,
                   HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")


def require_tf_keras():
    """Raises, saying how to install them, unless PY imports tensorflow
    and keras."""
    import subprocess
    r = subprocess.run([PY, "-c", "import tensorflow, keras"],
                       capture_output=True, text=True,
                       env=hvdtest.base_env(**ELASTIC_ENV)) \
        if os.path.exists(PY) else None
    if r is None or r.returncode != 0:
        raise RuntimeError("%s cannot import tensorflow and keras (%s): "
                           "run scripts/install-deps.sh --tensorflow"
                           % (PY, r.stderr.strip()[-200:] if r else
                              "no such file"))
