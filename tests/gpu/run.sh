#!/bin/sh
# The GPU checks (issue 7), run on a machine with a GPU from a carried build.
#
# Usage, from the repository root:   tests/gpu/run.sh [BUILD_DIR]
#
# BUILD_DIR (default build-gpu) is what tests/gpu/prepare.sh made on a
# machine without a GPU: the build with CUDA and NCCL, the same without
# NCCL in BUILD_DIR/nonccl, and the shared libraries they need in
# BUILD_DIR/lib. Nothing is built, installed or fetched here; no root and
# no network are needed. NCCL and cuBLAS are too big to carry (see
# prepare.sh), so they are looked for on this machine: the loader's cache,
# the CUDA toolkit's folders, and the lib folders of Python's CUDA wheels
# (site-packages/nvidia/...).
#
# Steps, each ending in a PASS, FAIL or SKIP line:
#   1. gpucheck -np 1: collectives on device buffers, NCCL, GPU pinning
#   2. gpucheck -np 2, HVD_FORCE_GPU_STAGING=1: two ranks on one GPU,
#      device buffers staged through host memory (NCCL refuses two ranks
#      on one GPU)
#   3. train_cuda -np 1: reaches 95 % test accuracy (the bar
#      tests/example/test_train.py sets for the C example)
#   4. train_cuda -np 2, staged: the same, and equal weights on both ranks
#   5. hvd_bench -G -np 1: allreduce of device buffers, 8 B to 256 MiB,
#      no wrong element
#   6. torchgpu.py -np 1 and 7. -np 2, staged: horovod.torch on CUDA
#      tensors (collectives, torch's current stream handed to libhvd,
#      DistributedOptimizer), with this machine's python3 and its torch
# Without libnccl.so.2 on this machine the steps use the build without
# NCCL (staged device buffers) and say so. A few minutes at most: each step
# has a time limit.
#
# Exit status: 0 when no step failed and at least one passed, 1 when a step
# failed, 77 when every step was skipped (no GPU). Set HVD_GPU_LOG_DIR to
# keep each step's output there (by default a temporary folder).
set -u

B=${1:-build-gpu}
if [ ! -x "$B/launcher/horovodrun" ]; then
    echo "run.sh: $B/launcher/horovodrun is missing: run tests/gpu/prepare.sh" \
        "on the build machine and carry $B" >&2
    exit 1
fi
B=$(cd "$B" && pwd)
LOGS=${HVD_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/hvd-gpu.XXXXXX")}
mkdir -p "$LOGS"
passed=0
failed=0
skipped=0

note() {
    echo "run.sh: $*"
}

verdict() { # WORD STEP REASON
    echo "== $1: $2${3:+: $3}"
    case $1 in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    esac
}

echo "== machine"
uname -srm
echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2)"
SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
if [ -x "$SMI" ]; then
    "$SMI" --query-gpu=index,name,driver_version,memory.total,compute_cap \
        --format=csv 2>&1
    "$SMI" 2>&1 | head -n 20
    ngpus=$("$SMI" -L 2>/dev/null | grep -c '^GPU ')
else
    note "no nvidia-smi"
    ngpus=0
fi

# find_lib NAME: prints the folder that holds library NAME here, if any.
find_lib() {
    p=$(ldconfig -p 2>/dev/null |
        awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }')
    # The cache may name a file that is gone: check.
    if [ -n "$p" ] && [ -e "$p" ]; then
        dirname "$p"
        return
    fi
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib \
        /usr/lib/x86_64-linux-gnu /usr/local/lib /usr/local/nvidia/lib64; do
        if [ -e "$d/$1" ]; then
            echo "$d"
            return
        fi
    done
    # Python's CUDA wheels (nvidia-nccl-cu13, nvidia-cublas, ...).
    sites=$(env -u LD_LIBRARY_PATH python3 -c \
        'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    for sp in $sites; do
        p=$(find "$sp/nvidia" -name "$1" 2>/dev/null | head -n 1)
        if [ -n "$p" ]; then
            dirname "$p"
            return
        fi
    done
    p=$(find /opt /usr/local /usr/lib /root -maxdepth 10 -name "$1" \
        2>/dev/null | head -n 1)
    if [ -n "$p" ]; then
        dirname "$p"
    fi
}

echo "== libraries"
libpath=$B/lib
if [ -s "$B/lib/NOT-CARRIED" ]; then
    while read -r name _; do
        d=$(find_lib "$name")
        if [ -n "$d" ]; then
            note "$name: found in $d"
            case ":$libpath:" in
            *":$d:"*) ;;
            *) libpath=$libpath:$d ;;
            esac
        else
            note "$name: not found on this machine"
        fi
    done <"$B/lib/NOT-CARRIED"
