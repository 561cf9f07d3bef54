/* Checks libhvd's collectives on CUDA device buffers against the host. */
/*
 * Run under horovodrun (any -np; with one GPU and several ranks, set
 * HVD_FORCE_GPU_STAGING=1, since NCCL refuses two ranks on one GPU). Each
 * rank fills device buffers with small integers, so that every order of
 * summation gives the exact result, runs the collectives on them, copies
 * the results back and compares them with what the host computes. Prints
 * "gpucheck: rank R of N: K checks, F failures" and exits 1 on a failure;
 * with no GPU it prints "gpucheck: SKIP: no CUDA device (reason)" and exits
 * 77, the code test harnesses read as skipped. "gpucheck --probe" only
 * looks for a device (exit 0 or 77), without joining a job.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "hvd.h"
#include "hvd_build.h"

static int rank, size, checks, failures;

/* Any failing CUDA call ends the run, naming the call and where it was. */
static void cuda_check(cudaError_t e, const char *call, const char *file,
                       int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "gpucheck: rank %d: %s failed at %s:%d: %s (%s)\n", rank,
            call, file, line, cudaGetErrorString(e), cudaGetErrorName(e));
    exit(1);
}
#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

/* A failing libhvd call too: the other ranks would only wait for us. */
static void hvd_check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    const char *detail = hvd_last_error();
    fprintf(stderr, "gpucheck: rank %d: %s failed: %s (%s)\n", rank, what,
            detail[0] != '\0' ? detail : hvd_strerror(rc), hvd_err_name(rc));
    exit(1);
}

/* Exits 77 with the SKIP line unless a CUDA device is visible. */
static void require_gpu(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return;
    printf("gpucheck: SKIP: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e)
                            : "cudaGetDeviceCount found none");
    exit(77);
}

/* Element i on rank r: an integer in [-11, 11], exact in every type. */
__host__ __device__ static int value_on_device(int r, size_t i)
{
    return (int)((i * 7 + (size_t)r * 13) % 23) - 11;
}

static int value(int r, size_t i)
{
    return value_on_device(r, i);
}

/* IEEE binary16 bits of a small integer (|v| <= 2048: exact). */
static uint16_t f16_from_int(int v)
{
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000u : 0;
    unsigned m = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    while ((m >> e) > 1)
        e++;
    /* m = 1.f * 2^e: the exponent biased by 15, ten fraction bits. */
    unsigned frac = (m << (10 - e)) & 0x3ffu;
    return (uint16_t)(sign | (unsigned)(e + 15) << 10 | frac);
}

/* The value of binary16 bits (normal numbers and zero suffice here). */
static float f16_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    unsigned frac = h & 0x3ffu;
    float v = e == 0 ? ldexpf((float)frac, -24)
                     : ldexpf((float)(frac | 0x400u), e - 25);
    if (e == 31)
        v = frac ? NAN : INFINITY;
    return h & 0x8000u ? -v : v;
}

/* Counts one check, and its failure with the first wrong element. */
static void report(const char *what, size_t n, size_t wrong, size_t first,
                   double got, double want)
{
    checks++;
    if (wrong == 0)
        return;
    failures++;
    fprintf(stderr,
            "gpucheck: rank %d: %s of %zu elements: %zu wrong, the first at "
            "%zu: got %.9g, want %.9g\n",
            rank, what, n, wrong, first, got, want);
}

/* Device memory for n elements of es bytes, filled with all-ones bytes
 * (NaN in every float type), so that an untouched result shows. */
static void *dev_poisoned(size_t n, size_t es)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, n * es > 0 ? n * es : 1));
    CUDA_CHECK(cudaMemset(p, 0xff, n * es));
    CUDA_CHECK(cudaDeviceSynchronize());
    return p;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "gpucheck: rank %d: out of memory\n", rank);
        exit(1);
    }
    return p;
}

