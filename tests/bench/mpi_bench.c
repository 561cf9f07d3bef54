/* mpi_bench: the same table as hvd_bench, measured on MPI's collectives. */
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "bench_common.h"

static int init(int *argc, char ***argv)
{
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS)
        return rc;
    /* Report failures as codes, as libhvd does, instead of aborting. */
    return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static void finalize(void)
{
    MPI_Finalize();
}

static int rank(void)
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static int size(void)
{
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

static const char *unsupported(enum bench_coll coll, enum bench_dtype dt,
                               enum bench_op op)
{
    (void)coll;
    (void)op;
    if (dt == BENCH_FLOAT16 || dt == BENCH_BFLOAT16)
        return "MPI has no float16 or bfloat16 datatype";
    return NULL;
}

static MPI_Datatype to_dtype(enum bench_dtype dt)
{
    switch (dt) {
    case BENCH_UINT8:
        return MPI_UINT8_T;
    case BENCH_INT8:
        return MPI_INT8_T;
    case BENCH_INT32:
        return MPI_INT32_T;
    case BENCH_INT64:
        return MPI_INT64_T;
    case BENCH_FLOAT32:
        return MPI_FLOAT;
    case BENCH_FLOAT64:
        return MPI_DOUBLE;
    default:
        return MPI_DATATYPE_NULL;
    }
}

static MPI_Op to_op(enum bench_op op)
{
    switch (op) {
    case BENCH_SUM:
    case BENCH_AVERAGE:
        return MPI_SUM;
    case BENCH_MIN:
        return MPI_MIN;
    case BENCH_MAX:
        return MPI_MAX;
    case BENCH_PRODUCT:
        return MPI_PROD;
    default:
        return MPI_OP_NULL;
    }
}

static int barrier(void)
{
    return MPI_Barrier(MPI_COMM_WORLD);
}

/* Divides in place by n, as libhvd's average does after its sum. */
#define DIVIDE(T)                                                              \
    for (size_t i = 0; i < count; i++)                                         \
    ((T *)buf)[i] = (T)(((T *)buf)[i] / (T)n)

static void divide(void *buf, size_t count, enum bench_dtype dt, int n)
{
    switch (dt) {
    case BENCH_UINT8:
        for (size_t i = 0; i < count; i++)
            ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / n);
        break;
    case BENCH_INT8:
        for (size_t i = 0; i < count; i++)
            ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] / n);
        break;
    case BENCH_INT32:
        DIVIDE(int32_t);
        break;
    case BENCH_INT64:
        DIVIDE(int64_t);
        break;
    case BENCH_FLOAT32:
        DIVIDE(float);
        break;
    case BENCH_FLOAT64:
        DIVIDE(double);
        break;
    default:
        break;
    }
}

/*
 * MPI has no average; Horovod's MPI path sums and then scales, so this
 * does the same and the division is part of the time, as it is in libhvd.
 */
static int allreduce(const void *send, void *recv, size_t count,
                     enum bench_dtype dt, enum bench_op op)
{
    if (count > INT32_MAX)
        return MPI_ERR_COUNT;
    int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                           to_dtype(dt), to_op(op), MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && op == BENCH_AVERAGE)
        divide(recv, count, dt, size());
    return rc;
}

static int broadcast(void *buf, size_t count, enum bench_dtype dt, int root)
{
    if (count > INT32_MAX)
        return MPI_ERR_COUNT;
    return MPI_Bcast(buf, (int)count, to_dtype(dt), root, MPI_COMM_WORLD);
}

static int allgather(const void *send, size_t count, enum bench_dtype dt,
                     void *recv, void **out)
{
    if (count > INT32_MAX)
        return MPI_ERR_COUNT;
    *out = recv;
    return MPI_Allgather(send, (int)count, to_dtype(dt), recv, (int)count,
                         to_dtype(dt), MPI_COMM_WORLD);
}

static void release(void *out)
{
    (void)out;
}

static const char *error(int rc)
{
    static char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", rc);
    return msg;
}

int main(int argc, char **argv)
{
    static const struct bench_backend be = {
        .prog = "mpi_bench",
        .library = "MPI",
        .init = init,
        .finalize = finalize,
        .rank = rank,
        .size = size,
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
