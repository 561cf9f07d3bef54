/* Small allreduces carried with the negotiation (eager.h). */
#include "worker/eager.h"

#include <stdlib.h>
#include <string.h>

#include "worker/buf.h"
#include "common/hvd_err.h"
#include "worker/coll.h"
#include "worker/ctx.h"
#include "worker/kernels/reduce.h"
#include "worker/negotiate.h"
#include "worker/transport/transport.h"

/* Whether hvd__eager_run folds small tensors in the transport's order, so
 * that a tensor has the same bits whether it travelled or not: the TCP
 * ring and shared memory fold in rank order, the hierarchical transport
 * host by host (fold below); MPI has an order of its own. */
static int folds_like_transport(const struct hvd_ctx *c)
{
    return c->tp == &hvd__transport_ring || c->tp == &hvd__transport_shm ||
           c->tp == &hvd__transport_hier;
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
        !folds_like_transport(c))
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
        hvd__put_u32(p + off, (uint32_t)c->eager[i].id);
        memcpy(p + off + 4, w->sendbuf, bytes_of_work(w));
        off += 4 + bytes_of_work(w);
    }
    hvd__put_u32(p, (uint32_t)(n - 4));
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

/* Reads rank r's section (msg, len) into row r of in; 0 or HVD_EPROTO. */
static int read_section(const struct hvd_ctx *c, struct hvd_eager_in *in, int r,
                        const uint8_t *msg, size_t len)
{
    if (len < 4 || hvd__get_u32(msg) > len - 4)
        return HVD_EPROTO;
    size_t sec = hvd__get_u32(msg), off = 0;
    const uint8_t *p = msg + 4;
    while (off < sec) {
        if (sec - off < 4 || in->count[r] == HVD_EAGER_MAX)
            return HVD_EPROTO;
        uint32_t id = hvd__get_u32(p + off);
        size_t b = bytes_of(&c->neg, id);
        if (b == 0 || b > sec - off - 4)
            return HVD_EPROTO;
        in->ids[r][in->count[r]] = (int32_t)id;
        in->data[r][in->count[r]++] = p + off + 4;
        off += 4 + b;
    }
    return 0;
}

/* Readies in's tables, kept from cycle to cycle (a rank's ids and data
 * count up to its count), for a new cycle: nothing carried yet. */
static int rows(const struct hvd_ctx *c, struct hvd_eager_in *in)
{
    size_t n = (size_t)c->size;
    if (in->count == NULL) {
        in->count = malloc(n);
        in->ids = malloc(n * sizeof(*in->ids));
        in->data = malloc(n * sizeof(*in->data));
        if (in->count == NULL || in->ids == NULL || in->data == NULL) {
            hvd__eager_free(in);
            return HVD_ENOMEM;
        }
    }
    memset(in->count, 0, n);
    in->same = in->folded = 0;
    return 0;
}

/* Whether rank r's message is rank 0's (already read) but for the data:
 * the same length, section length, ids and requests. Rank 0's reading
 * then holds for rank r too, at the same offsets. */
static int like_first(const struct hvd_eager_in *in, const uint8_t **msgs,
                      const size_t *lens, int r)
{
    if (lens[r] != lens[0] || memcmp(msgs[r], msgs[0], 4) != 0)
        return 0;
    for (int k = 0; k < in->count[0]; k++) {
        size_t at = (size_t)(in->data[0][k] - msgs[0]) - 4;
        if (memcmp(msgs[r] + at, msgs[0] + at, 4) != 0)
            return 0;
    }
    size_t reqs = 4 + hvd__get_u32(msgs[0]);
    return memcmp(msgs[r] + reqs, msgs[0] + reqs, lens[0] - reqs) == 0;
}

