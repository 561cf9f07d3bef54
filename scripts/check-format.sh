#!/bin/sh
# Fails if any C or CUDA source or header differs from .clang-format's style.
set -eu
cd "$(dirname "$0")/.."
find common launcher worker examples tests \( -name '*.[ch]' -o -name '*.cu' \) \
    -print0 | xargs -0 clang-format --dry-run -Werror
