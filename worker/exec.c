/* Runs negotiated host-memory collectives, and negotiation's gathers. */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "ctx.h"
#include "kernels/reduce.h"

int hvd__exec_counts(struct hvd_ctx *c, struct hvd_work *w, size_t *total,
                     char *err, size_t errlen)
{
    size_t es = hvd_dtype_size(w->dtype), n = (size_t)c->size;
    uint64_t *counts = calloc(n, sizeof(*counts));
    size_t *bytes = calloc(n, sizeof(*bytes));
    int rc = HVD_ENOMEM;

    *total = 0;
    if (counts == NULL || bytes == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        bytes[i] = sizeof(uint64_t);
    counts[c->rank] = w->count;
    rc = hvd__coll_allgatherv(c, &counts[c->rank], counts, bytes, err, errlen);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        w->counts[i] = (size_t)counts[i];
        *total += w->counts[i] * es;
    }
out:
    free(counts);
    free(bytes);
    return rc;
}

/* Every rank's count first, then the data straight into the result:
 * unlike negotiation messages, tensors are not worth an extra copy. */
static int do_allgather(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t es = hvd_dtype_size(w->dtype), total = 0, n = (size_t)c->size;
    size_t *bytes = calloc(n, sizeof(*bytes));
    uint8_t *all = NULL;
    int rc = HVD_ENOMEM;

    if (bytes == NULL)
        goto out;
    rc = hvd__exec_counts(c, w, &total, w->err, sizeof(w->err));
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++)
        bytes[i] = w->counts[i] * es;
    if (total > 0 && (all = malloc(total)) == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    rc =
        hvd__coll_allgatherv(c, w->sendbuf, all, bytes, w->err, sizeof(w->err));
out:
    if (rc == 0)
        *w->gathered = all;
    else
        free(all);
    free(bytes);
    return rc;
}

size_t hvd__exec_rows(const struct hvd_work *w, int size, int rank,
                      size_t *first)
{
    size_t rows = w->row ? w->count / w->row : 0;
    size_t lo = hvd__ring_seg_first(rows, size, rank);
    if (first)
        *first = lo * w->row;
    return (hvd__ring_seg_first(rows, size, rank + 1) - lo) * w->row;
}

/* The element bounds of every rank's rows (size+1; malloc). */
static size_t *row_bounds(const struct hvd_ctx *c, const struct hvd_work *w)
{
    size_t *b = malloc(((size_t)c->size + 1) * sizeof(*b));
    for (int r = 0; b && r < c->size; r++)
        hvd__exec_rows(w, c->size, r, &b[r]);
    if (b)
        b[c->size] = w->count;
    return b;
}

/* An allreduce (bounds NULL) or a reducescatter (this rank's elements of
 * bounds) on a copy of the input that is scaled (and, compressed,
 * narrowed to float16); the result is widened back and scaled. */
static int reduce_opts(struct hvd_ctx *c, struct hvd_work *w,
                       const size_t *bounds)
{
    hvd_dtype run = w->compress ? HVD_FLOAT16 : w->dtype;
    size_t n = w->count, rs = hvd_dtype_size(run);
    size_t lo = bounds ? bounds[c->rank] : 0;
    size_t nout = bounds ? bounds[c->rank + 1] - lo : n;
    uint8_t *tmp = malloc(n * rs + (bounds ? nout * rs : 0) + 1), *res = NULL;
    int rc = HVD_ENOMEM;

    if (tmp == NULL)
        goto out;
    res = bounds ? tmp + n * rs : tmp;
    if (w->compress) {
        float *scaled = malloc(n * sizeof(float) + 1);
        if (scaled == NULL)
            goto out;
        if (n > 0)
            memcpy(scaled, w->sendbuf, n * sizeof(float));
        hvd__scale(scaled, n, HVD_FLOAT32, w->prescale);
        /* Narrowing is hvd__finish's job (a plain sum over one rank). */
        hvd__finish(tmp, scaled, n, HVD_FLOAT16, HVD_SUM, 1);
        free(scaled);
    } else if (n > 0) {
        memcpy(tmp, w->sendbuf, n * rs);
        hvd__scale(tmp, n, run, w->prescale);
    }
    rc = bounds ? hvd__coll_reducescatter(c, tmp, res, n, run, w->op_kind,
                                          bounds, w->err, sizeof(w->err))
                : hvd__coll_allreduce(c, tmp, tmp, n, run, w->op_kind, w->err,
                                      sizeof(w->err));
    if (rc)
        goto out;
    if (nout == 0) /* a reducescatter's rank with no rows; recvbuf NULL */
        goto out;
    if (w->compress)
        hvd__widen(w->recvbuf, res, nout, HVD_FLOAT16);
    else
        memcpy(w->recvbuf, res, nout * rs);
    hvd__scale(w->recvbuf, nout, w->dtype, w->postscale);
out:
    free(tmp);
    return rc;
}

/* The allreduce's bits, but only this rank's rows arrive. */
static int do_reducescatter(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t *bounds = row_bounds(c, w);
    int rc = HVD_ENOMEM;
    if (bounds == NULL)
        goto out;
    if (w->compress || w->prescale != 1 || w->postscale != 1)
        rc = reduce_opts(c, w, bounds);
    else
        rc = hvd__coll_reducescatter(c, w->sendbuf, w->recvbuf, w->count,
                                     w->dtype, w->op_kind, bounds, w->err,
                                     sizeof(w->err));
out:
    free(bounds);
    return rc;
}

/* Every rank's send counts first (so that every rank knows the whole
 * matrix), then the data into a new buffer. */
