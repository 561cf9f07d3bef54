/* The CUDA runtime's side of gpu.h, and the table of CUDA builds without
 * NCCL, whose collectives on device buffers are staged (CUDA builds only). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "common/hvd_err.h"
#include "worker/gpu/gpu.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_count;

static void count_devices(void)
{
    if (cudaGetDeviceCount(&g_count) != cudaSuccess) {
        cudaGetLastError();
        g_count = 0;
    }
}

int hvd__cuda_count(void)
{
    pthread_once(&g_once, count_devices);
    return g_count;
}

int hvd__cuda_is_device(const void *p, int *device)
{
    struct cudaPointerAttributes a;
    /* Without a device (or a driver) no pointer is device memory, and
     * asking CUDA each time costs tens of microseconds a call. */
    if (hvd__cuda_count() == 0)
        return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        /* No driver, no device, or a pointer CUDA never saw: host. */
        cudaGetLastError();
        return 0;
    }
    /* Managed memory is reachable from the host: treat it as host. */
    if (a.type != cudaMemoryTypeDevice)
        return 0;
    *device = a.device;
    return 1;
}

int hvd__cuda_copy(void *dst, const void *src, size_t n, int device, char *err,
                   size_t errlen)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "cudaMemcpy of %zu bytes on device %d: %s", n, device,
             cudaGetErrorString(e));
    return HVD_ESYS;
}

int hvd__cuda_alloc(void **p, size_t n, int device, char *err, size_t errlen)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc(p, n ? n : 1);
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "cudaMalloc of %zu bytes on device %d: %s", n, device,
             cudaGetErrorString(e));
    return HVD_ENOMEM;
}

void hvd__cuda_free(void *p)
{
    cudaFree(p);
}

int hvd__cuda_mark(void *stream, int device, void **mark, char *err,
                   size_t errlen)
{
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventRecord(ev, (cudaStream_t)stream);
    if (e == cudaSuccess) {
        *mark = ev;
        return 0;
    }
    if (ev)
        cudaEventDestroy(ev);
    snprintf(err, errlen, "cudaEventRecord on device %d: %s", device,
             cudaGetErrorString(e));
    return HVD_ESYS;
}

int hvd__cuda_wait_mark(void *mark, char *err, size_t errlen)
{
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)mark);
    cudaEventDestroy((cudaEvent_t)mark);
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "cudaEventSynchronize: %s", cudaGetErrorString(e));
    return HVD_ESYS;
}

const struct hvd_gpu hvd__gpu_cuda = {
    .is_device = hvd__cuda_is_device,
    .copy = hvd__cuda_copy,
    .alloc = hvd__cuda_alloc,
    .free = hvd__cuda_free,
    .count = hvd__cuda_count,
    .mark = hvd__cuda_mark,
    .wait_mark = hvd__cuda_wait_mark,
    .staged_why = "this libhvd was built without NCCL",
};
