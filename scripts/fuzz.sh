#!/bin/sh
# Builds the libFuzzer targets in tests/fuzz with clang and runs each one.
#
# usage: scripts/fuzz.sh [SECONDS]      fuzz each target SECONDS (default 30,
#                                      or $FUZZ_SECONDS); 0 only replays
#        scripts/fuzz.sh --seeds        rewrite tests/fuzz/corpus from the
#                                      encoders (tests/fuzz/gen_corpus.c)
#
# First every committed input (tests/fuzz/corpus and tests/fuzz/regressions)
# is replayed once, then each target fuzzes a copy of them, so the repo's
# corpus never grows by itself. Any finding (crash, sanitizer report, leak,
# broken invariant, timeout) makes the script exit 1 and print the path of
# the input that caused it. For a longer hunt: scripts/fuzz.sh 600.
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CC (default
# clang-14), FUZZ_TARGETS (default all), FUZZ_NO_INSTALL=1 to skip
# scripts/install-deps.sh --fuzz.
set -eu
cd "$(dirname "$0")/.."

seeds=0
secs=${FUZZ_SECONDS:-30}
case "${1:-}" in
--seeds) seeds=1 ;;
'') ;;
*[!0-9]*)
    echo "usage: $0 [SECONDS | --seeds]" >&2
    exit 2
    ;;
*) secs=$1 ;;
esac

build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${FUZZ_CC:-clang-14}
all="frame proto rdvproto hostspec linesplit mpiwire shellsplit sshconfig"
targets=${FUZZ_TARGETS:-$all}

if [ "${FUZZ_NO_INSTALL:-}" != 1 ]; then
    ./scripts/install-deps.sh --fuzz
fi

# The common/ and launcher/ files each target links, and the longest input worth trying.
sources() {
    case "$1" in
    frame) echo common/frame.c common/wire.c ;;
    proto)
        echo launcher/lib/proto.c launcher/lib/relayproto.c common/wire.c \
            common/frame.c launcher/lib/strvec.c common/auth.c
        ;;
    rdvproto)
        echo common/rdvproto.c common/rdvlayout.c common/auth.c common/wire.c \
            common/frame.c
        ;;
    hostspec) echo launcher/lib/hostspec.c launcher/lib/errmsg.c ;;
    linesplit) echo launcher/lib/linesplit.c ;;
    mpiwire) echo launcher/lib/mpiwire.c ;;
    shellsplit)
        echo launcher/horovodrun/mpicmd.c launcher/lib/strvec.c launcher/lib/plan.c \
            launcher/lib/hostspec.c launcher/lib/errmsg.c
        ;;
    sshconfig) echo launcher/lib/sshconfig.c launcher/lib/errmsg.c ;;
    gen_corpus)
        echo launcher/lib/proto.c launcher/lib/relayproto.c common/rdvproto.c \
            common/rdvlayout.c common/auth.c common/wire.c common/frame.c \
            launcher/lib/strvec.c launcher/lib/mpiwire.c
        ;;
    *)
        echo "fuzz.sh: unknown target '$1'" >&2
        return 1
        ;;
    esac
}
max_len() {
    case "$1" in
    rdvproto) echo 2048 ;;
    *) echo 4096 ;;
    esac
}

cflags="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra
-Werror -I."
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"

mkdir -p "$build"
for t in $targets; do
    # shellcheck disable=SC2046,SC2086
    "$cc" $cflags -fsanitize=fuzzer $san -o "$build/fuzz_$t" \
        "tests/fuzz/fuzz_$t.c" $(sources "$t") -lcrypto
done

if [ "$seeds" = 1 ]; then
    # shellcheck disable=SC2046,SC2086
    "$cc" $cflags $san -o "$build/gen_corpus" tests/fuzz/gen_corpus.c \
        $(sources gen_corpus) -lcrypto
    rm -rf tests/fuzz/corpus
    mkdir -p tests/fuzz/corpus
    "$build/gen_corpus" tests/fuzz/corpus
    echo "fuzz.sh: wrote $(find tests/fuzz/corpus -type f | wc -l) seeds"
    exit 0
fi

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
if [ -x "$symbolizer" ]; then
    ASAN_SYMBOLIZER_PATH=$symbolizer
    export ASAN_SYMBOLIZER_PATH
fi
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export UBSAN_OPTIONS
# A single allocation over 64 MiB from inputs of a few KiB is a finding.
opts="-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64"

failed=""
for t in $targets; do
    bin="$build/fuzz_$t"
    log="$build/fuzz_$t.log"
    inputs=$(find "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t" \
        -type f 2>/dev/null | sort)
    # Replay: fast and deterministic, every committed input once, whole.
    # shellcheck disable=SC2086
    if [ -n "$inputs" ] && ! "$bin" $opts $inputs >"$log" 2>&1; then
        cat "$log"
        # A leak is reported at exit, after every input: run each alone.
        for f in $inputs; do
            if ! "$bin" $opts "$f" >/dev/null 2>&1; then
                echo "fuzz.sh: $t: replay failed on $f" >&2
                echo "fuzz.sh: reproduce with: $bin $f" >&2
            fi
        done
        failed="$failed $t"
        continue
    fi
    echo "fuzz.sh: $t: replayed $(echo "$inputs" | grep -c .) inputs"
    [ "$secs" -gt 0 ] || continue

    work="$build/corpus/$t"
    art="$build/artifacts/$t"
    rm -rf "$work" "$art"
    mkdir -p "$work" "$art"
    for f in $inputs; do
        cp "$f" "$work/$(echo "$f" | tr / _)"
    done
    # shellcheck disable=SC2086
    if "$bin" $opts -max_total_time="$secs" -max_len="$(max_len "$t")" \
        -print_final_stats=1 -artifact_prefix="$art/" "$work" \
        >"$log" 2>&1; then
        echo "fuzz.sh: $t: $(grep 'DONE' "$log" | tr -s ' \t' ' ')"
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' \
            "$log" | sed "s/^/fuzz.sh: $t: /"
    else
        tail -n 60 "$log"
        for a in "$art"/*; do
            [ -e "$a" ] || continue
            echo "fuzz.sh: $t: finding saved as $a" >&2
            echo "fuzz.sh: reproduce with: $bin $a" >&2
        done
        failed="$failed $t"
    fi
done

if [ -n "$failed" ]; then
    echo "fuzz.sh: FAILED:$failed" >&2
    exit 1
fi
echo "fuzz.sh: no findings"
