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
#include "worker/kernels/reduce.h"

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

/* A repeated name is cached, so a small tensor's second allreduce
 * travels with the negotiation and is folded by every rank (eager.c):
 * it must give the bits that the transport gave the first time. */
static void test_eager_bits(size_t n, hvd_dtype dt, hvd_op op)
{
    size_t es = hvd_dtype_size(dt);
    uint8_t *in = malloc(n * es + 1), *first = malloc(n * es + 1),
            *again = malloc(n * es + 1);
    uint64_t x = 2463534242ull + (uint64_t)rank * 7919;
    char what[96];
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        store(in, i, dt, (double)(x % 100000) / 997.0 - 50);
    }
    snprintf(what, sizeof(what), "eager %s %s n=%zu", dt_names[dt],
             op_names[op], n);
    int rc = hvd_allreduce(in, first, n, dt, op, what);
    if (rc == 0)
        rc = hvd_allreduce(in, again, n, dt, op, what);
    check(rc == 0 && memcmp(first, again, n * es) == 0, what);
    check_same(fnv(again, n * es, 1469598103934665603ull), what);
    free(in);
    free(first);
    free(again);
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

/* Rank r's rows of R as Horovod splits them: R/n, one more below R%n. */
static size_t rows_of(size_t R, int r, size_t *first)
{
    size_t base = R / (size_t)size, extra = R % (size_t)size;
    *first = (size_t)r * base + ((size_t)r < extra ? (size_t)r : extra);
    return base + ((size_t)r < extra);
}

/* R rows of row elements: this rank's slice of the serial reference. */
static void test_reducescatter(size_t R, size_t row, hvd_dtype dt, hvd_op op)
{
    size_t es = hvd_dtype_size(dt), n = R * row, first;
    size_t mine = rows_of(R, rank, &first) * row;
    uint8_t *in = malloc(n * es + 1), *out = malloc(mine * es + 1),
            *want = malloc(n * es + 1);
    char what[160];
    for (size_t i = 0; i < n; i++)
        store(in, i, dt, value(rank, i, op));
    elems_reference(want, n, dt, op, size, value);
    snprintf(what, sizeof(what), "reducescatter %s %s rows=%zu row=%zu",
             dt_names[dt], op_names[op], R, row);
    int rc = hvd_reducescatter(in, out, n, row, dt, op, what, NULL);
    check(rc == 0 && memcmp(out, want + first * row * es, mine * es) == 0,
          what);
    if (rc)
        printf("collcheck: rank %d: %s\n", rank, hvd_last_error());
    free(in);
    free(out);
    free(want);
}

/* Random floats (and options): the same bits as the slice of hvd_allreduce
 * with the same options, which collcheck checks elsewhere. */
static void test_rs_like_allreduce(size_t R, size_t row, hvd_dtype dt,
                                   hvd_op op, double pre, double post, int comp)
{
    size_t es = hvd_dtype_size(dt), n = R * row, first;
    size_t mine = rows_of(R, rank, &first) * row;
    uint8_t *in = malloc(n * es + 1), *all = malloc(n * es + 1),
            *out = malloc(mine * es + 1);
    hvd_allreduce_opts o = {pre, post, comp};
    uint64_t x = 88172645463325252ull ^ (uint64_t)(rank + 7);
    hvd_handle h;
    char what[160];
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        store(in, i, dt, (double)(x % 100000) / 997.0 - 50);
    }
    snprintf(what, sizeof(what), "identical rs.%s.%s.%g.%g.%d n=%zu",
             dt_names[dt], op_names[op], pre, post, comp, n);
    int rc = hvd_allreduce_ex_async(in, all, n, dt, op, "rs.whole", &o, &h);
    if (rc == 0)
        rc = hvd_wait(h);
    if (rc == 0)
        rc = hvd_reducescatter(in, out, n, row, dt, op, what, &o);
    check(rc == 0 && memcmp(out, all + first * row * es, mine * es) == 0, what);
    if (rc)
        printf("collcheck: rank %d: %s\n", rank, hvd_last_error());
    if (rank == 0 && rc == 0)
        printf("collcheck: %s hash %016" PRIx64 "\n", what,
               fnv(out, mine * es, 1469598103934665603ull));
    free(in);
    free(all);
    free(out);
}

