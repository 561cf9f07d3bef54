/* hvd_bench: libhvd's collectives timed in the table format of nccl-tests. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "hvd.h"
#include "hvd_build.h"

#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* hvd_allgather fills one count per rank; sized once hvd_init is done. */
static size_t *g_counts;
/* libhvd's codes are negative, so a positive one is the bench's own. */
#define EBADCOUNTS 1
static size_t g_expect_count;
#if HVD_HAVE_CUDA
/* Set by -G: buffers, allgather's result too, are CUDA device memory. */
static int g_device;
#endif

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

/* Gives back allgather's result: host memory, or device memory with -G. */
static void release(void *out)
{
#if HVD_HAVE_CUDA
    if (g_device) {
        cudaFree(out);
        return;
    }
#endif
    free(out);
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
            release(*out);
            *out = NULL;
            return EBADCOUNTS;
        }
    return 0;
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

#if HVD_HAVE_CUDA
/*
 * -G: the CUDA runtime's side of the driver's device buffers. libhvd finds
 * out by itself that a pointer is device memory; all the bench does is
 * allocate, fill and read back.
 */
static const char *cuda_failed(const char *call, cudaError_t e)
{
    static char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s (%s)", call, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return msg;
}

/* This rank's device, as libhvd says (0 under horovodrun's pinning). */
static const char *dev_open(void)
{
    static char msg[256];
    int n = 0, device = hvd_device();
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return cuda_failed("cudaGetDeviceCount", e);
    if (n == 0)
        return "cudaGetDeviceCount found no device";
    if (device < 0) {
        snprintf(msg, sizeof(msg), "hvd_device: %s", hvd_strerror(device));
        return msg;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        return cuda_failed("cudaSetDevice", e);
    g_device = 1;
    return NULL;
}

static const char *dev_alloc(void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    return e == cudaSuccess ? NULL : cuda_failed("cudaMalloc", e);
}

static void dev_free(void *p)
{
    cudaFree(p);
}

static const char *dev_copy(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    return e == cudaSuccess ? NULL : cuda_failed("cudaMemcpy", e);
}

/* cudaMemset may return before it is done: wait, as libhvd requires. */
static const char *dev_fill(void *p, int byte, size_t bytes)
{
    cudaError_t e = cudaMemset(p, byte, bytes);
    if (e != cudaSuccess)
        return cuda_failed("cudaMemset", e);
    e = cudaDeviceSynchronize();
    return e == cudaSuccess ? NULL : cuda_failed("cudaDeviceSynchronize", e);
}

static const struct bench_device device = {
    .open = dev_open,
    .alloc = dev_alloc,
    .free = dev_free,
    .copy = dev_copy,
    .fill = dev_fill,
};
#define DEVICE (&device)
#else
/* Without CUDA the driver refuses -G with a message. */
#define DEVICE NULL
#endif

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
        .device = DEVICE,
    };
    return bench_main(argc, argv, &be);
}
