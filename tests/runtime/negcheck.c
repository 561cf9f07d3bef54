/* Checks named, asynchronous collectives under horovodrun: ranks submit
 * in different orders, grouped allreduces complete together, and ranks
 * that disagree get errors instead of a hang. Exits 1 on a wrong result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"

static int rank, size, failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        failures++;
        printf("negcheck: rank %d: FAILED %s (%s)\n", rank, what,
               hvd_last_error());
    }
}

/* 50 tensors submitted in an order that differs on every rank. */
static void test_orders(void)
{
    enum { N = 50 };
    int order[N];
    float *bufs[N];
    hvd_handle h[N];
    char name[32];
    unsigned seed = 12345u + (unsigned)rank * 7919u;

    for (int i = 0; i < N; i++)
        order[i] = i;
    for (int i = N - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < N; k++) {
        int i = order[k];
        size_t n = 1 + (size_t)i * 37;
        bufs[i] = malloc(n * sizeof(float));
        for (size_t e = 0; e < n; e++)
            bufs[i][e] = (float)(rank + 1) * (float)(i + 1);
        snprintf(name, sizeof(name), "grad.%d", i);
        check(hvd_allreduce_async(bufs[i], bufs[i], n, HVD_FLOAT32, HVD_SUM,
                                  name, &h[i]) == 0,
              "submit");
    }
    float ranks_sum = (float)size * (float)(size + 1) / 2;
    for (int i = 0; i < N; i++) {
        int rc = hvd_wait(h[i]);
        int ok = rc == 0;
        for (size_t e = 0; ok && e < 1 + (size_t)i * 37; e++)
            ok = bufs[i][e] == ranks_sum * (float)(i + 1);
        check(ok, "tensors submitted in different orders");
        free(bufs[i]);
    }
}

static void test_grouped(void)
{
    int32_t a[3] = {rank, rank, rank}, b[1000];
    const void *send[2] = {a, b};
    void *recv[2] = {a, b};
    size_t counts[2] = {3, 1000};
    for (int i = 0; i < 1000; i++)
        b[i] = i * rank;
    hvd_handle h;
    check(hvd_grouped_allreduce_async(send, recv, counts, 2, HVD_INT32, HVD_MAX,
                                      "group", &h) == 0,
          "grouped submit");
    while (hvd_poll(h) == 0)
        ;
    int ok = hvd_wait(h) == 0 && a[0] == size - 1 && a[2] == size - 1;
    for (int i = 0; ok && i < 1000; i++)
        ok = b[i] == i * (size - 1);
    check(ok, "grouped allreduce");
}

/* Each kind of disagreement fails on every rank, naming both sides, and
 * the next operation works. */
/* Three allgathers of one handle: rank r gives r + i + 1 elements to
 * tensor i, of values 100 r + i. */
static void test_grouped_allgather(void)
{
    enum { N = 3 };
    int32_t in[N][64];
    const void *sends[N];
    size_t counts[N], recvcounts[N * 64];
    void *recv[N];
    for (int i = 0; i < N; i++) {
        counts[i] = (size_t)(rank + i + 1);
        for (size_t e = 0; e < counts[i]; e++)
            in[i][e] = 100 * rank + i;
        sends[i] = in[i];
    }
    hvd_handle h;
    int rc = hvd_grouped_allgather_async(sends, counts, N, HVD_INT32, recv,
                                         recvcounts, "gag", &h);
    check(rc == 0 && hvd_wait(h) == 0, "grouped allgather");
    int ok = rc == 0;
    for (int i = 0; ok && i < N; i++) {
        const int32_t *got = recv[i];
        for (int r = 0, at = 0; ok && r < size; r++) {
            ok = recvcounts[i * size + r] == (size_t)(r + i + 1);
            for (int e = 0; ok && e < r + i + 1; e++)
                ok = got[at++] == 100 * r + i;
        }
    }
    check(ok, "grouped allgather results and counts");
    for (int i = 0; rc == 0 && i < N; i++)
        free(recv[i]);
}

