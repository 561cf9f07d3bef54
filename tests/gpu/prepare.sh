#!/bin/sh
# Builds build-gpu for tests/gpu/run.sh, on a machine without a GPU.
#
# Usage, from anywhere: tests/gpu/prepare.sh [BUILD_DIR]   (default build-gpu)
#
# The GPU machine that run.sh is for is bare: no network, no package
# installs, a driver and an unknown set of libraries. So everything run.sh
# needs is built here and carried there in one ignored directory:
#
#   build-gpu/          Meson build with CUDA and NCCL (-Dtests=enabled):
#                       horovodrun, hvd-agent, libhvd, gpucheck, train_cuda,
#                       hvd_bench
#   build-gpu/nonccl/   the same programs with CUDA but without NCCL
#                       (device buffers staged through host memory), for a
#                       machine where no libnccl.so.2 can be found
#   build-gpu/lib/      the shared libraries those programs need that are
#                       neither part of the C and C++ runtime, which every
#                       Linux has, nor of the NVIDIA driver, which the GPU
#                       machine has: libuv, libssh2, libcrypto, libz,
#                       libcudart, ...
#   build-gpu/lib/NOT-CARRIED   the libraries left out for their size, one
#                       "name bytes" per line; run.sh looks for them there
#
# What fits: the carried tree is limited to 64 MiB. With CUDA 13.0 the
# libraries the programs link are, uncompressed (xz -9 barely helps: the
# GPU code in them is compressed already):
#
#   libnccl.so.2       208 MiB (178 MiB with xz -9)   libhvd, all programs
#   libcublasLt.so.13  517 MiB                        train_cuda (via cuBLAS)
#   libcublas.so.13     52 MiB  (45 MiB with xz -9)   train_cuda
#   libcudart.so.13    0.7 MiB                        all programs
#
# and no static cuBLAS or NCCL comes with this toolkit (no libcublas_static.a,
# no libnccl_static.a), so train_cuda cannot be linked without them either.
# Decision: carry every library of at most 16 MiB (about 6 MiB in all, next
# to about 25 MiB of build trees), and let run.sh find NCCL and cuBLAS on
# the GPU machine: its image ships the CUDA toolkit and PyTorch's CUDA 13
# wheels (nvidia-nccl-cu13, nvidia-cublas), whose lib folders run.sh
# searches. Where they are missing, run.sh says so and runs what it can:
# the no-NCCL build without libnccl, and train_cuda only with cuBLAS (it
# reports SKIP otherwise, naming the missing library).
#
# The script fails if build-gpu and the working tree would exceed 60 MiB.
set -eu

cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
# Libraries over this size are left for run.sh to find on the GPU machine.
MAX_LIB=$((16 * 1024 * 1024))
# The carry limit is 64 MiB; keep a margin for the files that travel anyway.
MAX_TOTAL=$((60 * 1024 * 1024))

# The programs run.sh runs, relative to a build directory.
TARGETS="launcher/horovodrun launcher/hvd-agent tests/gpu/gpucheck
examples/train_cuda tests/bench/hvd_bench"

# setup DIR OPTIONS...: configures DIR (again, if it exists) and builds
# the targets; -Dwerror=true as in CI.
setup() {
    dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson configure "$dir" "$@" -Dwerror=true >/dev/null
    else
        meson setup "$dir" "$@" -Dwerror=true
    fi
    # shellcheck disable=SC2086 # TARGETS is a list of paths
    ninja -C "$dir" $TARGETS
}

setup "$B" -Dcuda=enabled -Dnccl=enabled -Dtests=enabled
grep -q 'HVD_HAVE_NCCL 1' "$B/hvd_build.h" || {
    echo "prepare: $B was built without NCCL" >&2
    exit 1
}
setup "$B/nonccl" -Dcuda=enabled -Dnccl=disabled -Dtests=enabled

# The C and C++ runtime and the dynamic loader come with any Linux; libcuda
# and libnvidia-* come with the driver and must match its kernel module.
is_system_lib() {
    case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | \
        libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
        libstdc++.so.* | libgcc_s.so.* | libcuda.so.* | libnvidia-*)
        return 0
        ;;
    esac
    return 1
}

rm -rf "${B:?}/lib"
mkdir -p "$B/lib"
: >"$B/lib/NOT-CARRIED"
# The binaries of both builds, as the positional parameters.
set -- "$B/worker/libhvd.so" "$B/nonccl/worker/libhvd.so"
for t in $TARGETS; do
    set -- "$@" "$B/$t" "$B/nonccl/$t"
done
env -u LD_LIBRARY_PATH ldd "$@" >"$B/lib/.ldd"
if grep -q 'not found' "$B/lib/.ldd"; then
    echo "prepare: some libraries are not found here:" >&2
    grep 'not found' "$B/lib/.ldd" | sort -u >&2
    exit 1
fi
# "name path" for each library, once (the first path the loader gave).
awk '$2 == "=>" && $3 ~ /^\// && !seen[$1]++ { print $1, $3 }' \
    "$B/lib/.ldd" >"$B/lib/.needed"
while read -r name path; do
    is_system_lib "$name" && continue
    case $name in
    libhvd.so.*) continue ;; # carried with its build tree
    esac
    size=$(stat -L -c %s "$path")
    if [ "$size" -gt "$MAX_LIB" ]; then
        echo "$name $size" >>"$B/lib/NOT-CARRIED"
        printf 'prepare: not carried (%d MiB): %s\n' \
            $((size / 1048576)) "$path"
    else
        cp -L "$path" "$B/lib/$name"
        printf 'prepare: carried: %s (%d KiB)\n' "$path" $((size / 1024))
    fi
done <"$B/lib/.needed"
rm -f "$B/lib/.needed" "$B/lib/.ldd"

build_bytes=$(du -sb "$B" | cut -f1)
lib_bytes=$(du -sb "$B/lib" | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
    xargs -0 stat -L -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
total=$((build_bytes + tree_bytes))
mib() {
    awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}
echo "prepare: $B is $(mib "$build_bytes") (lib $(mib "$lib_bytes")), the" \
    "working tree $(mib "$tree_bytes"): $(mib "$total") of the 64 MiB that" \
    "may travel"
if [ "$total" -gt "$MAX_TOTAL" ]; then
    echo "prepare: over 60 MiB; remove what need not travel" >&2
    exit 1
fi
echo "prepare: done; on the GPU machine, from the repository root:" \
    "tests/gpu/run.sh $B"