/* float32 sum (out of place) and average (in place) of n elements. */
static void check_float32(size_t n)
{
    float *host = (float *)xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        host[i] = (float)value(rank, i);
    float *send = (float *)dev_poisoned(n, sizeof(float));
    float *recv = (float *)dev_poisoned(n, sizeof(float));
    CUDA_CHECK(
        cudaMemcpy(send, host, n * sizeof(float), cudaMemcpyHostToDevice));
    hvd_check(hvd_allreduce(send, recv, n, HVD_FLOAT32, HVD_SUM, "gpu.f32.sum"),
              "float32 sum allreduce");
    CUDA_CHECK(
        cudaMemcpy(host, recv, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < size; r++)
            s += value(r, i);
        if (host[i] != (float)s && wrong++ == 0)
            first = i, got = host[i], want = s;
    }
    report("float32 sum allreduce", n, wrong, first, got, want);

    /*
     * Average in place. The exact mean of the integers is the reference;
     * a few units in the last place are allowed, because NCCL may scale
     * each input by 1/size before summing instead of dividing once.
     */
    hvd_check(
        hvd_allreduce(send, send, n, HVD_FLOAT32, HVD_AVERAGE, "gpu.f32.avg"),
        "float32 average allreduce");
    CUDA_CHECK(
        cudaMemcpy(host, send, n * sizeof(float), cudaMemcpyDeviceToHost));
    wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < size; r++)
            s += value(r, i);
        double m = s / size;
        if (!(fabs(host[i] - m) <= 4 * FLT_EPSILON * fmax(1.0, fabs(m))) &&
            wrong++ == 0)
            first = i, got = host[i], want = m;
    }
    report("float32 average allreduce (in place)", n, wrong, first, got, want);
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    free(host);
}

