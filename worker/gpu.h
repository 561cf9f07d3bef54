/* CUDA device memory as libhvd sees it: which pointers are device memory,
 * copies to and from it, and allocations; answered by the CUDA runtime in
 * a CUDA build, or by a test double (HVD_TEST_FAKE_GPU=1) whose "device"
 * memory the CPU cannot touch. */
#ifndef HVD_GPU_H
#define HVD_GPU_H

#include <stddef.h>

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
/* Visible CUDA devices (0 without CUDA or a GPU). */
int hvd__gpu_count(void);
/* Whether the test double stands in for CUDA. */
int hvd__gpu_fake(void);

/* The test double's device memory: mapped without any access, so that a
 * host access to it crashes; only hvd__gpu_copy reaches its bytes. */
void *hvd__gpu_fake_alloc(size_t n);

/* The CUDA runtime's answers (gpu_cuda.c, in CUDA builds only). */
int hvd__cuda_is_device(const void *p, int *device);
int hvd__cuda_copy(void *dst, const void *src, size_t n, int device, char *err,
                   size_t errlen);
int hvd__cuda_alloc(void **p, size_t n, int device, char *err, size_t errlen);
void hvd__cuda_free(void *p);
int hvd__cuda_count(void);

#endif
