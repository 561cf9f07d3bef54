/* Shuts libhvd down and initialises it again in one process, as Horovod's
 * tests and elastic training do.
 *
 *   reinit CYCLES   each cycle: hvd_init, the same rank and size as the
 *                   first, an allreduce, a broadcast and an allgather
 *                   checked, hvd_shutdown; then it says how many
 *                   descriptors, threads and shared-memory mappings the
 *                   process held before the first hvd_init, after the
 *                   first cycle and after the last (the maps while
 *                   initialised too, to show they were there), which
 *                   test_reinit.py compares.
 *   reinit twice    calls hvd_init twice whatever the first gave, and says
 *                   how long the second took and why it failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hvd.h"
#include "proccount.h"

/* Mappings of shared memory: memfd segments and /dev/shm files. */
static int shm_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, "/dev/shm/") != NULL ||
             strstr(line, "/memfd:") != NULL;
    fclose(f);
    return n;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One cycle's collectives; 1 if every result is right. */
static int collectives(int cycle, int rank, int size)
{
    char name[32];
    float v[256];
    int ok = 1;

    for (int i = 0; i < 256; i++)
        v[i] = (float)(rank + i + cycle);
    snprintf(name, sizeof(name), "sum.%d", cycle);
    ok = hvd_allreduce(v, v, 256, HVD_FLOAT32, HVD_SUM, name) == 0;
    for (int i = 0; ok && i < 256; i++)
        ok = v[i] ==
             (float)size * (float)(i + cycle) + (float)(size * (size - 1) / 2);
    int b = rank == 0 ? cycle : -1;
    ok = ok && hvd_broadcast(&b, 1, HVD_INT32, 0, NULL) == 0 && b == cycle;
    void *all = NULL;
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    ok = ok && counts != NULL &&
         hvd_allgather(&rank, 1, HVD_INT32, &all, counts, NULL) == 0;
    for (int r = 0; ok && r < size; r++)
        ok = counts[r] == 1 && ((int *)all)[r] == r;
    free(all);
    free(counts);
    return ok;
}

static int twice(void)
{
    int rc = hvd_init();
    printf("reinit: first hvd_init: %d %s\n", rc, rc ? hvd_last_error() : "");
    if (rc == 0)
        hvd_shutdown();
    double t0 = now_s();
    rc = hvd_init();
    printf("reinit: second hvd_init: %d after %.3f s: %s\n", rc, now_s() - t0,
           rc ? hvd_last_error() : "");
    if (rc == 0)
        hvd_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "twice") == 0)
        return twice();
    int cycles = argc > 1 ? atoi(argv[1]) : 3;
    int fds = count_entries("/proc/self/fd");
    int threads = count_entries("/proc/self/task");
    int maps = shm_maps();
    int rank = -1, size = -1, ok = 1, done = 0, maps_in = -1;
    int fds_first = -1, threads_first = -1;
    double t0 = now_s();

    for (; ok && done < cycles; done++) {
        if (hvd_init() != 0) {
            printf("reinit: cycle %d: %s\n", done, hvd_last_error());
            ok = 0;
            break;
        }
        if (done == 0) {
            rank = hvd_rank();
            size = hvd_size();
        }
        if (hvd_rank() != rank || hvd_size() != size) {
            printf("reinit: cycle %d: rank %d of %d, was %d of %d\n", done,
                   hvd_rank(), hvd_size(), rank, size);
            ok = 0;
        }
        if (ok && !collectives(done, rank, size)) {
            printf("reinit: cycle %d: wrong result: %s\n", done,
                   hvd_last_error());
            ok = 0;
        }
        if (done == 0)
            maps_in = shm_maps();
        if (hvd_shutdown() != 0)
            ok = 0;
        if (done == 0) {
            fds_first = count_entries("/proc/self/fd");
            threads_first = count_entries("/proc/self/task");
        }
    }
    int fds_after = count_entries("/proc/self/fd");
    int threads_after = count_entries("/proc/self/task");
    int maps_after = shm_maps();
    printf("reinit: rank %d of %d: %d cycles in %.3f s, %s; descriptors %d "
           "-> %d -> %d, threads %d -> %d -> %d, shared-memory maps %d -> %d "
           "-> %d\n",
           rank, size, done, now_s() - t0, ok ? "ok" : "FAILED", fds, fds_first,
           fds_after, threads, threads_first, threads_after, maps, maps_in,
           maps_after);
    return ok ? 0 : 1;
}