fi
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# missing BINARY: prints what the loader cannot resolve for it, if
# anything: the libraries it cannot find, else the first symbols it cannot
# (from an older NCCL or cuBLAS, say).
missing() {
    out=$(ldd -r "$1" 2>&1)
    libs=$(echo "$out" | awk '/not found/ { print $1 }' | sort -u |
        tr '\n' ' ' | sed 's/ *$//')
    if [ -n "$libs" ]; then
        echo "not found: $libs"
    else
        echo "$out" | grep 'undefined symbol' | head -n 3
    fi
}

# With NCCL when this machine has a usable libnccl.so.2, else staged.
BB=$B
mode="NCCL"
m=$(missing "$B/worker/libhvd.so")
if [ -n "$m" ]; then
    note "libhvd with NCCL cannot load here:"
    echo "$m"
    note "using $B/nonccl: device buffers staged through host memory"
    BB=$B/nonccl
    mode="staged, no NCCL"
fi
HR=$BB/launcher/horovodrun

# GPU pinning needs the agent to count the GPUs, which it does in
# /proc/driver/nvidia/gpus; where a sandbox hides that folder, its test
# hook gets nvidia-smi's count, so that ranks are still pinned.
if [ ! -d /proc/driver/nvidia/gpus ] && [ "$ngpus" -gt 0 ]; then
    note "no /proc/driver/nvidia/gpus: HVD_TEST_GPU_COUNT=$ngpus for pinning"
    export HVD_TEST_GPU_COUNT="$ngpus"
fi

# run_step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its
# output in $LOGS/NAME.log and on stdout; leaves its exit status in rc.
run_step() {
    name=$1
    secs=$2
    shift 2
    log=$LOGS/$name.log
    echo "== $name: $*"
    if command -v timeout >/dev/null; then
        timeout -k 10 "$secs" "$@" >"$log" 2>&1
    else
        "$@" >"$log" 2>&1
    fi
    rc=$?
    cat "$log"
    echo "(exit $rc)"
}

# can_run STEP BINARY: SKIP the step if BINARY cannot load here (a library
# that did not fit in the carried build and is not on this machine).
can_run() {
    m=$(missing "$2")
    if [ -n "$m" ]; then
        verdict SKIP "$1" "cannot load $(basename "$2"): $(echo "$m" |
            tr '\n' ' ' | sed 's/ *$//')"
        return 1
    fi
    return 0
}

# gpucheck_step NAME NP [ENV...]
gpucheck_step() {
    name=$1
    np=$2
    shift 2
    can_run "$name" "$BB/tests/gpu/gpucheck" || return
    run_step "$name" 180 env "$@" "$HR" -np "$np" "$BB/tests/gpu/gpucheck"
    ok=$(grep -c 'checks, 0 failures$' "$log")
    if { [ "$rc" -eq 77 ] || grep -q 'gpucheck: SKIP' "$log"; } &&
        [ "$ngpus" -eq 0 ]; then
        verdict SKIP "$name" "no CUDA device"
    elif [ "$rc" -eq 0 ] && [ "$ok" -eq "$np" ]; then
        verdict PASS "$name" "$mode"
    else
        verdict FAIL "$name" "exit $rc, $ok of $np ranks without failures"
    fi
}