static void test_mismatches(void)
{
    float x[64] = {0};
    int rc, ok;
    char want[160];

    rc = hvd_allreduce(x, x, rank == size - 1 ? 32 : 64, HVD_FLOAT32, HVD_SUM,
                       "mm.count");
    /* The rank named first is whichever asked first; the other side is
     * the rank that differs. */
    snprintf(want, sizeof(want),
             "sent 64 elements, rank %d sent 32 for "
             "tensor 'mm.count'",
             size - 1);
    check(rc == HVD_EMISMATCH &&
              strstr(hvd_last_error(), "Mismatched allreduce tensor sizes") &&
              strstr(hvd_last_error(), want),
          "count");
    printf("negcheck: rank %d: %s\n", rank, hvd_last_error());

    rc = hvd_allreduce(x, x, 8, rank == size - 1 ? HVD_INT32 : HVD_FLOAT32,
                       HVD_SUM, "mm.dtype");
    check(rc == HVD_EMISMATCH &&
              strstr(hvd_last_error(), "Mismatched allreduce data types"),
          "dtype");
    rc = hvd_allreduce(x, x, 8, HVD_FLOAT32,
                       rank == size - 1 ? HVD_MAX : HVD_SUM, "mm.op");
    check(rc == HVD_EMISMATCH &&
              strstr(hvd_last_error(), "Mismatched allreduce operations"),
          "op");
    rc = hvd_broadcast(x, 8, HVD_FLOAT32, rank == size - 1 ? size - 1 : 0,
                       "mm.root");
    check(rc == HVD_EMISMATCH &&
              strstr(hvd_last_error(), "Mismatched broadcast root ranks"),
          "root");
    /* 24 elements in shapes that differ: (6, 4) on the last rank, (6, 2, 2)
     * on the others. An allgather compares all but the first dimension,
     * so (r + 1, 2, 2) on every rank gathers. */
    int64_t dims[3] = {6, rank == size - 1 ? 4 : 2, 2};
    int nd = rank == size - 1 ? 2 : 3;
    check(hvd_next_shapes(dims, &nd, 1) == 0, "shapes given");
    rc = hvd_allreduce(x, x, 24, HVD_FLOAT32, HVD_SUM, "mm.shape");
    check(rc == HVD_EMISMATCH &&
              strstr(hvd_last_error(), "Mismatched allreduce tensor shapes"),
          "shape");
    int64_t rows[3] = {rank + 1, 2, 2};
    nd = 3;
    void *all = NULL;
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    check(hvd_next_shapes(rows, &nd, 1) == 0 &&
              hvd_allgather(x, (size_t)(rank + 1) * 4, HVD_FLOAT32, &all,
                            counts, "rows.shape") == 0,
          "shapes that differ in the first dimension gather");
    free(all);
    free(counts);
    /* The job goes on. */
    float y = 1;
    rc = hvd_allreduce(&y, &y, 1, HVD_FLOAT32, HVD_SUM, "after");
    ok = rc == 0 && y == (float)size;
    check(ok, "an allreduce after the mismatches");
}

/* Random floats in tensors of mixed sizes, submitted together so that
 * they fuse: the hash of the results is printed so that a run with fusion
 * and one without can be compared bit for bit. */
static void test_fusion_hash(void)
{
    enum { N = 12 };
    static const size_t sizes[N] = {1,    7,      1000, 300000, 3,    65536,
                                    5000, 250000, 17,   9000,   4096, 123457};
    float *bufs[N];
    hvd_handle h[N];
    char name[32];
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)rank,
             hash = 1469598103934665603ull;

    for (int i = 0; i < N; i++) {
        bufs[i] = malloc(sizes[i] * sizeof(float));
        for (size_t e = 0; e < sizes[i]; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bufs[i][e] = (float)(x % 1000003) / 977.0f - 500.0f;
        }
    }
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "fuse.%d", i);
        check(hvd_allreduce_async(bufs[i], bufs[i], sizes[i], HVD_FLOAT32,
                                  HVD_AVERAGE, name, &h[i]) == 0,
              "fusion submit");
    }
    for (int i = 0; i < N; i++) {
        check(hvd_wait(h[i]) == 0, "fused allreduce");
        const uint8_t *p = (const uint8_t *)bufs[i];
        for (size_t b = 0; b < sizes[i] * sizeof(float); b++)
            hash = (hash ^ p[b]) * 1099511628211ull;
        free(bufs[i]);
    }
    printf("negcheck: rank %d: fusion hash %016llx\n", rank,
           (unsigned long long)hash);
}

