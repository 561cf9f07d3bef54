#!/bin/sh
# Installs what is missing, builds with warnings as errors and runs every
# test; then the unit and integration suites again under AddressSanitizer
# and UndefinedBehaviorSanitizer, and the runtime's multi-threaded tests
# under ThreadSanitizer, and the protocol fuzzers for a bounded time
# (HVD_FUZZ_SECONDS per target, default 20; scripts/fuzz.sh 600 for a long
# run). Arguments go to the first `meson test`. HVD_TEST_QUICK=1 skips the
# sanitizer and fuzzing runs.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --horovod --tensorflow

setup() {
    dir=$1
    shift
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "$@"
    else
        meson setup "$dir" "$@"
    fi
    ninja -C "$dir"
}

setup build-test -Dwerror=true -Dtests=enabled
meson test -C build-test --print-errorlogs "$@"
[ "${HVD_TEST_QUICK:-0}" = 1 ] && exit 0

# Any report fails its test: leaks, undefined behaviour, data races.
echo "== AddressSanitizer and UndefinedBehaviorSanitizer"
setup build-asan -Dwerror=true -Dtests=enabled \
    -Db_sanitize=address,undefined -Db_lundef=false
ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --suite unit \
    --suite integration --no-suite slow

echo "== ThreadSanitizer"
setup build-tsan -Dwerror=true -Dtests=enabled -Db_sanitize=thread \
    -Db_lundef=false
TSAN_OPTIONS=halt_on_error=1 HVD_TEST_TSAN=1 \
    meson test -C build-tsan --print-errorlogs runtime transport device \
    reinit gloo_store elastic_join elastic_c

echo "== Fuzzing (libFuzzer, ASan+UBSan)"
./scripts/fuzz.sh "${HVD_FUZZ_SECONDS:-20}"