static int do_alltoall(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t es = hvd_dtype_size(w->dtype), n = (size_t)c->size, me = c->rank;
    uint64_t *counts = calloc(n * n, sizeof(*counts));
    size_t *bytes = calloc(n * n, sizeof(*bytes)), total = 0;
    uint8_t *all = NULL;
    int rc = HVD_ENOMEM;

    if (counts == NULL || bytes == NULL)
        goto out;
    for (size_t j = 0; j < n; j++) {
        counts[me * n + j] = w->sendcounts[j];
        bytes[j] = n * sizeof(uint64_t);
    }
    rc = hvd__coll_allgatherv(c, &counts[me * n], counts, bytes, w->err,
                              sizeof(w->err));
    if (rc)
        goto out;
    for (size_t k = 0; k < n * n; k++)
        bytes[k] = (size_t)counts[k] * es;
    for (size_t i = 0; i < n; i++) {
        w->counts[i] = (size_t)counts[i * n + me];
        total += bytes[i * n + me];
    }
    if (total > 0 && (all = malloc(total)) == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    rc = hvd__coll_alltoallv(c, w->sendbuf, all, bytes, w->err, sizeof(w->err));
out:
    if (rc == 0)
        *w->gathered = all;
    else
        free(all);
    free(counts);
    free(bytes);
    return rc;
}

int hvd__exec(struct hvd_ctx *c, struct hvd_work *w)
{
    uint8_t token[1] = {1};
    uint8_t *all;
    size_t *ones;
    int rc;

    hvd__coll_reset_abort(c);
    switch (w->kind) {
    case HVD_OP_ALLREDUCE:
        if (w->compress || w->prescale != 1 || w->postscale != 1) {
            rc = reduce_opts(c, w, NULL);
            break;
        }
        rc = hvd__coll_allreduce(c, w->sendbuf, w->recvbuf, w->count, w->dtype,
                                 w->op_kind, w->err, sizeof(w->err));
        break;
    case HVD_OP_BROADCAST:
        rc = hvd__coll_broadcast(c, w->recvbuf,
                                 w->count * hvd_dtype_size(w->dtype), w->root,
                                 w->err, sizeof(w->err));
        break;
    case HVD_OP_ALLGATHER:
        rc = do_allgather(c, w);
        break;
    case HVD_OP_REDUCESCATTER:
        rc = do_reducescatter(c, w);
        break;
    case HVD_OP_ALLTOALL:
        rc = do_alltoall(c, w);
        break;
    case HVD_OP_BARRIER:
        /* Every rank's byte must arrive everywhere: nobody leaves early. */
        all = malloc((size_t)c->size);
        ones = malloc((size_t)c->size * sizeof(*ones));
        rc = HVD_ENOMEM;
        if (all && ones) {
            for (int i = 0; i < c->size; i++)
                ones[i] = 1;
            rc = hvd__coll_allgatherv(c, token, all, ones, w->err,
                                      sizeof(w->err));
        }
        free(all);
        free(ones);
        break;
    default:
        rc = HVD_EINVAL;
    }
    return rc;
}

/* The first pass of hvd__exec_gather carries this many bytes per rank:
 * a length and the start of the data, so that short lists (the usual
 * negotiation) take one pass instead of two. */
#define GATHER_BLOCK 1024u
#define GATHER_HEAD (GATHER_BLOCK - 8u)

int hvd__exec_gather(struct hvd_ctx *c, const uint8_t *mine, size_t len,
                     uint8_t **all, size_t *lens, char *err, size_t errlen)
{
    size_t n = (size_t)c->size, total = 0, rest = 0;
    uint8_t *blocks = malloc(n * GATHER_BLOCK);
    size_t *bytes = calloc(n, sizeof(*bytes));
    uint8_t *tails = NULL;
    int rc = HVD_ENOMEM;

    *all = NULL;
    if (blocks == NULL || bytes == NULL)
        goto out;
    uint8_t *me = blocks + (size_t)c->rank * GATHER_BLOCK;
    uint64_t l64 = len;
    memcpy(me, &l64, 8);
    memcpy(me + 8, mine, len < GATHER_HEAD ? len : GATHER_HEAD);
    for (size_t i = 0; i < n; i++)
        bytes[i] = GATHER_BLOCK;
    rc = hvd__coll_allgatherv(c, me, blocks, bytes, err, errlen);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        memcpy(&l64, blocks + i * GATHER_BLOCK, 8);
        lens[i] = (size_t)l64;
        bytes[i] = lens[i] > GATHER_HEAD ? lens[i] - GATHER_HEAD : 0;
        total += lens[i];
        rest += bytes[i];
    }
    /* Longer lists: a second pass with what did not fit. */
    if (rest > 0) {
        rc = HVD_ENOMEM;
        if ((tails = malloc(rest)) == NULL)
            goto out;
        size_t off = 0;
        for (int i = 0; i < c->rank; i++)
            off += bytes[i];
        if (bytes[c->rank])
            memcpy(tails + off, mine + GATHER_HEAD, bytes[c->rank]);
        rc = hvd__coll_allgatherv(c, tails + off, tails, bytes, err, errlen);
        if (rc)
            goto out;
    }
    rc = HVD_ENOMEM;
    if ((*all = malloc(total ? total : 1)) == NULL)
        goto out;
    size_t at = 0, toff = 0;
    for (size_t i = 0; i < n; i++) {
        size_t head = lens[i] < GATHER_HEAD ? lens[i] : GATHER_HEAD;
        memcpy(*all + at, blocks + i * GATHER_BLOCK + 8, head);
        if (bytes[i])
            memcpy(*all + at + head, tails + toff, bytes[i]);
        at += lens[i];
        toff += bytes[i];
    }
    rc = 0;
out:
    if (rc) {
        free(*all);
        *all = NULL;
    }
    free(blocks);
    free(bytes);
    free(tails);
    return rc;
}