/* Value e of rank r's tensor for the compression test, in [-1, 1]. */
static float cvalue(int r, size_t e)
{
    uint32_t x = (uint32_t)(e * 2654435761u) ^ (uint32_t)(r * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    return (float)(x % 20001) / 10000.0f - 1.0f;
}

/* fp16 compression stays within float16 precision; scale factors scale;
 * ranks that disagree about options are told. */
static void test_options(void)
{
    enum { N = 100000 };
    float *buf = malloc(N * sizeof(float));
    hvd_allreduce_opts fp16 = {.compression = HVD_COMPRESS_FP16};
    hvd_handle h;
    int ok = 1;

    for (size_t e = 0; e < N; e++)
        buf[e] = cvalue(rank, e);
    check(hvd_allreduce_ex_async(buf, buf, N, HVD_FLOAT32, HVD_SUM, "fp16",
                                 &fp16, &h) == 0 &&
              hvd_wait(h) == 0,
          "compressed allreduce");
    double worst = 0;
    for (size_t e = 0; e < N && ok; e++) {
        double exact = 0, mag = 0;
        for (int r = 0; r < size; r++) {
            exact += cvalue(r, e);
            mag += cvalue(r, e) < 0 ? -cvalue(r, e) : cvalue(r, e);
        }
        double err = buf[e] - exact;
        err = err < 0 ? -err : err;
        /* Each input rounded to float16, the sum rounded once more. */
        double bound = (mag + (exact < 0 ? -exact : exact)) / 2048 + 1e-7;
        ok = err <= bound;
        worst = err > worst ? err : worst;
    }
    check(ok, "fp16 compression error within float16 precision");
    check(worst > 0, "compression really sent float16");
    printf("negcheck: rank %d: fp16 compression worst error %.6f\n", rank,
           worst);

    float v = (float)(rank + 1);
    hvd_allreduce_opts sc = {.prescale = 0.5, .postscale = 4};
    check(hvd_allreduce_ex_async(&v, &v, 1, HVD_FLOAT32, HVD_SUM, "scaled", &sc,
                                 &h) == 0 &&
              hvd_wait(h) == 0 && v == (float)(size * (size + 1)),
          "prescale and postscale");
    /* Integers scale in float64, truncated: (2r + 3) * 0.5 gives r + 1. */
    int32_t iv = 2 * rank + 3;
    check(hvd_allreduce_ex_async(&iv, &iv, 1, HVD_INT32, HVD_SUM, "iscaled",
                                 &sc, &h) == 0 &&
              hvd_wait(h) == 0 && iv == 2 * size * (size + 1),
          "integers prescaled and postscaled");
    if (size > 1) {
        hvd_allreduce_opts mine = {.postscale = rank == size - 1 ? 2 : 1};
        check(hvd_allreduce_ex_async(&v, &v, 1, HVD_FLOAT32, HVD_SUM, "mmopt",
                                     &mine, &h) == 0 &&
                  hvd_wait(h) == HVD_EMISMATCH &&
                  strstr(hvd_last_error(), "Mismatched allreduce options"),
              "options that differ");
    }
    free(buf);
}

int main(void)
{
    if (hvd_init() != 0) {
        printf("negcheck: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    rank = hvd_rank();
    size = hvd_size();
    test_orders();
    test_grouped();
    test_grouped_allgather();
    test_fusion_hash();
    test_options();
    if (size > 1)
        test_mismatches();
    check(hvd_barrier() == 0, "barrier");
    printf("negcheck: rank %d of %d: %d failures\n", rank, size, failures);
    hvd_shutdown();
    return failures ? 1 : 0;
}
