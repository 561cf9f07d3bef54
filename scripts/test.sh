#!/bin/sh
# Installs what is missing, builds with warnings as errors, runs all tests.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if [ -d build-test ]; then
    meson setup --reconfigure build-test -Dwerror=true -Dtests=enabled
else
    meson setup build-test -Dwerror=true -Dtests=enabled
fi
ninja -C build-test
meson test -C build-test --print-errorlogs "$@"
