#!/bin/sh
# Installs TensorFlow (tensorflow-cpu, the current release, 2.16 or later:
# Keras 3) from PyPI into a virtual environment (HVD_TF_VENV, default
# build-venv-tf/), for horovod.tensorflow's tests and the Keras example.
# Its own venv, without Debian's site packages: TensorFlow brings the
# NumPy 2 it needs, which Debian's PyTorch (NumPy 1) cannot share. pip
# keeps the wheels, so later runs take seconds. Needs python3-venv.
set -eu
cd "$(dirname "$0")/.."
venv=${HVD_TF_VENV:-build-venv-tf}

if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import tensorflow, keras, sys;
sys.exit(int(tensorflow.__version__.split('.')[1]) < 16)" 2>/dev/null; then
    exit 0
fi
/usr/bin/python3 -m venv "$venv"
echo "installing tensorflow-cpu into $venv"
"$venv/bin/pip" install -q "tensorflow-cpu>=2.16"
"$venv/bin/python" -c "import tensorflow as tf, keras
print('TensorFlow', tf.__version__, 'Keras', keras.__version__, 'in $venv')"
