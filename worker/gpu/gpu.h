/* CUDA device memory as libhvd sees it: which pointers are device memory,
 * copies to and from it, allocations, and how collectives on it run; each
 * way of answering (none, the test double, CUDA staged through host
 * memory, CUDA with NCCL) is one table, chosen once. */
#ifndef HVD_GPU_H
#define HVD_GPU_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_work;

/* One device path. The memory entries are called only with what the
 * hvd__gpu_* wrappers below let through. */
struct hvd_gpu {
    int (*is_device)(const void *p, int *device);
    int (*copy)(void *dst, const void *src, size_t n, int device, char *err,
                size_t errlen);
    int (*alloc)(void **p, size_t n, int device, char *err, size_t errlen);
    void (*free)(void *p);
    int (*count)(void);
    /* Marks what stream (a cudaStream_t) has queued on device so far: an
     * event recorded on it, for wait_mark. NULL: no streams. */
    int (*mark)(void *stream, int device, void **mark, char *err,
                size_t errlen);
    /* Waits until the work a mark covers has run, then frees the mark. */
    int (*wait_mark)(void *mark, char *err, size_t errlen);
    /* Whether exec runs this negotiated operation on the device (the same
     * answer on every rank). NULL: never; device buffers are staged
     * through host memory, and a notice says why (staged_why). */
    int (*can)(const struct hvd_work *w);
    int (*exec)(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                size_t errlen);
    const char *staged_why; /* when can is NULL or says no */
    /* Frees what exec made (NULL: nothing), at shutdown. */
    void (*close)(struct hvd_ctx *c);
};

/* The table of this process: the test double when HVD_TEST_FAKE_GPU=1,
 * else this build's (gpu.c chooses it at the first call). */
const struct hvd_gpu *hvd__gpu(void);
/* CUDA builds: the CUDA runtime's answers, staged collectives
 * (gpu_cuda.c); NCCL builds: the same answers and NCCL collectives
 * (gpu_nccl.c). */
extern const struct hvd_gpu hvd__gpu_cuda;
extern const struct hvd_gpu hvd__gpu_nccl;

/* 1 when p is CUDA device memory (*device gets its device), else 0. */
int hvd__gpu_is_device(const void *p, int *device);
/* Copies n bytes between host and device memory (either direction, as
 * the pointers say), synchronously. 0 or HVD_ESYS with err filled. */
int hvd__gpu_copy(void *dst, const void *src, size_t n, int device, char *err,
                  size_t errlen);
/* n bytes of device memory on device; HVD_ENOMEM with err filled. */
int hvd__gpu_alloc(void **p, size_t n, int device, char *err, size_t errlen);
/* Frees what hvd__gpu_alloc allocated (NULL: nothing). */
void hvd__gpu_free(void *p);
/* Marks stream's queued work (see the table); *mark stays NULL when the
 * path has no streams. */
int hvd__gpu_mark(void *stream, int device, void **mark, char *err,
                  size_t errlen);
/* Waits for *mark (if any) and frees it; *mark becomes NULL. */
int hvd__gpu_wait_mark(void **mark, char *err, size_t errlen);
/* Visible CUDA devices (0 without CUDA or a GPU; the test double does not
 * change it). */
int hvd__gpu_count(void);
/* The CUDA device c's rank should use, as hvd_device() documents it: 0
 * when horovodrun pinned the rank to one GPU (CUDA_VISIBLE_DEVICES lists
 * one), else its local rank modulo the visible devices (the local rank
 * when there are none). */
int hvd__gpu_device(const struct hvd_ctx *c);

/* The test double's device memory: mapped without any access, so that a
 * host access to it crashes; only hvd__gpu_copy reaches its bytes. */
void *hvd__gpu_fake_alloc(size_t n);
/* The double's streams: writes queued on one run only when a mark of the
 * stream is waited for, as a kernel runs only when the GPU gets to it. */
void *hvd__gpu_fake_stream(void);
/* Queues a copy of n bytes from host memory src to the double's device
 * memory dev on stream (up to 16 at a time). */
void hvd__gpu_fake_stream_write(void *stream, void *dev, const void *src,
                                size_t n);
void hvd__gpu_fake_stream_free(void *stream);

/* NCCL_VERSION_CODE of the NCCL this library was built with (gpu_nccl.c,
 * in NCCL builds only). */
int hvd__nccl_version(void);

/* The CUDA runtime's answers (gpu_cuda.c, in CUDA builds only). */
int hvd__cuda_is_device(const void *p, int *device);
int hvd__cuda_copy(void *dst, const void *src, size_t n, int device, char *err,
                   size_t errlen);
int hvd__cuda_alloc(void **p, size_t n, int device, char *err, size_t errlen);
void hvd__cuda_free(void *p);
int hvd__cuda_count(void);
int hvd__cuda_mark(void *stream, int device, void **mark, char *err,
                   size_t errlen);
int hvd__cuda_wait_mark(void *mark, char *err, size_t errlen);

#endif