/* Ranks that disagree fail the operation on every rank, and go on. */
static void test_mismatches(void)
{
    double in[16] = {0}, out[16];
    size_t counts[64];
    void *got = NULL;
    if (size < 2 || size > 64)
        return;
    int rc = hvd_reducescatter(in, out, rank == 0 ? 6 : 8, 2, HVD_FLOAT64,
                               HVD_SUM, "rs.count", NULL);
    check(rc == HVD_EMISMATCH, "reducescatter count mismatch");
    rc = hvd_reducescatter(in, out, 12, rank == 0 ? 3 : 4, HVD_FLOAT64, HVD_SUM,
                           "rs.row", NULL);
    check(rc == HVD_EMISMATCH && strstr(hvd_last_error(), "row sizes") != NULL,
          "reducescatter row mismatch");
    rc = hvd_reducescatter(in, out, 4, 1, rank == 0 ? HVD_FLOAT64 : HVD_INT64,
                           HVD_SUM, "rs.dtype", NULL);
    check(rc == HVD_EMISMATCH, "reducescatter dtype mismatch");
    rc = hvd_reducescatter(in, out, 4, 1, HVD_FLOAT64,
                           rank == 0 ? HVD_SUM : HVD_MAX, "rs.op", NULL);
    check(rc == HVD_EMISMATCH, "reducescatter op mismatch");
    size_t one[64];
    for (int r = 0; r < size; r++)
        one[r] = 1;
    rc = hvd_alltoall(in, one, rank == 0 ? HVD_FLOAT64 : HVD_INT64, &got,
                      counts, "a2a.dtype");
    check(rc == HVD_EMISMATCH && got == NULL, "alltoall dtype mismatch");
    rc =
        hvd_reducescatter(in, out, 0, 0, HVD_FLOAT64, HVD_SUM, "rs.zero", NULL);
    check(rc == HVD_EINVAL, "reducescatter row 0");
    rc = hvd_reducescatter(in, out, 7, 2, HVD_FLOAT64, HVD_SUM, "rs.odd", NULL);
    check(rc == HVD_EINVAL, "reducescatter row that does not divide");
    /* And the job goes on. */
    for (int i = 0; i < 16; i++)
        in[i] = 1;
    rc = hvd_reducescatter(in, out, 16, 1, HVD_FLOAT64, HVD_SUM, "rs.after",
                           NULL);
    size_t first, mine = rows_of(16, rank, &first);
    int ok = rc == 0;
    for (size_t i = 0; ok && i < mine; i++)
        ok = out[i] == size;
    check(ok, "a reducescatter after the mismatches");
}

/* Rank r sends rank j base + (r + 2j) % 4 elements (some none), each
 * naming sender, receiver and index. */
static size_t a2a_count(int from, int to, size_t base)
{
    return base ? base + (size_t)((from + 2 * to) % 4) : 0;
}

static double a2a_value(int from, int to, size_t i)
{
    return from * 1e6 + to * 1e4 + (double)i;
}