int hvd__eager_decode(const struct hvd_ctx *c, struct hvd_eager_in *in,
                      const uint8_t **msgs, size_t *lens)
{
    int n = c->size, rc = rows(c, in);
    if (rc || (rc = read_section(c, in, 0, msgs[0], lens[0])) != 0)
        return rc;
    /* The steady state: every rank sends the same tensors and the same
     * requests, so one reading serves all, and a rank's cost per other
     * rank is a comparison. */
    int r = 1;
    while (r < n && like_first(in, msgs, lens, r))
        r++;
    in->same = r == n;
    for (r = 1; r < n; r++) {
        if (!in->same) {
            if ((rc = read_section(c, in, r, msgs[r], lens[r])) != 0)
                return rc;
            continue;
        }
        in->count[r] = in->count[0];
        for (int k = 0; k < in->count[0]; k++) {
            in->ids[r][k] = in->ids[0][k];
            in->data[r][k] = msgs[r] + (in->data[0][k] - msgs[0]);
        }
    }
    for (r = 0; r < n; r++) {
        size_t sec = 4 + hvd__get_u32(msgs[r]);
        msgs[r] += sec;
        lens[r] -= sec;
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
    if (in->same)
        return carried(in, 0, id) != NULL;
    for (int k = 0; k < c->size; k++)
        if (carried(in, k, id) == NULL)
            return 0;
    return 1;
}

/* The bytes of cached request id's accumulator. */
static size_t acc_bytes_of(const struct hvd_neg *t, uint32_t id)
{
    const struct hvd_req *q = &t->cache[id];
    return q->count * hvd_dtype_size(hvd__acc_dtype((hvd_dtype)q->dtype));
}

/* Folds the data of id that ranks lo .. hi-1 carried into acc (its
 * accumulator type), in rank order, as the TCP ring and shared memory fold
 * small tensors. The messages' data need not be aligned: copied first,
 * widened in place. */
static void fold_ranks(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                       int32_t id, int lo, int hi, uint8_t *acc)
{
    _Alignas(8) uint8_t wide[2 * HVD_EAGER_MAX_BYTES];
    const struct hvd_req *q = &c->neg.cache[id];
    hvd_dtype dt = (hvd_dtype)q->dtype, acc_dt = hvd__acc_dtype(dt);
    size_t bytes = q->count * hvd_dtype_size(dt);
    memcpy(acc, carried(in, lo, id), bytes);
    hvd__widen(acc, acc, q->count, dt);
    for (int k = lo + 1; k < hi; k++) {
        memcpy(wide, carried(in, k, id), bytes);
        hvd__widen(wide, wide, q->count, dt);
        hvd__reduce(acc, wide, q->count, acc_dt, (hvd_op)q->op);
    }
}

/* Folds every rank's data of id into acc in the transport's order: the
 * same bits on every rank, and the bits the transport would give. The
 * hierarchical transport folds each host's ranks in rank order (its ranks
 * are contiguous, hvd__topo_choose), then the hosts' sums in host order,
 * as its ring of leaders folds small tensors. */
static void fold(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                 int32_t id, uint8_t *acc)
{
    if (c->tp != &hvd__transport_hier) {
        fold_ranks(c, in, id, 0, c->size, acc);
        return;
    }
    const struct hvd_topo *t = &c->topo;
    _Alignas(8) uint8_t host[2 * HVD_EAGER_MAX_BYTES];
    const struct hvd_req *q = &c->neg.cache[id];
    hvd_dtype acc_dt = hvd__acc_dtype((hvd_dtype)q->dtype);
    for (int h = 0; h < t->nhosts; h++) {
        fold_ranks(c, in, id, t->first[h], t->first[h] + t->count[h],
                   h == 0 ? acc : host);
        if (h > 0)
            hvd__reduce(acc, host, q->count, acc_dt, (hvd_op)q->op);
    }
}

void hvd__eager_run(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                    const struct hvd_resp *r, struct hvd_work *w)
{
    /* Room for the widest accumulator: float16 widens to float32. */
    _Alignas(8) uint8_t acc[2 * HVD_EAGER_MAX_BYTES];
    int32_t id = hvd__neg_cache_id(&c->neg, &r->req);
    if (in->folded)
        memcpy(acc, carried(in, 0, id), acc_bytes_of(&c->neg, (uint32_t)id));
    else
        fold(c, in, id, acc);
    hvd__finish(w->recvbuf, acc, w->count, w->dtype, w->op_kind, c->size);
}

size_t hvd__eager_fold(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                       uint8_t *out)
{
    _Alignas(8) uint8_t acc[2 * HVD_EAGER_MAX_BYTES];
    size_t len = 0;
    for (int k = 0; k < in->count[0]; k++) {
        size_t b = acc_bytes_of(&c->neg, (uint32_t)in->ids[0][k]);
        fold(c, in, in->ids[0][k], acc);
        memcpy(out + len, acc, b);
        len += b;
    }
    return len;
}

int hvd__eager_take_folded(const struct hvd_ctx *c, struct hvd_eager_in *in,
                           const uint8_t **msg, size_t *len, const uint8_t *acc,
                           size_t acclen)
{
    int rc = rows(c, in);
    if (rc || (rc = read_section(c, in, 0, *msg, *len)) != 0)
        return rc;
    size_t off = 0;
    for (int k = 0; k < in->count[0]; k++) {
        size_t b = acc_bytes_of(&c->neg, (uint32_t)in->ids[0][k]);
        if (b > acclen - off)
            return HVD_EPROTO;
        in->data[0][k] = acc + off;
        off += b;
    }
    in->same = in->folded = 1;
    size_t sec = 4 + hvd__get_u32(*msg);
    *msg += sec;
    *len -= sec;
    return 0;
}
