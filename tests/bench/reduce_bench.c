/* Micro-benchmark of the reduce kernels: float32 sum, float16 widen/narrow. */

/*
 * Built as build/tests/bench/reduce_bench ("meson test -C build --benchmark
 * reduce" runs it on both paths). To compare with an older reduce.c,
 * compile it by hand against that copy, for example from the repository
 * root:
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iworker -Iworker/include -I. \
 *       tests/bench/reduce_bench.c worker/kernels/reduce.c \
 *       worker/kernels/reduce_f16c.c \
 *       -o /tmp/reduce_bench && /tmp/reduce_bench
 *
 * Every figure is in GB/s of float32 data, that is n * 4 bytes per call
 * for n elements, whatever the call reads and writes, so that the rows of
 * one table compare directly. Each is the best of several timed rounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/kernels/reduce.h"

/* Present only in builds that have the F16C path; weak so that the
 * benchmark links against older kernels too. */
__attribute__((weak)) void hvd__reduce_force_portable(int on);

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum kind { SUM, WIDEN, NARROW };

/* Times one call of kind on n elements; returns GB/s of float32 data. */
static double measure(enum kind k, float *acc, float *src, uint16_t *half,
                      size_t n)
{
    double best = 1e30;
    /* About 256 MiB of float32 data per round, at least one call. */
    size_t reps = ((size_t)256 << 20) / (n * 4);

    if (reps == 0)
        reps = 1;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        for (size_t r = 0; r < reps; r++) {
            switch (k) {
            case SUM:
                hvd__reduce(acc, src, n, HVD_FLOAT32, HVD_SUM);
                break;
            case WIDEN:
                hvd__widen(acc, half, n, HVD_FLOAT16);
                break;
            case NARROW:
                hvd__finish(half, src, n, HVD_FLOAT16, HVD_SUM, 1);
                break;
            }
        }
        double t = (now() - t0) / (double)reps;
        if (t < best)
            best = t;
    }
    return (double)(n * 4) / best / 1e9;
}

int main(int argc, char **argv)
{
    size_t max = (size_t)64 << 20;
    float *acc = malloc(max), *src = malloc(max);
    uint16_t *half = malloc(max / 2);
    const char *label = argc > 1 ? argv[1] : "kernels";

    if (acc == NULL || src == NULL || half == NULL)
        return 1;
    if (argc > 2 && strcmp(argv[2], "portable") == 0) {
        if (hvd__reduce_force_portable == NULL) {
            fprintf(stderr, "this build has one path only\n");
            return 1;
        }
        hvd__reduce_force_portable(1);
    }
    /* Small values, so that repeated sums stay finite and normal. */
    srand(1);
    for (size_t i = 0; i < max / 4; i++) {
        src[i] = (float)(rand() % 2001 - 1000) * 1e-6f;
        acc[i] = src[i];
    }
    hvd__finish(half, src, max / 4, HVD_FLOAT16, HVD_SUM, 1);
    printf("%s: GB/s of float32 data (n * 4 bytes per call)\n", label);
    printf("%8s %10s %10s %10s\n", "MiB", "f32 sum", "f16 widen", "f16 narrow");
    for (size_t bytes = (size_t)1 << 20; bytes <= max; bytes *= 2) {
        size_t n = bytes / 4;
        double s = measure(SUM, acc, src, half, n);
        double w = measure(WIDEN, acc, src, half, n);
        double r = measure(NARROW, acc, src, half, n);
        printf("%8zu %10.2f %10.2f %10.2f\n", bytes >> 20, s, w, r);
    }
    free(acc);
    free(src);
    free(half);
    return 0;
}