/* float16 sum: libhvd accumulates in float32; integers stay exact. */
static void check_float16(size_t n)
{
    uint16_t *host = (uint16_t *)xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++)
        host[i] = f16_from_int(value(rank, i));
    uint16_t *send = (uint16_t *)dev_poisoned(n, sizeof(uint16_t));
    uint16_t *recv = (uint16_t *)dev_poisoned(n, sizeof(uint16_t));
    CUDA_CHECK(
        cudaMemcpy(send, host, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    hvd_check(hvd_allreduce(send, recv, n, HVD_FLOAT16, HVD_SUM, "gpu.f16.sum"),
              "float16 sum allreduce");
    CUDA_CHECK(
        cudaMemcpy(host, recv, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        int s = 0;
        for (int r = 0; r < size; r++)
            s += value(r, i);
        /* Compared as values: a sum of zero may come out as -0. */
        if (f16_to_float(host[i]) != (float)s && wrong++ == 0)
            first = i, got = f16_to_float(host[i]), want = s;
    }
    report("float16 sum allreduce", n, wrong, first, got, want);
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    free(host);
}

/* int32 max, with values far from zero so that no narrower type would do. */
static void check_int32_max(size_t n)
{
    int32_t *host = (int32_t *)xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        host[i] = value(rank, i) * 100000 + rank;
    int32_t *send = (int32_t *)dev_poisoned(n, sizeof(int32_t));
    int32_t *recv = (int32_t *)dev_poisoned(n, sizeof(int32_t));
    CUDA_CHECK(
        cudaMemcpy(send, host, n * sizeof(int32_t), cudaMemcpyHostToDevice));
    hvd_check(hvd_allreduce(send, recv, n, HVD_INT32, HVD_MAX, "gpu.i32.max"),
              "int32 max allreduce");
    CUDA_CHECK(
        cudaMemcpy(host, recv, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t m = INT32_MIN;
        for (int r = 0; r < size; r++) {
            int32_t v = value(r, i) * 100000 + r;
            m = v > m ? v : m;
        }
        if (host[i] != m && wrong++ == 0)
            first = i, got = host[i], want = m;
    }
    report("int32 max allreduce", n, wrong, first, got, want);
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    free(host);
}

/* float32 broadcast from the last rank, over poisoned buffers elsewhere. */
static void check_broadcast(size_t n)
{
    int root = size - 1;
    float *host = (float *)xmalloc(n * sizeof(float));
    float *buf = (float *)dev_poisoned(n, sizeof(float));
    if (rank == root) {
        for (size_t i = 0; i < n; i++)
            host[i] = (float)value(root, i) + 0.25f;
        CUDA_CHECK(
            cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    hvd_check(hvd_broadcast(buf, n, HVD_FLOAT32, root, "gpu.f32.bcast"),
              "float32 broadcast");
    CUDA_CHECK(
        cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        float w = (float)value(root, i) + 0.25f;
        if (host[i] != w && wrong++ == 0)
            first = i, got = host[i], want = w;
    }
    report("float32 broadcast", n, wrong, first, got, want);
    CUDA_CHECK(cudaFree(buf));
    free(host);
}

/*
 * float32 allgather of n + rank elements from each rank: the result must
 * be device memory (freed with cudaFree) holding every rank's elements in
 * rank order, and counts must say how many each gave.
 */
static void check_allgather(size_t n)
{
    size_t mine = n + (size_t)rank;
    float *host = (float *)xmalloc(mine * sizeof(float));
    for (size_t i = 0; i < mine; i++)
        host[i] = (float)value(rank, i) - 0.5f;
    float *send = (float *)dev_poisoned(mine, sizeof(float));
    CUDA_CHECK(
        cudaMemcpy(send, host, mine * sizeof(float), cudaMemcpyHostToDevice));
    free(host);
    size_t *counts = (size_t *)xmalloc((size_t)size * sizeof(size_t));
    void *out = NULL;
    hvd_check(
        hvd_allgather(send, mine, HVD_FLOAT32, &out, counts, "gpu.f32.gather"),
        "float32 allgather");

    size_t total = 0, bad_counts = 0, first = 0;
    for (int r = 0; r < size; r++) {
        total += n + (size_t)r;
        if (counts[r] != n + (size_t)r && bad_counts++ == 0)
            first = (size_t)r;
    }
    report("allgather counts (per rank)", (size_t)size, bad_counts, first,
           bad_counts ? (double)counts[first] : 0, (double)(n + first));

    /* The result must be device memory, as hvd.h promises. */
    struct cudaPointerAttributes a;
    int on_device = out != NULL &&
                    cudaPointerGetAttributes(&a, out) == cudaSuccess &&
                    a.type == cudaMemoryTypeDevice;
    cudaGetLastError(); /* a host pointer is no error to remember */
    report("allgather result in device memory", 1, !on_device, 0, on_device, 1);

    if (on_device && bad_counts == 0) {
        float *got = (float *)xmalloc(total * sizeof(float));
        CUDA_CHECK(cudaMemcpy(got, out, total * sizeof(float),
                              cudaMemcpyDeviceToHost));
        size_t wrong = 0, k = 0, at = 0;
        double g = 0, w = 0;
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < n + (size_t)r; i++, k++) {
                float want = (float)value(r, i) - 0.5f;
                if (got[k] != want && wrong++ == 0)
                    at = k, g = got[k], w = want;
            }
        report("float32 allgather", total, wrong, at, g, w);
        free(got);
    }
    if (on_device)
        CUDA_CHECK(cudaFree(out));
    else
        free(out);
    free(counts);
    CUDA_CHECK(cudaFree(send));
}

/*
 * Several asynchronous float32 sums in flight at once, as a training step
 * issues them (libhvd may fuse them into one device buffer).
 */
static void check_async(void)
{
    enum { T = 4 };
    static const size_t sizes[T] = {3, 4096, 65536 + 1, 17};
    static const char *const names[T] = {"gpu.async.0", "gpu.async.1",
                                         "gpu.async.2", "gpu.async.3"};
    float *bufs[T];
    hvd_handle h[T];
    for (int t = 0; t < T; t++) {
        float *host = (float *)xmalloc(sizes[t] * sizeof(float));
        for (size_t i = 0; i < sizes[t]; i++)
            host[i] = (float)value(rank, i + (size_t)t);
        bufs[t] = (float *)dev_poisoned(sizes[t], sizeof(float));
        CUDA_CHECK(cudaMemcpy(bufs[t], host, sizes[t] * sizeof(float),
                              cudaMemcpyHostToDevice));
        free(host);
    }
    for (int t = 0; t < T; t++)
        hvd_check(hvd_allreduce_async(bufs[t], bufs[t], sizes[t], HVD_FLOAT32,
                                      HVD_SUM, names[t], &h[t]),
                  "async float32 sum allreduce");
    for (int t = 0; t < T; t++)
        hvd_check(hvd_wait(h[t]), "waiting for an async allreduce");
    for (int t = 0; t < T; t++) {
        float *host = (float *)xmalloc(sizes[t] * sizeof(float));
        CUDA_CHECK(cudaMemcpy(host, bufs[t], sizes[t] * sizeof(float),
                              cudaMemcpyDeviceToHost));
        size_t wrong = 0, first = 0;
        double got = 0, want = 0;
        for (size_t i = 0; i < sizes[t]; i++) {
            double s = 0;
            for (int r = 0; r < size; r++)
                s += value(r, i + (size_t)t);
            if (host[i] != (float)s && wrong++ == 0)
                first = i, got = host[i], want = s;
        }
        report(names[t], sizes[t], wrong, first, got, want);
        free(host);
        CUDA_CHECK(cudaFree(bufs[t]));
    }
}

/* Spins for about ms milliseconds on the GPU, then writes n values. */
__global__ static void late_fill(float *p, size_t n, int r, long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles)
        ;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        p[i] = (float)value_on_device(r, i);
}

/*
 * The stream hand-off: a kernel that writes the input late, queued on a
 * stream of this program's, and the allreduce submitted at once, with
 * the stream named and not synchronized. Only if libhvd waits for the
 * event it records on the stream does it read the kernel's values.
 */
static void check_stream(size_t n)
{
    cudaStream_t st;
    int khz = 0;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    float *buf = (float *)dev_poisoned(n, sizeof(float));
    late_fill<<<1, 256, 0, st>>>(buf, n, rank, (long long)khz * 50);
    CUDA_CHECK(cudaGetLastError());
    hvd_check(hvd_use_cuda_stream(1, st), "hvd_use_cuda_stream");
    hvd_handle h;
    hvd_check(hvd_allreduce_async(buf, buf, n, HVD_FLOAT32, HVD_SUM,
                                  "gpu.stream", &h),
              "allreduce after a stream's kernel");
    hvd_check(hvd_wait(h), "waiting for it");
    hvd_check(hvd_use_cuda_stream(0, NULL), "hvd_use_cuda_stream off");
    float *host = (float *)xmalloc(n * sizeof(float));
    CUDA_CHECK(
        cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < size; r++)
            sum += value(r, i);
        if (host[i] != (float)sum && wrong++ == 0)
            first = i, got = host[i], want = sum;
    }
    report("allreduce ordered after a stream's late kernel", n, wrong, first,
           got, want);
    free(host);
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaStreamDestroy(st));
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
        require_gpu();
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: horovodrun -np N gpucheck | gpucheck "
                        "--probe\n");
        return 2;
    }
    require_gpu();
    hvd_check(hvd_init(), "hvd_init");
    rank = hvd_rank();
    size = hvd_size();
    int device = hvd_device();
    hvd_check(device, "hvd_device");
    CUDA_CHECK(cudaSetDevice(device));
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    const char *staging = getenv("HVD_FORCE_GPU_STAGING");
    printf("gpucheck: rank %d of %d: CUDA device %d (%s), "
           "CUDA_VISIBLE_DEVICES=%s, HVD_FORCE_GPU_STAGING=%s, libhvd built "
           "with NCCL: %s\n",
           rank, size, device, prop.name, visible ? visible : "(unset)",
           staging ? staging : "(unset)", HVD_HAVE_NCCL ? "yes" : "no");

    /* One element, an odd small size, and a large one that the
     * transports split into chunks. */
    static const size_t sizes[] = {1, 1000, ((size_t)1 << 22) + 3};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        check_float32(sizes[s]);
        check_float16(sizes[s]);
        check_int32_max(sizes[s]);
        check_broadcast(sizes[s]);
        check_allgather(sizes[s]);
    }
    check_async();
    check_stream(100003);

    printf("gpucheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    hvd_check(hvd_shutdown(), "hvd_shutdown");
    return failures ? 1 : 0;
}
