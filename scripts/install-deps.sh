#!/bin/sh
# Installs the Debian 12 packages the build and the tests need, if missing.
set -eu

PKGS="gcc meson ninja-build pkg-config libuv1-dev libssh2-1-dev libssl-dev
libcriterion-dev python3 procps clang-format openssh-server openssh-client"
# Extra packages for the benchmarks (Open MPI is the yardstick).
if [ "${1:-}" = "--bench" ]; then
    PKGS="$PKGS openmpi-bin libopenmpi-dev"
fi

missing=""
for p in $PKGS; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi
echo "installing:$missing"
$SUDO apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
