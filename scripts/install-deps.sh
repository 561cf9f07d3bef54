#!/bin/sh
# Installs the Debian 12 packages the build and the tests need, if missing;
# with --torch also Debian's PyTorch and torchvision; with --horovod those
# and real Horovod 0.28.1 (scripts/install-horovod.sh); with --tensorflow
# TensorFlow from PyPI in its own venv (scripts/install-tensorflow.sh).
set -eu
cd "$(dirname "$0")/.."

# libncurses-dev: terminfo for horovodrun's status block; tmux: the tests
# drive a real terminal with it, and draw real tqdm bars (python3-tqdm).
# Open MPI: libhvd's MPI backend and its tests (and the benchmarks' peer).
# Slurm and munge: the tests start their own two-node cluster (tests/slurm);
# without a slurm.conf in /etc/slurm the packages' services stay stopped.
horovod=0
tensorflow=0
PKGS="gcc meson ninja-build pkg-config libuv1-dev libssh2-1-dev libssl-dev
libcriterion-dev libmicrohttpd-dev libyaml-dev libncurses-dev tmux python3-tqdm python3 procps clang-format openssh-server openssh-client
iproute2 util-linux
openmpi-bin libopenmpi-dev slurmctld slurmd slurm-client munge"
for opt in "$@"; do
    case "$opt" in
    # The benchmarks need nothing more now (kept for old commands).
    --bench) ;;
    # For scripts/fuzz.sh: clang, its libFuzzer, ASan and UBSan runtimes
    # (libclang-rt-14-dev, only recommended by clang-14), and
    # llvm-symbolizer (llvm-14) for readable stack traces in reports.
    --fuzz) PKGS="$PKGS clang-14 libclang-rt-14-dev llvm-14" ;;
    # Debian's PyTorch and torchvision, for horovod.torch's tests and the
    # PyTorch example (both for /usr/bin/python3).
    # python3-packaging: horovod.common.util's version comparison (pip
    # install . brings it from PyPI).
    --torch)
        PKGS="$PKGS python3-torch python3-torchvision python3-packaging"
        ;;
    # Also real Horovod, for the tests of ranks that link it
    # (tests/horovod): what building Horovod from its sdist needs.
    --horovod)
        horovod=1
        PKGS="$PKGS python3-torch python3-torchvision python3-packaging
libtorch-dev pybind11-dev python3-venv python3-dev python3-pip g++ cmake"
        ;;
    # TensorFlow (tensorflow-cpu from PyPI), for horovod.tensorflow.
    --tensorflow)
        tensorflow=1
        PKGS="$PKGS python3-venv python3-pip"
        ;;
    *)
        echo "usage: $0 [--bench] [--fuzz] [--torch] [--horovod]" \
            "[--tensorflow]" >&2
        exit 2
        ;;
    esac
done

missing=""
for p in $PKGS; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done
if [ -n "$missing" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO=sudo
    fi
    echo "installing:$missing"
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
        --no-install-recommends $missing
fi
if [ "$horovod" = 1 ]; then
    ./scripts/install-horovod.sh
fi
if [ "$tensorflow" = 1 ]; then
    ./scripts/install-tensorflow.sh
fi
