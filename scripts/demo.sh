#!/bin/sh
# Installs what is missing, builds, and runs the demo jobs: 4 ranks here of
# the C example, then of the PyTorch example on horovod.torch, briefly.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --torch
[ -d build ] || meson setup build
ninja -C build
build/launcher/horovodrun -np 4 -H localhost:4 build/examples/train \
    --checkpoint build/checkpoint.bin
# horovod.torch from this build tree: the package's folder on PYTHONPATH and
# the path of libhvd in HVD_LIBRARY.
PYTHONPATH="$PWD/worker/python" HVD_LIBRARY="$PWD/build/worker/libhvd.so" \
    exec build/launcher/horovodrun -np 4 -H localhost:4 /usr/bin/python3 \
    examples/pytorch_train.py --steps 20 --checkpoint build/pytorch_checkpoint.pt
