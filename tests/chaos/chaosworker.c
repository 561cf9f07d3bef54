/* A rank for the chaos tests: allreduces of random sizes in a loop. */
/*
 * Usage: chaosworker [--seconds S] [--iters N] [--seed X] [--max-elems M]
 *                    [--ready-after K]
 *
 * Every iteration submits one to three float32 allreduces (SUM) of sizes
 * drawn from a generator that every rank seeds alike (--seed), so the
 * ranks agree on every size without talking; the results are checked.
 * After K iterations (default 3) each rank prints "chaos: rank R ready",
 * so that a test knows traffic is flowing. The job ends after N
 * iterations, or once S seconds have passed on any rank (the ranks agree
 * on when to stop through a small MAX allreduce every 8 iterations), with
 * "chaos: rank R done after I iterations" and status 0.
 *
 * A failed collective prints "chaos: rank R: ... failed: ..." on stderr
 * and exits 1 at once (the way a training script dies of an exception),
 * which is what horovodrun's fail-fast then acts on. A wrong result exits
 * 3; a failed hvd_init exits 2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hvd.h"

static int rank = -1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: the same sequence on every rank for the same seed. */
static uint64_t next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static void fail(const char *what, const char *name, int rc)
{
    fprintf(stderr, "chaos: rank %d: %s '%s' failed: %s: %s\n", rank, what,
            name, hvd_err_name(rc), hvd_last_error());
    fflush(stderr);
    exit(1);
}

/* Sizes are mostly small (negotiation and fusion at work), sometimes
 * large (pipelined ring and shared-memory chunks). */
static size_t draw_size(uint64_t *s, size_t max_elems)
{
    uint64_t v = next(s);
    size_t cap = (v & 3) == 0 ? max_elems : max_elems / 64 + 1;
    return 1 + (size_t)((v >> 8) % cap);
}

int main(int argc, char **argv)
{
    double seconds = 30;
    long iters = -1, ready_after = 3;
    uint64_t seed = 1;
    size_t max_elems = 1 << 18;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "chaosworker: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(a, "--iters") == 0)
            iters = atol(v);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--max-elems") == 0)
            max_elems = (size_t)strtoull(v, NULL, 0);
        else if (strcmp(a, "--ready-after") == 0)
            ready_after = atol(v);
        else {
            fprintf(stderr, "chaosworker: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (seed == 0)
        seed = 1;
    if (max_elems < 64)
        max_elems = 64;

    int rc = hvd_init();
    if (rc != 0) {
        fprintf(stderr, "chaos: hvd_init failed: %s: %s\n", hvd_err_name(rc),
                hvd_last_error());
        return 2;
    }
    rank = hvd_rank();
    int size = hvd_size();
    float expect = (float)size * (float)(size + 1) / 2;
    float *bufs[3];
    for (int k = 0; k < 3; k++) {
        bufs[k] = malloc(max_elems * sizeof(float));
        if (bufs[k] == NULL) {
            fprintf(stderr, "chaos: rank %d: out of memory\n", rank);
            return 2;
        }
    }

    double t0 = now_s();
    long it = 0;
    char name[3][48];
    for (;; it++) {
        if (iters >= 0 && it >= iters)
            break;
        if (iters < 0 && it % 8 == 0) {
            /* Everyone stops at the same iteration once anyone is out of
             * time. */
            int32_t stop = now_s() - t0 >= seconds;
            snprintf(name[0], sizeof(name[0]), "chaos.stop.%ld", it);
            if ((rc = hvd_allreduce(&stop, &stop, 1, HVD_INT32, HVD_MAX,
                                    name[0])) != 0)
                fail("allreduce", name[0], rc);
            if (stop)
                break;
        }
        int n = 1 + (int)(next(&seed) % 3);
        size_t count[3];
        hvd_handle h[3];
        for (int k = 0; k < n; k++) {
            count[k] = draw_size(&seed, max_elems);
            for (size_t e = 0; e < count[k]; e++)
                bufs[k][e] = (float)(rank + 1);
            snprintf(name[k], sizeof(name[k]), "chaos.%ld.%d", it, k);
            if ((rc = hvd_allreduce_async(bufs[k], bufs[k], count[k],
                                          HVD_FLOAT32, HVD_SUM, name[k],
                                          &h[k])) != 0)
                fail("allreduce", name[k], rc);
        }
        for (int k = 0; k < n; k++)
            if ((rc = hvd_wait(h[k])) != 0)
                fail("allreduce", name[k], rc);
        for (int k = 0; k < n; k++)
            if (bufs[k][0] != expect || bufs[k][count[k] - 1] != expect) {
                fprintf(stderr,
                        "chaos: rank %d: '%s' gave %g, not %g: WRONG RESULT\n",
                        rank, name[k], (double)bufs[k][0], (double)expect);
                return 3;
            }
        if (it + 1 == ready_after)
            printf("chaos: rank %d ready\n", rank);
    }
    if (it < ready_after)
        printf("chaos: rank %d ready\n", rank);
    printf("chaos: rank %d done after %ld iterations\n", rank, it);
    for (int k = 0; k < 3; k++)
        free(bufs[k]);
    rc = hvd_shutdown();
    if (rc != 0) {
        fprintf(stderr, "chaos: rank %d: hvd_shutdown failed: %s\n", rank,
                hvd_last_error());
        return 1;
    }
    return 0;
}
