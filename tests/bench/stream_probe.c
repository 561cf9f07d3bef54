/* Memory bandwidth probe: a STREAM-like copy, alone and N processes at once. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bench_common.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * Why this exists: allreduce_bench.py states libhvd's allreduce bandwidth
 * as a fraction of what the memory of this host can move, and the ranks of
 * one host share that memory. So the probe measures one process copying
 * alone and N processes copying at once (N = the number of ranks), each
 * with arrays far larger than the last-level cache so that every byte goes
 * to DRAM.
 *
 * Two kernels: STREAM's copy, a[i] = b[i] over doubles (meson compiles
 * this file so that the loop is not turned into a memcpy call), and glibc's
 * memcpy, which for buffers this large uses non-temporal stores and so
 * avoids reading the destination before writing it. Bandwidth counts the
 * bytes read plus the bytes written, as STREAM does: 2 x bytes copied /
 * time. GB/s is 1e9 bytes per second, as in the nccl-tests tables.
 */

#define DEFAULT_ARRAY ((size_t)128 << 20) /* two per worker: 256 MiB */
#define DEFAULT_REPS 10
#define MAX_WORKERS 256
#define MAX_REPS 1000
#define ALIGN 4096

enum kernel { K_COPY, K_MEMCPY, K_NKERNELS };
static const char *const kernel_names[K_NKERNELS] = {"copy", "memcpy"};

/* One run of N workers: what they share with the parent through mmap. */
struct shared {
    pthread_barrier_t barrier;
    int failed;
    /* [kernel][rep][worker][0 start, 1 end], CLOCK_MONOTONIC seconds */
    double t[];
};

static size_t tindex(int k, int rep, int w, int reps, int nworkers, int end)
{
    return (((size_t)k * reps + rep) * nworkers + w) * 2 + end;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * The STREAM copy kernel. noinline keeps it a loop of its own that the
 * timing calls cannot be moved across.
 */
__attribute__((noinline)) static void
copy_kernel(double *restrict a, const double *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i];
}

static void *alloc_array(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, bytes) != 0)
        return NULL;
    return p;
}

/* The body of one worker process; returns its exit status. */
static int worker(struct shared *sh, int w, int nworkers, size_t bytes,
                  int reps)
{
    size_t n = bytes / sizeof(double);
    int status = 1;
    double *a = alloc_array(bytes);
    double *b = alloc_array(bytes);
    if (a == NULL || b == NULL) {
        fprintf(stderr,
                "stream_probe: worker %d: cannot allocate 2 x %zu "
                "bytes\n",
                w, bytes);
        sh->failed = 1;
    }
    /* First touch by the worker itself, as STREAM initialises its arrays. */
    for (size_t i = 0; a != NULL && b != NULL && i < n; i++) {
        a[i] = 0.0;
        b[i] = (double)(i & 1023) + w;
    }
    /* Every worker reaches every barrier, even one that failed, so that
     * the others are not left waiting. */
    for (int k = 0; k < K_NKERNELS; k++) {
        for (int r = 0; r < reps; r++) {
            pthread_barrier_wait(&sh->barrier);
            if (sh->failed)
                continue;
            double t0 = now();
            if (k == K_COPY)
                copy_kernel(a, b, n);
            else
                memcpy(a, b, bytes);
            double t1 = now();
            sh->t[tindex(k, r, w, reps, nworkers, 0)] = t0;
            sh->t[tindex(k, r, w, reps, nworkers, 1)] = t1;
        }
    }
    if (sh->failed)
        goto out;
    /* Reading the result both checks it and keeps the copies alive. */
    for (size_t i = 0; i < n; i += 4096 / sizeof(double)) {
        if (a[i] != b[i]) {
            fprintf(stderr, "stream_probe: worker %d: wrong copy at %zu\n", w,
                    i);
            goto out;
        }
    }
    status = 0;
out:
    free(a);
    free(b);
    return status;
}

/*
 * Runs nworkers processes at once, each copying its own arrays, started
 * together by a barrier before each repetition. A repetition's aggregate
 * bandwidth is nworkers x 2 x bytes over the time from the first start to
 * the last end; best[k] and avg[k] are the best and mean over repetitions.
 */