static void test_alltoall(size_t base, int zeros)
{
    size_t *sc = calloc((size_t)size, sizeof(*sc));
    size_t *rc_counts = calloc((size_t)size, sizeof(*rc_counts)), total = 0;
    char what[96];
    for (int j = 0; j < size; j++) {
        sc[j] = zeros && (rank + j) % 2 ? 0 : a2a_count(rank, j, base);
        total += sc[j];
    }
    double *in = malloc(total * 8 + 8);
    size_t k = 0;
    for (int j = 0; j < size; j++)
        for (size_t i = 0; i < sc[j]; i++)
            in[k++] = a2a_value(rank, j, i);
    void *out = NULL;
    snprintf(what, sizeof(what), "alltoall base=%zu%s", base,
             zeros ? " zeros" : "");
    int rc = hvd_alltoall(in, sc, HVD_FLOAT64, &out, rc_counts, what);
    int ok = rc == 0;
    k = 0;
    for (int r = 0; ok && r < size; r++) {
        size_t want = zeros && (r + rank) % 2 ? 0 : a2a_count(r, rank, base);
        ok = rc_counts[r] == want;
        for (size_t i = 0; ok && i < want; i++, k++)
            ok = ((double *)out)[k] == a2a_value(r, rank, i);
    }
    ok = ok && (k > 0 || out == NULL);
    check(ok, what);
    if (rc)
        printf("collcheck: rank %d: %s\n", rank, hvd_last_error());
    free(out);
    free(in);
    free(sc);
    free(rc_counts);
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

/* Threads of one rank calling at once: a caller runs the engine on its
 * own thread while the others wait for it or for the background thread
 * (one thread waits for asynchronous calls instead). */
#define CALLER_THREADS 3
#define CALLER_ITERS 300

static void *caller(void *arg)
{
    int t = *(int *)arg, bad = 0;
    int32_t in[5], out[5];
    char name[64];
    for (int k = 0; k < CALLER_ITERS; k++) {
        size_t n = 1 + (size_t)(k % 5);
        for (size_t i = 0; i < n; i++)
            in[i] = rank * 1000 + t * 100 + k % 97 + (int32_t)i;
        snprintf(name, sizeof(name), "caller.%d.%d", t, k);
        int rc;
        if (t == CALLER_THREADS - 1) {
            hvd_handle h;
            rc = hvd_allreduce_async(in, out, n, HVD_INT32, HVD_SUM, name, &h);
            if (rc == 0)
                rc = hvd_wait(h);
        } else {
            rc = hvd_allreduce(in, out, n, HVD_INT32, HVD_SUM, name);
        }
        for (size_t i = 0; i < n && rc == 0; i++) {
            /* The sum over ranks r of r*1000 + rest. */
            int32_t want = 1000 * size * (size - 1) / 2 +
                           size * (t * 100 + k % 97 + (int32_t)i);
            bad += out[i] != want;
        }
        bad += rc != 0;
        /* Vary the interleaving: odd ranks pause now and then. */
        if (rank % 2 && k % 50 == t)
            usleep(200);
    }
    *(int *)arg = bad;
    return NULL;
}

static void test_concurrent_callers(void)
{
    pthread_t th[CALLER_THREADS];
    int arg[CALLER_THREADS];
    for (int t = 0; t < CALLER_THREADS; t++) {
        arg[t] = t;
        pthread_create(&th[t], NULL, caller, &arg[t]);
    }
    int bad = 0;
    for (int t = 0; t < CALLER_THREADS; t++) {
        pthread_join(th[t], NULL);
        bad += arg[t];
    }
    check(bad == 0, "allreduces from 3 threads at once");
}

static void *die_later(void *arg)
{
    usleep(300 * 1000);
    raise(*(int *)arg);
    return NULL;
}

/* Allreduces until a peer dies (sig SIGKILL) or stops (SIGSTOP): must
 * fail naming it, not hang. Large ones; or small (1: one float each,
 * which travel with the negotiation once cached; 2: 600 floats, too many
 * to travel, few enough for a small tensor's path). */
static int die_test(int victim, int sig, int small)
{
    size_t n = small == 1 ? 1 : small == 2 ? 600 : 16u << 20;
    float *buf = calloc(n, sizeof(float));
    pthread_t t;
    /* The survivors must live to report, whatever horovodrun sends. */
    signal(SIGTERM, SIG_IGN);
    if (rank == victim)
        pthread_create(&t, NULL, die_later, &sig);
    for (int i = 0; i < 100000; i++) {
        int rc = hvd_allreduce(buf, buf, n, HVD_FLOAT32, HVD_SUM,
                               small ? "small" : "big");
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
    int small = argc <= 3                         ? 0
                : strcmp(argv[3], "--small") == 0 ? 1
                : strcmp(argv[3], "--mid") == 0   ? 2
                                                  : 0;
    if (argc > 2 && strcmp(argv[1], "--die-rank") == 0)
        return die_test(atoi(argv[2]), SIGKILL, small);
    if (argc > 2 && strcmp(argv[1], "--stop-rank") == 0)
        return die_test(atoi(argv[2]), SIGSTOP, small);

    static const size_t sizes[] = {0, 1, 7, 1027};
    /* Twice: the second time the names are cached, and the small ones
     * travel with the negotiation. */
    for (int pass = 0; pass < 2; pass++)
        for (int dt = HVD_UINT8; dt <= ELEMS_LAST_DTYPE; dt++)
            for (int op = HVD_SUM; op <= HVD_PRODUCT; op++)
                for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
                    test_allreduce(sizes[s], (hvd_dtype)dt, (hvd_op)op, s & 1);
    test_eager_bits(5, HVD_FLOAT32, HVD_AVERAGE);
    test_eager_bits(256, HVD_FLOAT32, HVD_SUM);     /* 1 KiB, the most */
    test_eager_bits(257, HVD_FLOAT32, HVD_SUM);     /* too large to travel */
    test_eager_bits(300, HVD_FLOAT16, HVD_AVERAGE); /* float32 in the fold */
    test_eager_bits(3, HVD_BFLOAT16, HVD_SUM);
    test_eager_bits(7, HVD_FLOAT16, HVD_AVERAGE);
    test_eager_bits(8, HVD_FLOAT64, HVD_PRODUCT);
    test_allreduce((1u << 20) + 3, HVD_FLOAT32, HVD_SUM, 0);
    test_allreduce((1u << 20) + 3, HVD_FLOAT16, HVD_AVERAGE, 1);
    test_allreduce((1u << 20) + 3, HVD_INT64, HVD_MAX, 0);
    test_identical(100003, HVD_FLOAT32);
    test_identical(100003, HVD_BFLOAT16);
    /* Small enough to be folded in rank order (through local rank 0 from
     * 8 ranks in shared memory), too large to travel with the
     * negotiation. */
    test_identical(5003, HVD_FLOAT32);
    test_identical(3001, HVD_FLOAT16);
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
    static const size_t rows[][2] = {{0, 1}, {3, 1}, {7, 3}, {1027, 2}};
    for (int dt = HVD_UINT8; dt <= ELEMS_LAST_DTYPE; dt++)
        for (int op = HVD_SUM; op <= HVD_PRODUCT; op++)
            for (size_t s = 0; s < sizeof(rows) / sizeof(rows[0]); s++)
                test_reducescatter(rows[s][0], rows[s][1], (hvd_dtype)dt,
                                   (hvd_op)op);
    test_reducescatter((1u << 18) + 3, 4, HVD_FLOAT32, HVD_SUM);
    test_reducescatter((1u << 18) + 3, 4, HVD_BFLOAT16, HVD_MAX);
    test_rs_like_allreduce(100003, 1, HVD_FLOAT32, HVD_AVERAGE, 1, 1, 0);
    test_rs_like_allreduce(33335, 3, HVD_BFLOAT16, HVD_SUM, 1, 1, 0);
    test_rs_like_allreduce(5, 2, HVD_FLOAT32, HVD_SUM, 1, 1, 0);
    test_rs_like_allreduce(20001, 5, HVD_FLOAT32, HVD_SUM, 0.5, 3, 0);
    test_rs_like_allreduce(20001, 5, HVD_FLOAT32, HVD_AVERAGE, 1, 1, 1);
    test_rs_like_allreduce(1001, 2, HVD_FLOAT64, HVD_SUM, 0.25, 2, 0);
    test_alltoall(0, 0);
    test_alltoall(1, 0);
    test_alltoall(5, 1);
    test_alltoall(100000, 0); /* more than one shared-memory slot */
    test_mismatches();
    test_barrier();
    test_concurrent_callers();
    if (big)
        test_allreduce(16u << 20, HVD_FLOAT32, HVD_SUM, 1); /* 64 MiB */
    printf("collcheck: rank %d transport %s\n", rank, hvd_transport());
    printf("collcheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    hvd_shutdown();
    return failures ? 1 : 0;
}
