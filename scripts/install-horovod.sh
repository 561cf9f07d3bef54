#!/bin/sh
# Builds real Horovod 0.28.1 from PyPI against Debian's PyTorch into a
# virtual environment (HVD_VENV, default build-venv/), for the tests and
# benchmarks of ranks that link real Horovod. The first build takes about
# 5 minutes on 2 cores; pip keeps the wheel, so later runs take seconds.
# Needs the packages of scripts/install-deps.sh --horovod.
set -eu
cd "$(dirname "$0")/.."
venv=${HVD_VENV:-build-venv}
version=0.28.1

if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import horovod.torch, sys;
sys.exit(horovod.__version__ != '$version')" 2>/dev/null; then
    exit 0
fi
# --system-site-packages: the venv sees Debian's torch and numpy.
/usr/bin/python3 -m venv --system-site-packages "$venv"
echo "building Horovod $version into $venv (first time: about 5 minutes)"
# Gloo and PyTorch are required; MPI is used when Open MPI is installed
# (scripts/install-deps.sh installs it), so ranks under --mpi use MPI.
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    "$venv/bin/pip" install -q --no-build-isolation "horovod==$version"
"$venv/bin/python" -c "import horovod.torch as hvd
assert hvd.gloo_built(), 'Horovod was built without Gloo'"
