/* Checks every collective of libhvd against a serial reference, and that
 * all ranks get the same bits (rank 0 prints a hash of each inexact
 * result). Run under horovodrun; exits 1 on a wrong result. "--die-rank
 * R" makes rank R SIGKILL itself during a large allreduce ("--stop-rank
 * R": SIGSTOP), to check that the others fail instead of hanging. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"
#include "elems.h"
#include "reduce.h"

static int rank, size, failures, checks;

/* Value of element i on rank r: small, so that float sums and products
 * of powers of two are exact in any order. */
static double value(int r, size_t i, hvd_op op)
{
    if (op == HVD_PRODUCT) {
        static const double f[] = {1, 2, -1, 0.5, 1, -2, 4};
        return f[(i + (size_t)r * 3) % 7];
    }
    return (double)((int)((i * 7 + (size_t)r * 13) % 23) - 11);
}

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        if (failures < 20)
            printf("collcheck: rank %d: FAILED %s\n", rank, what);
    }
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

/* All ranks must hold the same hash: gather them and compare. */
static void check_same(uint64_t h, const char *what)
{
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    void *all = NULL;
    int rc = hvd_allgather(&h, 1, HVD_INT64, &all, counts, "hash");
    int same = rc == 0;
    for (int r = 0; same && r < size; r++)
        same = counts[r] == 1 && ((uint64_t *)all)[r] == h;
    check(same, what);
    free(all);
    free(counts);
}

static void test_allreduce(size_t n, hvd_dtype dt, hvd_op op, int inplace)
{
    size_t es = hvd_dtype_size(dt);
    uint8_t *in = malloc(n * es + 1), *out = malloc(n * es + 1),
            *want = malloc(n * es + 1);
    char what[160];
    for (size_t i = 0; i < n; i++)
        store(in, i, dt, value(rank, i, op));
    elems_reference(want, n, dt, op, size, value);
    snprintf(what, sizeof(what), "allreduce %s %s n=%zu%s", dt_names[dt],
             op_names[op], n, inplace ? " in place" : "");
    int rc = inplace ? hvd_allreduce(in, in, n, dt, op, what)
                     : hvd_allreduce(in, out, n, dt, op, what);
    uint8_t *res = inplace ? in : out;
    check(rc == 0 && memcmp(res, want, n * es) == 0, what);
    if (rc)
        printf("collcheck: rank %d: %s\n", rank, hvd_last_error());
    free(in);
    free(out);
    free(want);
}

/* Random floats: not exact, but every rank must still agree bit for bit. */
static void test_identical(size_t n, hvd_dtype dt)
{
    size_t es = hvd_dtype_size(dt);
    uint8_t *buf = malloc(n * es + 1);
    uint64_t x = 88172645463325252ull ^ (uint64_t)rank;
    char what[96];
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        store(buf, i, dt, (double)(x % 100000) / 997.0 - 50);
    }
    snprintf(what, sizeof(what), "identical %s n=%zu", dt_names[dt], n);
    int rc = hvd_allreduce(buf, buf, n, dt, HVD_AVERAGE, what);
    check(rc == 0, what);
    uint64_t h = fnv(buf, n * es, 1469598103934665603ull);
    check_same(h, what);
    /* Transports that promise the same bits are compared by this line. */
    if (rank == 0)
        printf("collcheck: %s hash %016" PRIx64 "\n", what, h);
    free(buf);
}

static void test_broadcast(size_t n, int root)
{
    int32_t *buf = malloc(n * 4 + 4);
    char what[96];
    for (size_t i = 0; i < n; i++)
        buf[i] = rank == root ? (int32_t)(i * 31 + (size_t)root) : -1;
    snprintf(what, sizeof(what), "broadcast n=%zu root=%d", n, root);
    int rc = hvd_broadcast(buf, n, HVD_INT32, root, what);
    int ok = rc == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = buf[i] == (int32_t)(i * 31 + (size_t)root);
    check(ok, what);
    free(buf);
}

