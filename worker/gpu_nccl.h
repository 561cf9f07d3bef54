/* NCCL collectives on CUDA device buffers (NCCL builds only). */
#ifndef HVD_GPU_NCCL_H
#define HVD_GPU_NCCL_H

#include "ctx.h"

/* Whether NCCL runs this operation (the same answer on every rank: it
 * depends only on what was negotiated). */
int hvd__nccl_can(const struct hvd_work *w);
/* Runs one operation, or n fused allreduces, on the device. */
int hvd__nccl_exec(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                   size_t errlen);
/* Destroys the communicator (at shutdown). */
void hvd__nccl_close(struct hvd_ctx *c);

#endif
