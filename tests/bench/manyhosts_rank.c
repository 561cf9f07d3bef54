/* manyhosts_rank: the rank of tests/bench/manyhosts_bench.py. Initialises,
 * runs one allreduce of two float32 (8 B, sum), checks it, shuts down, and
 * prints one line:
 *
 *     manyhosts RANK SIZE INIT_NS ALLREDUCE_NS ok|wrong
 *
 * INIT_NS: CLOCK_REALTIME (ns since the epoch) when init returned;
 * ALLREDUCE_NS: when the allreduce completed; wrong: a wrong sum; ERROR:
 * why init or the allreduce failed. Every rank prints, so the
 * script takes the latest over all of them. Built twice from this file:
 * on libhvd (hvd_init, hvd_allreduce, hvd_shutdown) and, with
 * MANYHOSTS_MPI, on MPI (MPI_Init, MPI_Allreduce, MPI_Finalize), so that
 * both launchers run the same work. */
#include <stdio.h>
#include <time.h>

#ifdef MANYHOSTS_MPI
#include <mpi.h>
#else
#include "hvd.h"
#endif

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    float buf[2], out[2];
    int rank = 0, size = 1, ok;
    long long t_init, t_ar;
#ifdef MANYHOSTS_MPI
    ok = MPI_Init(&argc, &argv) == MPI_SUCCESS;
    t_init = now_ns();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#else
    (void)argc;
    (void)argv;
    ok = hvd_init() == 0;
    t_init = now_ns();
    if (ok) {
        rank = hvd_rank();
        size = hvd_size();
    }
#endif
    buf[0] = (float)rank;
    buf[1] = 1.0f;
#ifdef MANYHOSTS_MPI
    ok = ok && MPI_Allreduce(buf, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) ==
                   MPI_SUCCESS;
#else
    ok = ok && hvd_allreduce(buf, out, 2, HVD_FLOAT32, HVD_SUM, NULL) == 0;
#endif
    t_ar = now_ns();
    /* Exact in float32 up to 2^24: far beyond any job here. */
    const char *why = ok ? NULL : "failed";
#ifndef MANYHOSTS_MPI
    if (!ok)
        why = hvd_last_error();
#endif
    ok = ok && out[0] == (float)size * (float)(size - 1) / 2 &&
         out[1] == (float)size;
    printf("manyhosts %d %d %lld %lld %s\n", rank, size, t_init, t_ar,
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