static void test_allgather(size_t base)
{
    size_t mine = base + (size_t)rank * 3;
    double *in = malloc(mine * 8 + 8);
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    void *out = NULL;
    char what[96];
    for (size_t i = 0; i < mine; i++)
        in[i] = rank * 1000.0 + (double)i;
    snprintf(what, sizeof(what), "allgather base=%zu", base);
    int rc = hvd_allgather(in, mine, HVD_FLOAT64, &out, counts, what);
    int ok = rc == 0;
    size_t k = 0;
    for (int r = 0; ok && r < size; r++) {
        ok = counts[r] == base + (size_t)r * 3;
        for (size_t i = 0; ok && i < counts[r]; i++, k++)
            ok = ((double *)out)[k] == r * 1000.0 + (double)i;
    }
    check(ok, what);
    free(out);
    free(in);
    free(counts);
}

static void test_barrier(void)
{
    struct timespec a, b;
    /* Rank 0 arrives late; nobody may leave before it arrives. */
    if (rank == 0)
        usleep(300 * 1000);
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = hvd_barrier();
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    check(rc == 0 && (rank == 0 || size == 1 || ms > 200), "barrier waits");
}

static void *die_later(void *arg)
{
    usleep(300 * 1000);
    raise(*(int *)arg);
    return NULL;
}

/* Large allreduces until a peer dies (sig SIGKILL) or stops (SIGSTOP):
 * must fail naming it, not hang. */
static int die_test(int victim, int sig)
{
    size_t n = 16u << 20;
    float *buf = calloc(n, sizeof(float));
    pthread_t t;
    /* The survivors must live to report, whatever horovodrun sends. */
    signal(SIGTERM, SIG_IGN);
    if (rank == victim)
        pthread_create(&t, NULL, die_later, &sig);
    for (int i = 0; i < 100000; i++) {
        int rc = hvd_allreduce(buf, buf, n, HVD_FLOAT32, HVD_SUM, "big");
        if (rc != 0) {
            printf("collcheck: rank %d: failed as expected: %s (%s)\n", rank,
                   hvd_last_error(), hvd_err_name(rc));
            rc = hvd_allreduce(buf, buf, 1, HVD_FLOAT32, HVD_SUM, "later");
            printf("collcheck: rank %d: later call: %s\n", rank,
                   rc ? hvd_err_name(rc) : "succeeded");
            free(buf);
            return 3;
        }
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int big = argc > 1 && strcmp(argv[1], "--big") == 0;
    int rc = hvd_init();
    if (rc != 0) {
        printf("collcheck: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    rank = hvd_rank();
    size = hvd_size();
    if (argc > 2 && strcmp(argv[1], "--die-rank") == 0)
        return die_test(atoi(argv[2]), SIGKILL);
    if (argc > 2 && strcmp(argv[1], "--stop-rank") == 0)
        return die_test(atoi(argv[2]), SIGSTOP);

    static const size_t sizes[] = {0, 1, 7, 1027};
    for (int dt = HVD_UINT8; dt <= ELEMS_LAST_DTYPE; dt++)
        for (int op = HVD_SUM; op <= HVD_PRODUCT; op++)
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
                test_allreduce(sizes[s], (hvd_dtype)dt, (hvd_op)op, s & 1);
    test_allreduce((1u << 20) + 3, HVD_FLOAT32, HVD_SUM, 0);
    test_allreduce((1u << 20) + 3, HVD_FLOAT16, HVD_AVERAGE, 1);
    test_allreduce((1u << 20) + 3, HVD_INT64, HVD_MAX, 0);
    test_identical(100003, HVD_FLOAT32);
    test_identical(100003, HVD_BFLOAT16);
    for (int root = 0; root < size; root++) {
        test_broadcast(0, root);
        test_broadcast(1, root);
        test_broadcast(7, root);
        test_broadcast((1u << 20) + 3, root);
    }
    test_allgather(0);
    test_allgather(5);
    test_allgather(100000);
    test_allgather(300000); /* more than one shared-memory slot per rank */
    test_barrier();
    if (big)
        test_allreduce(16u << 20, HVD_FLOAT32, HVD_SUM, 1); /* 64 MiB */
    printf("collcheck: rank %d transport %s\n", rank, hvd_transport());
    printf("collcheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    hvd_shutdown();
    return failures ? 1 : 0;
}