# train_step NAME NP [ENV...]
train_step() {
    name=$1
    np=$2
    shift 2
    can_run "$name" "$BB/examples/train_cuda" || return
    run_step "$name" 240 env "$@" "$HR" -np "$np" "$BB/examples/train_cuda" \
        --checkpoint "$LOGS/$name.ckpt"
    acc=$(sed -n 's/.*final test accuracy: \([0-9.]*\)%.*/\1/p' "$log")
    sums=$(sed -n 's/.*weights checksum: \([0-9a-f]*\)$/\1/p' "$log")
    nsums=$(echo "$sums" | grep -c .)
    nuniq=$(echo "$sums" | sort -u | grep -c .)
    if [ "$rc" -eq 77 ] && [ "$ngpus" -eq 0 ]; then
        verdict SKIP "$name" "no CUDA device"
    elif [ "$rc" -ne 0 ] || [ -z "$acc" ]; then
        verdict FAIL "$name" "exit $rc"
    elif ! awk -v a="$acc" 'BEGIN { exit !(a >= 95.0) }'; then
        verdict FAIL "$name" "test accuracy $acc % < 95 %"
    elif [ "$nsums" -ne "$np" ] || [ "$nuniq" -ne 1 ]; then
        verdict FAIL "$name" "$nsums checksums, $nuniq different"
    else
        verdict PASS "$name" "test accuracy $acc %, $mode"
    fi
}

bench_step() {
    name=$1
    can_run "$name" "$BB/tests/bench/hvd_bench" || return
    run_step "$name" 300 "$HR" -np 1 "$BB/tests/bench/hvd_bench" -G \
        -b 8 -e 256M -f 2
    if grep -q 'cannot use a CUDA device' "$log" && [ "$ngpus" -eq 0 ]; then
        verdict SKIP "$name" "no CUDA device"
    elif [ "$rc" -eq 0 ] && grep -q 'Rows with wrong elements : 0 OK' "$log"
    then
        verdict PASS "$name" "$mode"
    else
        verdict FAIL "$name" "exit $rc"
    fi
}

# torch_step NAME NP [ENV...]: tests/gpu/torchgpu.py with the python3 on
# PATH, horovod.torch from this tree and libhvd from the build.
torch_step() {
    name=$1
    np=$2
    shift 2
    if ! python3 -c 'import torch' >/dev/null 2>&1; then
        verdict SKIP "$name" "python3 has no torch"
        return
    fi
    run_step "$name" 240 env "$@" PYTHONPATH="$PWD/worker/python" \
        HVD_LIBRARY="$BB/worker/libhvd.so" "$HR" -np "$np" python3 \
        "$PWD/tests/gpu/torchgpu.py"
    ok=$(grep -c 'torchgpu: rank [0-9]*: ok ' "$log")
    if grep -q 'torchgpu: SKIP' "$log" && [ "$ngpus" -eq 0 ]; then
        verdict SKIP "$name" "no CUDA device"
    elif [ "$rc" -eq 0 ] && [ "$ok" -eq "$np" ]; then
        verdict PASS "$name" "$mode"
    else
        verdict FAIL "$name" "exit $rc, $ok of $np ranks passed"
    fi
}

gpucheck_step gpucheck-np1 1 NCCL_DEBUG=VERSION
gpucheck_step gpucheck-np2-staged 2 HVD_FORCE_GPU_STAGING=1
train_step train_cuda-np1 1
train_step train_cuda-np2-staged 2 HVD_FORCE_GPU_STAGING=1
bench_step hvd_bench-device-np1
torch_step torchgpu-np1 1
torch_step torchgpu-np2-staged 2 HVD_FORCE_GPU_STAGING=1

echo "== logs in $LOGS"
echo "run.sh: $passed passed, $failed failed, $skipped skipped"
if [ "$failed" -gt 0 ]; then
    exit 1
fi
if [ "$passed" -eq 0 ]; then
    exit 77
fi
exit 0
