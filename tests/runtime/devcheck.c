/* Checks collectives on device buffers through libhvd's test double of
 * CUDA (HVD_TEST_FAKE_GPU=1): its "device" memory is mapped without
 * access, so any host access by the runtime crashes, and results can only
 * come back through the staging path. Run under horovodrun or alone;
 * exits 1 on a wrong result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/gpu/gpu.h"
#include "hvd.h"
#include "worker/kernels/reduce.h"

static int rank, size, failures, checks;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        printf("devcheck: rank %d: FAILED %s: %s\n", rank, what,
               hvd_last_error());
    }
}

/* Device memory holding n bytes of host. */
static void *upload(const void *host, size_t n)
{
    char err[256];
    void *d = hvd__gpu_fake_alloc(n);
    if (d == NULL || hvd__gpu_copy(d, host, n, 0, err, sizeof(err)) != 0) {
        printf("devcheck: cannot make fake device memory\n");
        exit(2);
    }
    return d;
}

static void download(void *host, const void *dev, size_t n)
{
    char err[256];
    if (hvd__gpu_copy(host, dev, n, 0, err, sizeof(err)) != 0)
        exit(2);
}

static void test_allreduce_f32(size_t n)
{
    float *in = malloc(n * 4 + 4), *got = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(rank + 1) * (float)(i % 97);
    void *d = upload(in, n * 4), *o = hvd__gpu_fake_alloc(n * 4);
    int rc = hvd_allreduce(d, o, n, HVD_FLOAT32, HVD_SUM, "f32");
    download(got, o, n * 4);
    int ok = rc == 0;
    float ranks = (float)size * (float)(size + 1) / 2;
    for (size_t i = 0; ok && i < n; i++)
        ok = got[i] == ranks * (float)(i % 97);
    check(ok, "allreduce float32 sum");
    free(in);
    free(got);
}

static void test_allreduce_f16_average(size_t n)
{
    uint16_t *in = malloc(n * 2 + 2), *got = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++)
        in[i] = hvd__f32_to_f16((float)(2 * rank + (int)(i % 5)));
    void *d = upload(in, n * 2);
    int rc = hvd_allreduce(d, d, n, HVD_FLOAT16, HVD_AVERAGE, "f16");
    download(got, d, n * 2);
    int ok = rc == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = hvd__f16_to_f32(got[i]) == (float)(size - 1) + (float)(i % 5);
    check(ok, "allreduce float16 average in place");
    free(in);
    free(got);
}

/* Several small tensors at once: fused on the host after staging. */
static void test_grouped(void)
{
    enum { N = 5, COUNT = 33 };
    int32_t in[N][COUNT], got[COUNT];
    const void *sends[N];
    void *recvs[N];
    size_t counts[N];
    for (int t = 0; t < N; t++) {
        for (int i = 0; i < COUNT; i++)
            in[t][i] = rank * 100 + t * 10 + i;
        sends[t] = upload(in[t], sizeof(in[t]));
        recvs[t] = hvd__gpu_fake_alloc(sizeof(in[t]));
        counts[t] = COUNT;
    }
    int rc = hvd_grouped_allreduce(sends, recvs, counts, N, HVD_INT32, HVD_MAX,
                                   "grouped");
    int ok = rc == 0;
    for (int t = 0; ok && t < N; t++) {
        download(got, recvs[t], sizeof(got));
        for (int i = 0; ok && i < COUNT; i++)
            ok = got[i] == (size - 1) * 100 + t * 10 + i;
    }
    check(ok, "grouped allreduce int32 max");
}

static void test_broadcast(int root, size_t n)
{
    int64_t *buf = malloc(n * 8 + 8);
    for (size_t i = 0; i < n; i++)
        buf[i] = rank == root ? (int64_t)(i * 7 + (size_t)root) : -1;
    void *d = upload(buf, n * 8);
    int rc = hvd_broadcast(d, n, HVD_INT64, root, "bcast");
    download(buf, d, n * 8);
    int ok = rc == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = buf[i] == (int64_t)(i * 7 + (size_t)root);
    check(ok, "broadcast int64");
    free(buf);
}

static void test_allgather(void)
{
    size_t mine = 3 + (size_t)rank, total = 0;
    double in[16], *got;
    size_t *counts = calloc((size_t)size, sizeof(*counts));
    void *out = NULL;
    for (size_t i = 0; i < mine; i++)
        in[i] = rank * 10.0 + (double)i;
    void *d = upload(in, mine * 8);
    int rc = hvd_allgather(d, mine, HVD_FLOAT64, &out, counts, "gather");
    int ok = rc == 0 && out != NULL;
    for (int r = 0; ok && r < size; r++) {
        ok = counts[r] == 3 + (size_t)r;
        total += counts[r];
    }
    /* The result is device memory too: only a copy can read it. */
    int dev = -1;
    ok = ok && hvd__gpu_is_device(out, &dev) == 1;
    got = malloc(total * 8 + 8);
    if (ok)
        download(got, out, total * 8);
    for (int r = 0, k = 0; ok && r < size; r++)
        for (size_t i = 0; ok && i < counts[r]; i++, k++)
            ok = got[k] == r * 10.0 + (double)i;
    check(ok, "allgather float64 into device memory");
    free(got);
    free(counts);
}

