/* Tensor fusion: ready allreduces of one dtype and op packed into one
 * buffer and reduced together. */
#ifndef HVD_FUSION_H
#define HVD_FUSION_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_work;

/* Runs n ready allreduces of one dtype and op as fused collectives. */
int hvd__fused_allreduce(struct hvd_ctx *c, struct hvd_work **ws, int n,
                         char *err, size_t errlen);

#endif
