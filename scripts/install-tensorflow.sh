#!/bin/sh
# Installs TensorFlow (tensorflow-cpu, the current release, 2.16 or later:
# Keras 3) from PyPI into a virtual environment (HVD_TF_VENV, default
# build-venv-tf/), for horovod.tensorflow's tests and the Keras example,
# with tf_keras (Keras 2, which tf.keras is under TF_USE_LEGACY_KERAS=1)
# of the same minor version.
# Its own venv, without Debian's site packages: TensorFlow brings the
# NumPy 2 it needs, which Debian's PyTorch (NumPy 1) cannot share. pip
# keeps the wheels, so later runs take seconds. Needs python3-venv.
set -eu
cd "$(dirname "$0")/.."
venv=${HVD_TF_VENV:-build-venv-tf}
# TensorFlow's start-up messages say nothing here.
export TF_CPP_MIN_LOG_LEVEL=2

if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import tensorflow, keras, tf_keras, sys;
sys.exit(int(tensorflow.__version__.split('.')[1]) < 16)" 2>/dev/null; then
    exit 0
fi
if ! [ -x "$venv/bin/python" ] ||
    ! "$venv/bin/python" -c "import tensorflow" 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv"
    echo "installing tensorflow-cpu into $venv"
    "$venv/bin/pip" install -q "tensorflow-cpu>=2.16"
fi
# tf_keras X.Y goes with TensorFlow X.Y. It requires the package named
# tensorflow, which tensorflow-cpu is under another name: without
# --no-deps pip would download all of TensorFlow a second time.
minor=$("$venv/bin/python" -c "import tensorflow as tf
print('.'.join(tf.__version__.split('.')[:2]))")
echo "installing tf_keras $minor into $venv"
"$venv/bin/pip" install -q --no-deps "tf_keras~=$minor.0"
"$venv/bin/python" -c "import tensorflow as tf, keras, tf_keras
print('TensorFlow', tf.__version__, 'Keras', keras.__version__,
      'tf_keras', tf_keras.__version__, 'in $venv')"