/* 2 rows per rank and one more on rank 0: each gets its own rows summed. */
static void test_reducescatter(void)
{
    size_t R = 2 * (size_t)size + 1, row = 3, n = R * row;
    size_t first = rank == 0 ? 0 : (2 * (size_t)rank + 1) * row;
    size_t mine = (rank == 0 ? 3 : 2) * row;
    float *in = malloc(n * 4), got[9];
    for (size_t i = 0; i < n; i++)
        in[i] = (float)i + (float)rank;
    void *d = upload(in, n * 4), *o = hvd__gpu_fake_alloc(mine * 4);
    int rc = hvd_reducescatter(d, o, n, row, HVD_FLOAT32, HVD_SUM, "rs", NULL);
    int ok = rc == 0;
    if (ok)
        download(got, o, mine * 4);
    float ranks = (float)size * (float)(size - 1) / 2;
    for (size_t i = 0; ok && i < mine; i++)
        ok = got[i] == (float)(first + i) * (float)size + ranks;
    check(ok, "reducescatter float32 on device memory");
    free(in);
}

/* Rank r sends r + 1 elements to each rank. */
static void test_alltoall(void)
{
    size_t *sc = calloc((size_t)size, sizeof(*sc));
    size_t *counts = calloc((size_t)size, sizeof(*counts)), total = 0;
    void *out = NULL;
    for (int j = 0; j < size; j++) {
        sc[j] = 1 + (size_t)rank;
        total += sc[j];
    }
    double *in = malloc(total * 8);
    for (size_t k = 0; k < total; k++)
        in[k] = rank * 100.0 + (double)(k / sc[0]);
    void *d = upload(in, total * 8);
    int rc = hvd_alltoall(d, sc, HVD_FLOAT64, &out, counts, "a2a");
    int ok = rc == 0 && out != NULL, dev = -1;
    size_t got_n = 0;
    for (int r = 0; ok && r < size; r++) {
        ok = counts[r] == 1 + (size_t)r;
        got_n += counts[r];
    }
    ok = ok && hvd__gpu_is_device(out, &dev) == 1;
    double *got = malloc(got_n * 8 + 8);
    if (ok)
        download(got, out, got_n * 8);
    for (int r = 0, k = 0; ok && r < size; r++)
        for (size_t i = 0; ok && i < counts[r]; i++, k++)
            ok = got[k] == r * 100.0 + (double)rank;
    check(ok, "alltoall float64 into device memory");
    free(got);
    free(in);
    free(sc);
    free(counts);
}

/* A tensor that the caller's stream has yet to write when the call is
 * made (the double's stream runs its writes only when libhvd waits for
 * the event): the collective must read what the stream leaves, without
 * the caller synchronizing; and with the stream off again, the stale
 * bytes that are there at the call. */
static void test_stream_ordering(void)
{
    float zeros[64] = {0}, mine[64], got[64];
    for (int i = 0; i < 64; i++)
        mine[i] = (float)(rank + 1) * (float)i;
    void *stream = hvd__gpu_fake_stream();
    void *d = upload(zeros, sizeof(zeros));
    hvd__gpu_fake_stream_write(stream, d, mine, sizeof(mine));
    hvd_use_cuda_stream(1, stream);
    hvd_handle h;
    int rc =
        hvd_allreduce_async(d, d, 64, HVD_FLOAT32, HVD_SUM, "streamed", &h);
    if (rc == 0)
        rc = hvd_wait(h);
    download(got, d, sizeof(got));
    int ok = rc == 0;
    float ranks = (float)size * (float)(size + 1) / 2;
    for (int i = 0; ok && i < 64; i++)
        ok = got[i] == ranks * (float)i;
    check(ok, "device buffers read after the stream's queued writes");
    hvd_use_cuda_stream(0, NULL);
    void *e = upload(zeros, sizeof(zeros));
    hvd__gpu_fake_stream_write(stream, e, mine, sizeof(mine));
    rc = hvd_allreduce(e, e, 64, HVD_FLOAT32, HVD_SUM, "unstreamed");
    download(got, e, sizeof(got));
    check(rc == 0 && got[63] == 0, "without a stream, the bytes at the call");
    hvd__gpu_fake_stream_free(stream);
}

/* Host and device buffers in one call are refused at once. */
static void test_mixed_buffers(void)
{
    float host[4] = {0};
    void *d = hvd__gpu_fake_alloc(sizeof(host));
    int rc = hvd_allreduce(d, host, 4, HVD_FLOAT32, HVD_SUM, "mixed");
    check(rc == HVD_EINVAL &&
              strstr(hvd_last_error(), "both be host memory or both") != NULL,
          "mixed host and device buffers refused");
}

/* One rank's device tensor against another's host tensor of one name. */
static void test_memory_mismatch(void)
{
    float host[4] = {1, 2, 3, 4};
    void *buf = rank == 0 ? upload(host, sizeof(host)) : (void *)host;
    int rc = hvd_allreduce(buf, buf, 4, HVD_FLOAT32, HVD_SUM, "where");
    check(size == 1 ? rc == 0 : rc == HVD_EMISMATCH, "memory mismatch");
    if (rc == HVD_EMISMATCH)
        printf("devcheck: rank %d: %s\n", rank, hvd_last_error());
}

int main(void)
{
    if (hvd_init() != 0) {
        printf("devcheck: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    rank = hvd_rank();
    size = hvd_size();
    printf("devcheck: rank %d: hvd_device %d\n", rank, hvd_device());
    test_allreduce_f32(7);
    test_allreduce_f32((1u << 20) + 3);
    test_allreduce_f16_average(1001);
    test_grouped();
    for (int root = 0; root < size; root++)
        test_broadcast(root, 4099);
    test_allgather();
    test_reducescatter();
    test_alltoall();
    test_stream_ordering();
    test_mixed_buffers();
    test_memory_mismatch();
    printf("devcheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    hvd_shutdown();
    return failures ? 1 : 0;
}
