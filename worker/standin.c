/* Stand-ins for collectives a rank must take part in without data. */
#include "worker/standin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ctx.h"
#include "worker/gpu/gpu.h"
#include "worker/kernels/reduce.h"

/* What a stand-in owns (its request's standin). */
struct hvd_standin {
    void *gathered; /* an allgather's or alltoall's result */
    size_t *counts; /* its counts */
    uint8_t *host;  /* input, then output */
    void *dev;      /* the same on the device */
};

struct hvd_work *hvd__standin_new(struct hvd_ctx *c, const struct hvd_req *q,
                                  char *err, size_t errlen)
{
    struct hvd_request *op = calloc(1, sizeof(*op) + sizeof(op->parts[0]));
    struct hvd_standin *s = calloc(1, sizeof(*s));
    size_t es = hvd_dtype_size((hvd_dtype)q->dtype);
    /* Sends nothing of its own to gather, and a broadcast's or a
     * reduction's count to add or receive. */
    int gathers = q->kind == HVD_REQ_ALLGATHER || q->kind == HVD_REQ_ALLTOALL;
    size_t bytes = gathers ? 0 : (size_t)q->count * es;
    if (op == NULL || s == NULL ||
        (s->counts = calloc((size_t)c->size, sizeof(size_t))) == NULL ||
        (s->host = malloc(2 * bytes + 1)) == NULL)
        goto nomem;
    struct hvd_work *w = &op->parts[0];
    op->nparts = 1;
    op->left = 1;
    op->standin = s;
    w->op = op;
    w->kind = (enum hvd_op_kind)q->kind;
    w->dtype = (hvd_dtype)q->dtype;
    w->op_kind = (hvd_op)q->op;
    w->root = q->root;
    w->pset = q->pset;
    w->count = gathers ? 0 : (size_t)q->count;
    w->row = q->row;
    w->shape = q->shape;
    w->compress = q->compress;
    w->prescale = q->prescale;
    w->postscale = q->postscale;
    w->gathered = &s->gathered;
    w->counts = s->counts;
    snprintf(w->name, sizeof(w->name), "%s", q->name);
    /* A compressed tensor is float32 until it is narrowed. */
    hvd__identity(s->host, w->count, w->dtype, w->op_kind);
    w->sendbuf = s->host;
    w->recvbuf = s->host + bytes;
    if (q->device) {
        /* Where the others run on device buffers (NCCL), so must it. */
        w->device = 1;
        w->device_id = hvd__gpu_device(c);
        if (hvd__gpu_alloc(&s->dev, 2 * bytes + 1, w->device_id, err, errlen) !=
                0 ||
            hvd__gpu_copy(s->dev, s->host, bytes, w->device_id, err, errlen) !=
                0) {
            hvd__standin_done(w);
            return NULL;
        }
        w->sendbuf = s->dev;
        w->recvbuf = (uint8_t *)s->dev + bytes;
    }
    return w;
nomem:
    snprintf(err, errlen, "out of memory");
    if (s)
        free(s->counts);
    free(s);
    free(op);
    return NULL;
}

int hvd__standin_done(struct hvd_work *w)
{
    struct hvd_standin *s = w->op->standin;
    if (s == NULL)
        return 0;
    if (w->device) {
        hvd__gpu_free(s->gathered);
        hvd__gpu_free(s->dev);
    } else {
        free(s->gathered);
    }
    free(s->counts);
    free(s->host);
    free(s);
    free(w->op);
    return 1;
}
