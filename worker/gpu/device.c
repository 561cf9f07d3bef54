/* Operations on CUDA device buffers: on the device path's own collectives
 * (NCCL) where it has them and the operation suits them, otherwise staged
 * through host memory and run on the host transports. */
#include "worker/gpu/device.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/exec.h"
#include "worker/fusion.h"
#include "worker/gpu/gpu.h"

int hvd__device_classify(struct hvd_work *w, char *err, size_t errlen)
{
    int sdev = 0, rdev = 0;
    int s = hvd__gpu_is_device(w->sendbuf, &sdev), r = s;
    if (w->recvbuf != w->sendbuf)
        r = hvd__gpu_is_device(w->recvbuf, &rdev);
    else
        rdev = sdev;
    if (w->sendbuf && w->recvbuf && (s != r || sdev != rdev)) {
        snprintf(err, errlen,
                 "the send and receive buffers must both be host memory or "
                 "both on one CUDA device");
        return HVD_EINVAL;
    }
    w->device = s || r;
    w->device_id = s ? sdev : rdev;
    return 0;
}

/* Why device buffers take the host path, said once per process. */
static void notice(const struct hvd_ctx *c, const char *why)
{
    static atomic_int said;
    if (atomic_exchange(&said, 1) == 0)
        fprintf(stderr,
                "hvd: notice: rank %d: CUDA device buffers are staged "
                "through host memory (%s); collectives on them are slower\n",
                c->rank, why);
}

/* Copies a part's device input to host memory and points it there. */
static int stage_in(struct hvd_ctx *c, struct hvd_work *w, char *err,
                    size_t errlen)
{
    size_t es = hvd_dtype_size(w->dtype), bytes = w->count * es, out = 0;
    int rc = 0;
    w->dev_sendbuf = w->sendbuf;
    w->dev_recvbuf = w->recvbuf;
    /* A reducescatter's rows arrive after its input. */
    if (w->kind == HVD_OP_REDUCESCATTER)
        out = hvd__exec_mine(w) * es;
    if ((w->host = malloc(bytes + out + 1)) == NULL)
        return HVD_ENOMEM;
    switch (w->kind) {
    case HVD_OP_ALLREDUCE:
        rc = hvd__gpu_copy(w->host, w->sendbuf, bytes, w->device_id, err,
                           errlen);
        w->sendbuf = w->recvbuf = w->host;
        break;
    case HVD_OP_BROADCAST:
        if (c->rank == w->root)
            rc = hvd__gpu_copy(w->host, w->recvbuf, bytes, w->device_id, err,
                               errlen);
        w->recvbuf = w->host;
        break;
    case HVD_OP_REDUCESCATTER:
        rc = hvd__gpu_copy(w->host, w->sendbuf, bytes, w->device_id, err,
                           errlen);
        w->sendbuf = w->host;
        w->recvbuf = w->host + bytes;
        break;
    default: /* allgather, alltoall */
        rc = hvd__gpu_copy(w->host, w->sendbuf, bytes, w->device_id, err,
                           errlen);
        w->sendbuf = w->host;
        break;
    }
    return rc;
}

/* Puts the result where the caller wants it (for allgather and alltoall,
 * in new device memory) and frees the staging copy. */
static int stage_out(struct hvd_ctx *c, struct hvd_work *w, int ok, char *err,
                     size_t errlen)
{
    size_t es = hvd_dtype_size(w->dtype), bytes = w->count * es;
    int rc = 0;
    if (ok && w->kind == HVD_OP_ALLREDUCE)
        rc = hvd__gpu_copy(w->dev_recvbuf, w->host, bytes, w->device_id, err,
                           errlen);
    else if (ok && w->kind == HVD_OP_BROADCAST && c->rank != w->root)
        rc = hvd__gpu_copy(w->dev_recvbuf, w->host, bytes, w->device_id, err,
                           errlen);
    else if (ok && w->kind == HVD_OP_REDUCESCATTER)
        rc = hvd__gpu_copy(w->dev_recvbuf, w->recvbuf, hvd__exec_mine(w) * es,
                           w->device_id, err, errlen);
    else if (ok &&
             (w->kind == HVD_OP_ALLGATHER || w->kind == HVD_OP_ALLTOALL) &&
             *w->gathered) {
        size_t total = 0;
        void *dev = NULL;
        for (int r = 0; r < w->set_size; r++)
            total += w->counts[r] * es;
        rc = hvd__gpu_alloc(&dev, total, w->device_id, err, errlen);
        if (rc == 0 && (rc = hvd__gpu_copy(dev, *w->gathered, total,
                                           w->device_id, err, errlen)) != 0) {
            hvd__gpu_free(dev);
            dev = NULL;
        }
        free(*w->gathered);
        *w->gathered = dev;
    }
    w->sendbuf = w->dev_sendbuf;
    w->recvbuf = w->dev_recvbuf;
    free(w->host);
    w->host = NULL;
    return rc;
}

static int staged(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                  size_t errlen)
{
    int rc = 0, in = 0;
    for (; in < n && rc == 0; in++)
        rc = stage_in(c, ws[in], err, errlen);
    if (rc == 0) {
        rc = n > 1 ? hvd__fused_allreduce(c, ws, n, err, errlen)
                   : hvd__exec(c, ws[0]);
        if (rc && n == 1)
            snprintf(err, errlen, "%s", ws[0]->err);
    }
    for (int i = 0; i < in; i++) {
        int out = stage_out(c, ws[i], rc == 0, err, errlen);
        if (rc == 0)
            rc = out;
    }
    return rc;
}

int hvd__device_exec(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                     size_t errlen)
{
    const struct hvd_gpu *g = hvd__gpu();
    int rc = 0;
    /* The callers' streams first: each buffer as its stream left it. */
    for (int i = 0; i < n; i++) {
        int w = hvd__gpu_wait_mark(&ws[i]->mark, err, errlen);
        if (rc == 0)
            rc = w;
    }
    if (rc)
        return rc;
    if (c->force_staging) {
        notice(c, HVD_ENV_FORCE_GPU_STAGING " is set");
        return staged(c, ws, n, err, errlen);
    }
    /* NCCL's communicator holds every rank: a process set's collective
     * runs on the host transport, where the others stand in. */
    if (ws[0]->pset != 0 || ws[0]->op_kind == HVD_ADASUM)
        return staged(c, ws, n, err, errlen);
    if (g->can != NULL && g->can(ws[0]))
        return g->exec(c, ws, n, err, errlen);
    notice(c, g->staged_why);
    return staged(c, ws, n, err, errlen);
}

void hvd__device_close(struct hvd_ctx *c)
{
    const struct hvd_gpu *g = hvd__gpu();
    if (g->close != NULL)
        g->close(c);
}
