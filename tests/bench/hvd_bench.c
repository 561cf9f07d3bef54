/* hvd_bench: libhvd's collectives timed in the table format of nccl-tests. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "hvd.h"

/* hvd_allgather fills one count per rank; sized once hvd_init is done. */
static size_t *g_counts;
/* libhvd's codes are negative, so a positive one is the bench's own. */
#define EBADCOUNTS 1
static size_t g_expect_count;

static int init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* One collective at a time: a negotiation cycle should start at once,
     * not wait to batch more (HOROVOD_CYCLE_TIME, 1 ms by default, is a
     * batching window for training steps). The environment still wins. */
    setenv("HOROVOD_CYCLE_TIME", "0", 0);
    int rc = hvd_init();
    if (rc != 0)
        return rc;
    g_counts = calloc((size_t)hvd_size(), sizeof(*g_counts));
    return g_counts ? 0 : HVD_ENOMEM;
}

static void finalize(void)
{
    free(g_counts);
    g_counts = NULL;
    hvd_shutdown();
}

static const char *unsupported(enum bench_coll coll, enum bench_dtype dt,
                               enum bench_op op)
{
    (void)coll;
    (void)dt;
    (void)op;
    return NULL;
}

/* The bench's enums follow hvd.h's order, but say so rather than assume. */
static hvd_dtype to_dtype(enum bench_dtype dt)
{
    static const hvd_dtype map[BENCH_NDTYPES] = {
        HVD_UINT8,   HVD_INT8,     HVD_INT32,   HVD_INT64,
        HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64};
    return map[dt];
}

static hvd_op to_op(enum bench_op op)
{
    static const hvd_op map[BENCH_NOPS] = {HVD_SUM, HVD_AVERAGE, HVD_MIN,
                                           HVD_MAX, HVD_PRODUCT};
    return map[op];
}

static int barrier(void)
{
    return hvd_barrier();
}

static int allreduce(const void *send, void *recv, size_t count,
                     enum bench_dtype dt, enum bench_op op)
{
    return hvd_allreduce(send, recv, count, to_dtype(dt), to_op(op),
                         "bench.allreduce");
}

static int broadcast(void *buf, size_t count, enum bench_dtype dt, int root)
{
    return hvd_broadcast(buf, count, to_dtype(dt), root, "bench.broadcast");
}

/*
 * libhvd allocates the gathered result itself, so recv is unused and the
 * malloc and free of the result are part of what is timed, as they are for
 * a caller of the API.
 */
static int allgather(const void *send, size_t count, enum bench_dtype dt,
                     void *recv, void **out)
{
    (void)recv;
    int rc = hvd_allgather(send, count, to_dtype(dt), out, g_counts,
                           "bench.allgather");
    if (rc != 0)
        return rc;
    /* Wrong counts would make the element check read out of bounds. */
    g_expect_count = count;
    for (int r = 0; r < hvd_size(); r++)
        if (g_counts[r] != count) {
            free(*out);
            *out = NULL;
            return EBADCOUNTS;
        }
    return 0;
}

static void release(void *out)
{
    free(out);
}

static const char *error(int rc)
{
    const char *last = hvd_last_error();
    static char msg[512];
    if (rc == EBADCOUNTS)
        snprintf(msg, sizeof(msg),
                 "hvd_allgather returned counts other than %zu per rank",
                 g_expect_count);
    else
        snprintf(msg, sizeof(msg), "%s (%s)",
                 last && last[0] ? last : hvd_strerror(rc), hvd_err_name(rc));
    return msg;
}

int main(int argc, char **argv)
{
    static const struct bench_backend be = {
        .prog = "hvd_bench",
        .library = "libhvd",
        .init = init,
        .finalize = finalize,
        .rank = hvd_rank,
        .size = hvd_size,
        .unsupported = unsupported,
        .barrier = barrier,
        .allreduce = allreduce,
        .broadcast = broadcast,
        .allgather = allgather,
        .release = release,
        .error = error,
    };
    return bench_main(argc, argv, &be);
}
