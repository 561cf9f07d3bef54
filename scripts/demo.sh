#!/bin/sh
# Installs what is missing, builds, and runs the demo job: 4 ranks here.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -d build ] || meson setup build
ninja -C build
exec build/launcher/horovodrun -np 4 -H localhost:4 build/examples/train \
    --checkpoint build/checkpoint.bin
