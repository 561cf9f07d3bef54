/* Small allreduces carried with the negotiation (eager.h). */
#include "eager.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "coll.h"
#include "ctx.h"
#include "kernels/reduce.h"
#include "negotiate.h"
#include "transport/transport.h"

/* Whether the transport folds small tensors in rank order, as
 * hvd__eager_run does, so that a tensor has the same bits whether it
 * travelled or not: the TCP ring and shared memory, not the hierarchical
 * transport (host by host) or MPI (its own order). */
static int folds_in_rank_order(const struct hvd_ctx *c)
{
    return strcmp(c->tp->name, "ring") == 0 || strcmp(c->tp->name, "shm") == 0;
}

static size_t bytes_of_work(const struct hvd_work *w)
{
    return w->count * hvd_dtype_size(w->dtype);
}

void hvd__eager_note(struct hvd_ctx *c, struct hvd_work *w,
                     const struct hvd_req *q)
{
    size_t bytes = bytes_of_work(w);
    if (c->neager == HVD_EAGER_MAX || w->kind != HVD_OP_ALLREDUCE ||
        w->op->standin || w->device || w->compress || w->pset != 0 ||
        w->prescale != 1 || w->postscale != 1 || bytes == 0 ||
        bytes > HVD_EAGER_MAX_BYTES ||
        !hvd__coll_kernels_take(c, w->dtype, w->op_kind) ||
        !folds_in_rank_order(c))
        return;
    /* The section must leave room in the negotiation's first pass for the
     * requests (exec.c's GATHER_BLOCK). */
    size_t total = 4 + 4 + bytes;
    for (int i = 0; i < c->neager; i++)
        total += 4 + bytes_of_work(c->eager[i].w);
    if (total > HVD_EAGER_BUDGET)
        return;
    /* Only a request all ranks cached before has an id they all know. */
    int32_t id = hvd__neg_cache_id(&c->neg, q);
    if (id < 0)
        return;
    c->eager[c->neager].w = w;
    c->eager[c->neager++].id = id;
}

void hvd__eager_forget(struct hvd_ctx *c, const struct hvd_work *w)
{
    for (int i = 0; i < c->neager; i++)
        if (c->eager[i].w == w) {
            c->eager[i] = c->eager[--c->neager];
            return;
        }
}

static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int hvd__eager_encode(struct hvd_ctx *c, const uint8_t *reqs, size_t reqlen,
                      uint8_t **out, size_t *len)
{
    size_t n = 4;
    for (int i = 0; i < c->neager; i++)
        n += 4 + bytes_of_work(c->eager[i].w);
    uint8_t *p = malloc(n + reqlen);
    if (p == NULL)
        return HVD_ENOMEM;
    size_t off = 4;
    for (int i = 0; i < c->neager; i++) {
        const struct hvd_work *w = c->eager[i].w;
        put_u32(p + off, (uint32_t)c->eager[i].id);
        memcpy(p + off + 4, w->sendbuf, bytes_of_work(w));
        off += 4 + bytes_of_work(w);
    }
    put_u32(p, (uint32_t)(n - 4));
    if (reqlen > 0)
        memcpy(p + n, reqs, reqlen);
    *out = p;
    *len = n + reqlen;
    return 0;
}

/* The bytes of cached request id's data, 0 when it cannot travel. */
static size_t bytes_of(const struct hvd_neg *t, uint32_t id)
{
    if (id >= t->ncache)
        return 0;
    const struct hvd_req *q = &t->cache[id];
    size_t b = q->count * hvd_dtype_size((hvd_dtype)q->dtype);
    return b <= HVD_EAGER_MAX_BYTES ? b : 0;
}

int hvd__eager_decode(const struct hvd_ctx *c, struct hvd_eager_in *in,
                      const uint8_t **msgs, size_t *lens)
{
    int n = c->size;
    /* Kept from cycle to cycle: a rank's ids and data count up to its
     * count. */
    if (in->count == NULL) {
        in->count = malloc((size_t)n);
        in->ids = malloc((size_t)n * sizeof(*in->ids));
        in->data = malloc((size_t)n * sizeof(*in->data));
        if (in->count == NULL || in->ids == NULL || in->data == NULL) {
            hvd__eager_free(in);
            return HVD_ENOMEM;
        }
    }
    memset(in->count, 0, (size_t)n);
    for (int r = 0; r < n; r++) {
        if (lens[r] < 4 || get_u32(msgs[r]) > lens[r] - 4)
            return HVD_EPROTO;
        size_t sec = get_u32(msgs[r]), off = 0;
        const uint8_t *p = msgs[r] + 4;
        while (off < sec) {
            if (sec - off < 4 || in->count[r] == HVD_EAGER_MAX)
                return HVD_EPROTO;
            uint32_t id = get_u32(p + off);
            size_t b = bytes_of(&c->neg, id);
            if (b == 0 || b > sec - off - 4)
                return HVD_EPROTO;
            in->ids[r][in->count[r]] = (int32_t)id;
            in->data[r][in->count[r]++] = p + off + 4;
            off += 4 + b;
        }
        msgs[r] += 4 + sec;
        lens[r] -= 4 + sec;
    }
    return 0;
}

void hvd__eager_free(struct hvd_eager_in *in)
{
    free(in->count);
    free(in->ids);
    free(in->data);
    memset(in, 0, sizeof(*in));
}

/* Where rank r carried id's data, or NULL. */
static const uint8_t *carried(const struct hvd_eager_in *in, int r, int32_t id)
{
    for (int k = 0; k < in->count[r]; k++)
        if (in->ids[r][k] == id)
            return in->data[r][k];
    return NULL;
}

int hvd__eager_ready(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                     const struct hvd_resp *r)
{
    /* Rank 0 carried nothing: the usual case for large tensors, at the
     * cost of no lookup. */
    if (r->error || r->req.kind != HVD_REQ_ALLREDUCE || r->req.pset != 0 ||
        in->count == NULL || in->count[0] == 0)
        return 0;
    int32_t id = hvd__neg_cache_id(&c->neg, &r->req);
    if (id < 0)
        return 0;
    for (int k = 0; k < c->size; k++)
        if (carried(in, k, id) == NULL)
            return 0;
    return 1;
}

void hvd__eager_run(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                    const struct hvd_resp *r, struct hvd_work *w)
{
    /* Room for the widest accumulator: float16 widens to float32. */
    _Alignas(8) uint8_t acc[2 * HVD_EAGER_MAX_BYTES];
    _Alignas(8) uint8_t wide[2 * HVD_EAGER_MAX_BYTES];
    int32_t id = hvd__neg_cache_id(&c->neg, &r->req);
    hvd_dtype acc_dt = hvd__acc_dtype(w->dtype);
    size_t bytes = bytes_of_work(w);
    /* In rank order, as the TCP ring folds small tensors: the same bits
     * on every rank. The messages' data need not be aligned: copied
     * first, widened in place. */
    memcpy(acc, carried(in, 0, id), bytes);
    hvd__widen(acc, acc, w->count, w->dtype);
    for (int k = 1; k < c->size; k++) {
        memcpy(wide, carried(in, k, id), bytes);
        hvd__widen(wide, wide, w->count, w->dtype);
        hvd__reduce(acc, wide, w->count, acc_dt, w->op_kind);
    }
    hvd__finish(w->recvbuf, acc, w->count, w->dtype, w->op_kind, c->size);
}
