/* A tiny rank for jobs of many ranks: a few allreduces, a broadcast and an
 * allgather, checked; prints one line and exits 0 when all were right.
 * An argument MS makes it wait that long before leaving (all ranks still
 * alive), for measurements. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hvd.h"

int main(int argc, char **argv)
{
    float buf[1024];
    int ok = hvd_init() == 0, rank = hvd_rank(), size = hvd_size();
    for (int round = 0; ok && round < 3; round++) {
        for (int i = 0; i < 1024; i++)
            buf[i] = (float)(rank + i + round);
        ok = hvd_allreduce(buf, buf, 1024, HVD_FLOAT32, HVD_SUM, NULL) == 0;
        for (int i = 0; ok && i < 1024; i++)
            ok = buf[i] == (float)size * (float)(i + round) +
                               (float)size * (float)(size - 1) / 2;
    }
    int v = rank == 0 ? 42 : -1;
    ok = ok && hvd_broadcast(&v, 1, HVD_INT32, 0, NULL) == 0 && v == 42;
    void *all = NULL;
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    ok = ok && hvd_allgather(&rank, 1, HVD_INT32, &all, counts, NULL) == 0;
    for (int r = 0; ok && r < size; r++)
        ok = counts[r] == 1 && ((int *)all)[r] == r;
    free(all);
    free(counts);
    if (argc > 1)
        usleep((useconds_t)atoi(argv[1]) * 1000);
    printf("tiny: rank %d of %d: %s\n", rank, size,
           ok ? "ok" : hvd_last_error());
    hvd_shutdown();
    return ok ? 0 : 1;
}
