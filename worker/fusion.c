/* Tensor fusion: several ready allreduces of one dtype and op packed into
 * one buffer and reduced together, then unpacked. Packing keeps every
 * element on the path it would take alone, so fused results are the same
 * bits as unfused ones. */
#include "worker/fusion.h"

#include <stdlib.h>
#include <string.h>

#include "worker/buf.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"

/* Small tensors travel whole and are folded in rank order: concatenated,
 * they are folded the same way. */
static int fuse_small(struct hvd_ctx *c, struct hvd_work **ws, int n,
                      size_t total, char *err, size_t errlen)
{
    size_t es = hvd_dtype_size(ws[0]->dtype), off = 0;
    if (hvd__grow(&c->fuse_buf, &c->fuse_cap, total * es))
        return HVD_ENOMEM;
    for (int i = 0; i < n; i++) {
        memcpy(c->fuse_buf + off, ws[i]->sendbuf, ws[i]->count * es);
        off += ws[i]->count * es;
    }
    int rc = hvd__coll_gather_reduce(c, c->fuse_buf, c->fuse_buf, total,
                                     ws[0]->dtype, ws[0]->op_kind, err, errlen);
    off = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        memcpy(ws[i]->recvbuf, c->fuse_buf + off, ws[i]->count * es);
        off += ws[i]->count * es;
    }
    return rc;
}

/* Large tensors are reduce-scattered by segments: segment s of the fused
 * buffer holds segment s of every tensor, so each element is reduced in
 * the same order as without fusion. */
static int fuse_large(struct hvd_ctx *c, struct hvd_work **ws, int n,
                      size_t total, char *err, size_t errlen)
{
    int size = c->size;
    size_t es = hvd_dtype_size(ws[0]->dtype);
    size_t *bounds = calloc((size_t)size + 1, sizeof(*bounds));
    int rc = HVD_ENOMEM;

    if (bounds == NULL || hvd__grow(&c->fuse_buf, &c->fuse_cap, total * es))
        goto out;
    /* Pack: segment by segment, tensor by tensor. */
    size_t off = 0;
    for (int s = 0; s < size; s++) {
        bounds[s] = off / es;
        for (int i = 0; i < n; i++) {
            size_t f = hvd__ring_seg_first(ws[i]->count, size, s);
            size_t l = hvd__ring_seg_first(ws[i]->count, size, s + 1) - f;
            memcpy(c->fuse_buf + off, (const uint8_t *)ws[i]->sendbuf + f * es,
                   l * es);
            off += l * es;
        }
    }
    bounds[size] = total;
    rc = hvd__coll_reduce_segs(c, c->fuse_buf, c->fuse_buf, total, ws[0]->dtype,
                               ws[0]->op_kind, bounds, err, errlen);
    off = 0;
    for (int s = 0; rc == 0 && s < size; s++)
        for (int i = 0; i < n; i++) {
            size_t f = hvd__ring_seg_first(ws[i]->count, size, s);
            size_t l = hvd__ring_seg_first(ws[i]->count, size, s + 1) - f;
            memcpy((uint8_t *)ws[i]->recvbuf + f * es, c->fuse_buf + off,
                   l * es);
            off += l * es;
        }
out:
    free(bounds);
    return rc;
}

int hvd__fused_allreduce(struct hvd_ctx *c, struct hvd_work **ws, int n,
                         char *err, size_t errlen)
{
    struct hvd_work **small = malloc((size_t)n * sizeof(*small));
    struct hvd_work **large = malloc((size_t)n * sizeof(*large));
    size_t nsmall = 0, nlarge = 0, tsmall = 0, tlarge = 0;
    int rc = HVD_ENOMEM;

    if (small == NULL || large == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        if (hvd__ring_is_small(ws[i]->count, ws[i]->dtype)) {
            small[nsmall++] = ws[i];
            tsmall += ws[i]->count;
        } else {
            large[nlarge++] = ws[i];
            tlarge += ws[i]->count;
        }
    }
    hvd__coll_reset_abort(c);
    rc = 0;

    if (nsmall > 0)
        rc = fuse_small(c, small, (int)nsmall, tsmall, err, errlen);
    if (rc == 0 && nlarge > 0)
        rc = fuse_large(c, large, (int)nlarge, tlarge, err, errlen);
out:
    free(small);
    free(large);
    return rc;
}
