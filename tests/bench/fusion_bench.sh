#!/bin/sh
# Steps per second of a 200-tensor step: fusion off/on, response cache
# off/on, for the ResNet-like list and for 200 tiny tensors (negotiation
# dominates), -np 2 and 4; the configurations alternate, 3 runs each.
set -eu
HR=${HVD_HOROVODRUN:-build/launcher/horovodrun}
FB=${HVD_FUSION_BENCH:-build/tests/bench/fusion_bench}
for list in resnet tiny; do
    steps=10
    [ "$list" = tiny ] && steps=200
    for np in 2 4; do
        for rep in 1 2 3; do
            for fusion in 0 134217728; do
                for cache in 0 1024; do
                    printf '%-6s fusion %9s cache %4s: ' "$list" "$fusion" \
                        "$cache"
                    HOROVOD_FUSION_THRESHOLD=$fusion \
                        HOROVOD_CACHE_CAPACITY=$cache \
                        "$HR" -np "$np" "$FB" "$steps" "$list" |
                        sed 's/^\[0,0\]<stdout>://'
                done
            done
        done
    done
done
