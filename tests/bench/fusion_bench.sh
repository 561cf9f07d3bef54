#!/bin/sh
# Steps per second of a 200-tensor step with fusion off and on, alternated.
set -eu
HR=${HVD_HOROVODRUN:-build/launcher/horovodrun}
FB=${HVD_FUSION_BENCH:-build/tests/bench/fusion_bench}
for np in 2 4; do
    for rep in 1 2 3; do
        for t in 0 134217728; do
            printf 'fusion threshold %9s: ' "$t"
            HOROVOD_FUSION_THRESHOLD=$t "$HR" -np "$np" "$FB" 10 |
                sed 's/^\[0,0\]<stdout>://'
        done
    done
done
