/* Steps per second for a ResNet-like gradient list (200 tensors, many
 * small, a few large) submitted asynchronously each step; run it with
 * HOROVOD_FUSION_THRESHOLD=0 and without to compare fusion off and on, and
 * with HOROVOD_CACHE_CAPACITY=0 to see the response cache's part. With
 * "tiny", all 200 tensors have 16 elements: the step is then almost all
 * negotiation. */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hvd.h"

#define NT 200

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    int tiny = argc > 2 && strcmp(argv[2], "tiny") == 0;
    size_t counts[NT], total = 0;
    float *bufs[NT];
    hvd_handle h[NT];
    char name[32];

    if (hvd_init() != 0) {
        fprintf(stderr, "fusion_bench: %s\n", hvd_last_error());
        return 1;
    }
    /* Like a ResNet's list: batch-norm scales and biases (small), and
     * convolution weights from a few thousand up to a few million. */
    for (int i = 0; i < NT; i++) {
        counts[i] =
            i % 3 != 2 ? (size_t)(64 << (i % 5)) : (size_t)4096 << (i % 10);
        if (i % 50 == 49)
            counts[i] = 2359296;
        if (tiny)
            counts[i] = 16;
        total += counts[i];
        bufs[i] = calloc(counts[i], sizeof(float));
    }
    double t0 = 0;
    for (int s = -2; s < steps; s++) {
        if (s == 0) {
            hvd_barrier();
            t0 = now();
        }
        for (int i = 0; i < NT; i++) {
            snprintf(name, sizeof(name), "grad.%d", i);
            hvd_allreduce_async(bufs[i], bufs[i], counts[i], HVD_FLOAT32,
                                HVD_AVERAGE, name, &h[i]);
        }
        for (int i = 0; i < NT; i++)
            if (hvd_wait(h[i]) != 0) {
                fprintf(stderr, "fusion_bench: %s\n", hvd_last_error());
                return 1;
            }
    }
    double dt = now() - t0;
    if (hvd_rank() == 0)
        printf("np %d, %d tensors, %.3f MiB per step: %.2f steps/s "
               "(%.2f ms per step)\n",
               hvd_size(), NT, total * 4.0 / (1 << 20), steps / dt,
               dt / steps * 1e3);
    hvd_shutdown();
    return 0;
}