static int run_workers(int nworkers, size_t bytes, int reps,
                       double best[K_NKERNELS], double avg[K_NKERNELS])
{
    size_t tn = (size_t)K_NKERNELS * reps * nworkers * 2;
    size_t shsize = sizeof(struct shared) + tn * sizeof(double);
    int status = -1, started = 0;
    pid_t pids[MAX_WORKERS];
    pthread_barrierattr_t attr;
    int attr_ok = 0, barrier_ok = 0;

    struct shared *sh = mmap(NULL, shsize, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("stream_probe: mmap");
        return -1;
    }
    memset(sh, 0, shsize);
    if (pthread_barrierattr_init(&attr) != 0)
        goto out;
    attr_ok = 1;
    if (pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0 ||
        pthread_barrier_init(&sh->barrier, &attr, (unsigned)nworkers) != 0) {
        fprintf(stderr, "stream_probe: cannot make a shared barrier\n");
        goto out;
    }
    barrier_ok = 1;

    for (; started < nworkers; started++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("stream_probe: fork");
            break;
        }
        if (pid == 0)
            _exit(worker(sh, started, nworkers, bytes, reps));
        pids[started] = pid;
    }
    if (started < nworkers) {
        /* The started workers would wait at the barrier forever. */
        for (int i = 0; i < started; i++)
            kill(pids[i], SIGKILL);
    }
    int bad = started < nworkers;
    for (int i = 0; i < started; i++) {
        int ws = 0;
        pid_t got;
        while ((got = waitpid(pids[i], &ws, 0)) < 0 && errno == EINTR)
            ;
        if (got < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            bad = 1;
    }
    if (bad || sh->failed)
        goto out;

    for (int k = 0; k < K_NKERNELS; k++) {
        double sum = 0.0;
        best[k] = 0.0;
        for (int r = 0; r < reps; r++) {
            double first = sh->t[tindex(k, r, 0, reps, nworkers, 0)];
            double last = sh->t[tindex(k, r, 0, reps, nworkers, 1)];
            for (int w = 1; w < nworkers; w++) {
                double s = sh->t[tindex(k, r, w, reps, nworkers, 0)];
                double e = sh->t[tindex(k, r, w, reps, nworkers, 1)];
                first = s < first ? s : first;
                last = e > last ? e : last;
            }
            double bw = last > first
                            ? 2.0 * (double)bytes * nworkers / (last - first)
                            : 0.0;
            sum += bw;
            best[k] = bw > best[k] ? bw : best[k];
        }
        avg[k] = sum / reps;
    }
    status = 0;
out:
    if (barrier_ok)
        pthread_barrier_destroy(&sh->barrier);
    if (attr_ok)
        pthread_barrierattr_destroy(&attr);
    munmap(sh, shsize);
    return status;
}

/* "1,2,4" into counts[]; returns how many, or -1. */
static int parse_list(const char *s, int *counts, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 1 || v > MAX_WORKERS || n == max)
            return -1;
        counts[n++] = (int)v;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        s = end;
    }
    return n > 0 ? n : -1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: stream_probe [-s BYTES] [-r REPS] [-n N[,N...]]\n"
            "  -s BYTES  size of each of the two arrays per worker "
            "(default 128M;\n"
            "            K, M, G suffixes); keep it far above the "
            "last-level cache\n"
            "  -r REPS   repetitions per kernel; the best is reported "
            "(default %d)\n"
            "  -n LIST   worker counts, e.g. 1,2,4: each runs that many "
            "processes\n"
            "            copying at once and reports their aggregate "
            "(default 1)\n"
            "Prints one row per kernel and worker count: GB/s (1e9 B/s) "
            "counting bytes\nread and written, as STREAM does: 2 x bytes "
            "copied / time.\n",
            DEFAULT_REPS);
}

int main(int argc, char **argv)
{
    size_t bytes = DEFAULT_ARRAY;
    int reps = DEFAULT_REPS;
    int counts[32] = {1};
    int ncounts = 1;
    int c;

    while ((c = getopt(argc, argv, "s:r:n:h")) != -1) {
        switch (c) {
        case 's':
            if (bench_parse_bytes(optarg, &bytes) != 0 || bytes < ALIGN) {
                fprintf(stderr, "stream_probe: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            reps = atoi(optarg);
            if (reps < 1 || reps > MAX_REPS) {
                fprintf(stderr, "stream_probe: reps must be 1..%d\n", MAX_REPS);
                return 2;
            }
            break;
        case 'n':
            ncounts = parse_list(optarg, counts, 32);
            if (ncounts < 0) {
                fprintf(stderr,
                        "stream_probe: bad worker list '%s' (1..%d, "
                        "comma-separated)\n",
                        optarg, MAX_WORKERS);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    bytes -= bytes % ALIGN;

    printf("# stream_probe: copy a[i] = b[i] (double) and memcpy, 2 arrays "
           "of %zu MiB per worker, best of %d repetitions\n",
           bytes >> 20, reps);
    printf("# GB/s = 1e9 B/s of bytes read + written (STREAM): 2 x bytes "
           "copied / time\n");
    printf("# N workers = N processes copying at once, started together; "
           "aggregate = N x 2 x bytes / (last end - first start)\n");
    printf("# %8s  %7s  %12s  %12s  %12s\n", "kernel", "workers", "best(GB/s)",
           "avg(GB/s)", "per-worker");
    fflush(stdout);
    for (int i = 0; i < ncounts; i++) {
        double best[K_NKERNELS], avg[K_NKERNELS];
        if (run_workers(counts[i], bytes, reps, best, avg) != 0) {
            fprintf(stderr, "stream_probe: the run with %d workers failed\n",
                    counts[i]);
            return 1;
        }
        for (int k = 0; k < K_NKERNELS; k++)
            printf("%10s  %7d  %12.3f  %12.3f  %12.3f\n", kernel_names[k],
                   counts[i], best[k] / 1e9, avg[k] / 1e9,
                   best[k] / 1e9 / counts[i]);
        fflush(stdout);
    }
    return 0;
}
