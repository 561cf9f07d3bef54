/* Checks what libhvd's MPI backend adds to collcheck: the job's place from
 * MPI, integer wrap-around, NaN in min and max, float16 rounded once, a
 * late rank called into a cycle, and MPI that the program initialized
 * itself. Run under mpirun; exits 1 on a wrong result. Modes: none (libhvd
 * initializes MPI), "preinit" (the program does, with
 * MPI_THREAD_MULTIPLE), "single" (the program does, with MPI_Init: libhvd
 * must refuse). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"
#include "tests/runtime/elems.h"
#include "worker/kernels/reduce.h"

static int rank, size, failures, checks;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        printf("mpicheck: rank %d: FAILED %s (%s)\n", rank, what,
               hvd_last_error());
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Sums that leave every integer type's range (exact in a double). */
static double big(int r, size_t i, hvd_op op)
{
    (void)op;
    static const double v[] = {100, 200, 1073741824.0, 4611686018427387904.0};
    return v[i % 4] + (double)r;
}

/* Products that wrap: 16 * 16 is 0 modulo 2^8. */
static double sixteen(int r, size_t i, hvd_op op)
{
    (void)op;
    (void)r;
    return i % 2 ? 16 : 65536;
}

/* NaN on the last rank in every third element. */
static double nan_last(int r, size_t i, hvd_op op)
{
    (void)op;
    return r == size - 1 && i % 3 == 0 ? NAN : (double)r - (double)(i % 5);
}

/* One large value and ones: rounding after each addition would lose the
 * ones (float16 has a spacing of 2 at 2048, bfloat16 at 256). */
static double ones(int r, size_t i, hvd_op op)
{
    (void)op;
    (void)i;
    return r == 0 ? 2048 : 1;
}

static double ones_bf16(int r, size_t i, hvd_op op)
{
    (void)op;
    (void)i;
    return r == 0 ? 256 : 1;
}

static void test_allreduce(hvd_dtype dt, hvd_op op, size_t n, elems_value_fn *f,
                           const char *what)
{
    size_t es = hvd_dtype_size(dt);
    uint8_t *buf = malloc(n * es + 1), *want = malloc(n * es + 1);
    char name[160];
    for (size_t i = 0; i < n; i++)
        store(buf, i, dt, f(rank, i, op));
    elems_reference(want, n, dt, op, size, f);
    snprintf(name, sizeof(name), "%s %s %s n=%zu", what, dt_names[dt],
             op_names[op], n);
    int rc = hvd_allreduce(buf, buf, n, dt, op, name);
    check(rc == 0 && memcmp(buf, want, n * es) == 0, name);
    free(buf);
    free(want);
}

static void test_semantics(void)
{
    static const size_t sizes[] = {5, 1031};
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s];
        static const hvd_dtype ints[] = {HVD_UINT8, HVD_INT8, HVD_INT16,
                                         HVD_INT32, HVD_INT64};
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
            hvd_dtype dt = ints[k];
            test_allreduce(dt, HVD_SUM, n, big, "wrap");
            test_allreduce(dt, HVD_AVERAGE, n, big, "wrap");
            test_allreduce(dt, HVD_PRODUCT, n, sixteen, "wrap");
        }
        for (int dt = HVD_FLOAT16; dt <= HVD_FLOAT64; dt++) {
            test_allreduce(dt, HVD_MIN, n, nan_last, "nan");
            test_allreduce(dt, HVD_MAX, n, nan_last, "nan");
        }
        test_allreduce(HVD_FLOAT16, HVD_SUM, n, ones, "round once");
        test_allreduce(HVD_FLOAT16, HVD_AVERAGE, n, ones, "round once");
        test_allreduce(HVD_BFLOAT16, HVD_SUM, n, ones_bf16, "round once");
    }
}

/* The place MPI gives must be mpirun's (all ranks on this one host). */
static void test_place(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    check(hvd_built("mpi") == 1, "hvd_built(\"mpi\") in an MPI build");
    if (r == NULL) {
        check(rank == 0 && size == 1 && hvd_local_rank() == 0 &&
                  hvd_local_size() == 1,
              "a job of one");
        return;
    }
    check(rank == atoi(r) && size == atoi(getenv("OMPI_COMM_WORLD_SIZE")),
          "rank and size");
    check(hvd_local_rank() == atoi(lr) && hvd_local_size() == atoi(ls),
          "local rank and size");
    check(hvd_cross_rank() == 0 && hvd_cross_size() == 1,
          "cross rank and size on one host");
    check(strcmp(hvd_transport(), "mpi") == 0, "the mpi transport");
}

/*
 * The last rank submits half a second after the others, whose background
 * threads wait in MPI meanwhile; then the first rank does, while the
 * others' threads sleep between looks for bells. Both calls must complete
 * soon after the last submission.
 */
static void test_late(void)
{
    float x = 1;
    char what[96];
    for (int late = size - 1, k = 0; k < 2; late = 0, k++) {
        if (rank == late)
            usleep(500 * 1000);
        double t = now();
        int rc = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM,
                               k ? "late.first" : "late.last");
        t = now() - t;
        snprintf(what, sizeof(what), "late rank %d: %.1f ms", late, t * 1e3);
        check(rc == 0 && (rank != late || t < 0.2), what);
        if (rank == late)
            printf("mpicheck: rank %d: joined late, waited %.2f ms\n", rank,
                   t * 1e3);
    }
    check(x == (float)size * (float)size, "late result");
}

static int run_checks(void)
{
    rank = hvd_rank();
    size = hvd_size();
    test_place();
    test_semantics();
    test_late();
    return hvd_shutdown();
}

/* The program initialized MPI: libhvd must use it, and leave it up. */
static int preinit(int argc, char **argv)
{
    int level = 0, fin = 1, one = 1, sum = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    if (hvd_init() != 0) {
        printf("mpicheck: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    check(run_checks() == 0, "hvd_shutdown");
    MPI_Finalized(&fin);
    check(!fin, "MPI is still up after hvd_shutdown");
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == size, "the program's own MPI_Allreduce");
    MPI_Finalize();
    return 0;
}

/* MPI_Init gives MPI_THREAD_SINGLE: libhvd's thread may not call MPI. */
static int single(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = hvd_init();
    check(rc == HVD_ENOTSUP && strstr(hvd_last_error(), "MPI_THREAD_MULTIPLE"),
          "hvd_init refuses MPI_THREAD_SINGLE");
    if (rc == 0)
        hvd_shutdown();
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "preinit") == 0)
        preinit(argc, argv);
    else if (strcmp(mode, "single") == 0)
        single(argc, argv);
    else {
        if (hvd_init() != 0) {
            printf("mpicheck: hvd_init failed: %s\n", hvd_last_error());
            return 2;
        }
        check(run_checks() == 0, "hvd_shutdown");
        /* MPI, finalized by hvd_shutdown, cannot start again. */
        int rc = hvd_init();
        check(rc == HVD_ENOTSUP && strstr(hvd_last_error(), "finalized"),
              "a second hvd_init is refused");
        if (rc == 0)
            hvd_shutdown();
    }
    printf("mpicheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    return failures ? 1 : 0;
}
