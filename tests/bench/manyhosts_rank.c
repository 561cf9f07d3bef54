/* manyhosts_rank: the rank of tests/bench/manyhosts_bench.py. Initialises,
 * runs one allreduce of two float32 (8 B, sum), then WARMUP more and ITERS
 * timed ones of the same buffers (ITERS: argv[1], default 200; 0: none of
 * them), checks the first sum and the last, shuts down, and prints:
 *
 *     manyhosts RANK SIZE INIT_NS ALLREDUCE_NS US_PER_OP ok|wrong
 *
 * INIT_NS: CLOCK_REALTIME (ns since the epoch) when init returned;
 * ALLREDUCE_NS: when the first allreduce completed; US_PER_OP: the mean
 * microseconds of one of the ITERS timed allreduces (CLOCK_MONOTONIC
 * around the loop; 0 without); wrong: a wrong sum; ERROR: why init or an
 * allreduce failed. Every rank prints, so the script takes the latest (the
 * largest) over all of them. Built twice from this file: on libhvd (hvd_init,
 * hvd_allreduce, hvd_shutdown) and, with MANYHOSTS_MPI, on MPI (MPI_Init,
 * MPI_Allreduce, MPI_Finalize), so that both launchers run the same work;
 * tests/bench/manyhosts_horovod.py does it on real Horovod. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef MANYHOSTS_MPI
#include <mpi.h>
#else
#include "hvd.h"
#endif

#define WARMUP 20

static long long now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* out = the sum of every rank's in, two float32; 1 when it succeeded. */
static int allreduce(const float *in, float *out)
{
#ifdef MANYHOSTS_MPI
    return MPI_Allreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) ==
           MPI_SUCCESS;
#else
    return hvd_allreduce(in, out, 2, HVD_FLOAT32, HVD_SUM, NULL) == 0;
#endif
}

/* Exact in float32 up to 2^24: far beyond any job here. */
static int sum_right(const float *out, int size)
{
    return out[0] == (float)size * (float)(size - 1) / 2 &&
           out[1] == (float)size;
}

int main(int argc, char **argv)
{
    float buf[2], out[2] = {0, 0};
    int rank = 0, size = 1, ok, right, iters, i;
    long long t_init, t_ar, t0 = 0, t1 = 0;
#ifdef MANYHOSTS_MPI
    ok = MPI_Init(&argc, &argv) == MPI_SUCCESS;
    t_init = now_ns(CLOCK_REALTIME);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#else
    ok = hvd_init() == 0;
    t_init = now_ns(CLOCK_REALTIME);
    if (ok) {
        rank = hvd_rank();
        size = hvd_size();
    }
#endif
    iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 0)
        iters = 0;
    buf[0] = (float)rank;
    buf[1] = 1.0f;
    ok = ok && allreduce(buf, out);
    t_ar = now_ns(CLOCK_REALTIME);
    right = sum_right(out, size);
    for (i = 0; ok && iters && i < WARMUP + iters; i++) {
        if (i == WARMUP)
            t0 = now_ns(CLOCK_MONOTONIC);
        ok = allreduce(buf, out);
    }
    t1 = now_ns(CLOCK_MONOTONIC);
    const char *why = ok ? NULL : "failed";
#ifndef MANYHOSTS_MPI
    if (!ok)
        why = hvd_last_error();
#endif
    ok = ok && right && sum_right(out, size);
    printf("manyhosts %d %d %lld %lld %.2f %s\n", rank, size, t_init, t_ar,
           ok && iters ? (double)(t1 - t0) / 1e3 / iters : 0.0,
           ok    ? "ok"
           : why ? why
                 : "wrong");
    fflush(stdout);
#ifdef MANYHOSTS_MPI
    MPI_Finalize();
#else
    hvd_shutdown();
#endif
    return ok ? 0 : 1;
}
