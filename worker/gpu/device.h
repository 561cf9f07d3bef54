/* Operations on CUDA device buffers: NCCL, or staged through host memory
 * (the GPU paths are in gpu.h). */
#ifndef HVD_DEVICE_H
#define HVD_DEVICE_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_work;

/* Sets w->device when w's buffers are CUDA device memory; HVD_EINVAL when
 * one is and the other is not. */
int hvd__device_classify(struct hvd_work *w, char *err, size_t errlen);
/* Runs one negotiated operation, or n fused allreduces, on device buffers:
 * NCCL, or staged through host memory. */
int hvd__device_exec(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                     size_t errlen);
/* Frees what the device paths made (the NCCL communicator). */
void hvd__device_close(struct hvd_ctx *c);

#endif
