/* The CUDA runtime's side of gpu.h (CUDA builds only). */
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "common/hvd_err.h"
#include "gpu.h"

int hvd__cuda_is_device(const void *p, int *device)
{
    struct cudaPointerAttributes a;
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

int hvd__cuda_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}
