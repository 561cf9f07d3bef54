/* Runs negotiated host-memory collectives, and negotiation's gathers. */
#include "worker/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "worker/buf.h"
#include "worker/ctx.h"
#include "worker/kernels/adasum.h"
#include "worker/kernels/reduce.h"

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
    /* The ranks outside w's process set gave nothing. */
    for (int k = 0; k < w->set_size; k++) {
        w->counts[k] = (size_t)counts[w->set_ranks[k]];
        *total += w->counts[k] * es;
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
    for (int k = 0; k < w->set_size; k++)
        bytes[w->set_ranks[k]] = w->counts[k] * es;
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

size_t hvd__exec_mine(const struct hvd_work *w)
{
    return w->set_rank < 0 ? 0
                           : hvd__exec_rows(w, w->set_size, w->set_rank, NULL);
}

/* The element bounds of every rank's rows (size+1; malloc): those of
 * the ranks of w's process set, in order, and none for the others. */
static size_t *row_bounds(const struct hvd_ctx *c, const struct hvd_work *w)
{
    size_t *b = malloc(((size_t)c->size + 1) * sizeof(*b));
    for (int r = 0, k = 0; b && r < c->size; r++) {
        hvd__exec_rows(w, w->set_size, k, &b[r]);
        if (k < w->set_size && w->set_ranks[k] == r)
            k++;
    }
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
    /* A process set's ranks send to its ranks only; a stand-in sends
     * nothing (sendcounts NULL). */
    for (int k = 0; w->sendcounts && k < w->set_size; k++)
        counts[me * n + (size_t)w->set_ranks[k]] = w->sendcounts[k];
    for (size_t j = 0; j < n; j++)
        bytes[j] = n * sizeof(uint64_t);
    rc = hvd__coll_allgatherv(c, &counts[me * n], counts, bytes, w->err,
                              sizeof(w->err));
    if (rc)
        goto out;
    for (size_t k = 0; k < n * n; k++)
        bytes[k] = (size_t)counts[k] * es;
    for (size_t i = 0; i < n; i++)
        total += bytes[i * n + me];
    for (int k = 0; k < w->set_size; k++)
        w->counts[k] = (size_t)counts[(size_t)w->set_ranks[k] * n + me];
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

/* Adasum: every rank's tensor goes to every rank, and each combines them
 * in the same tree, so every rank gets the same bits. */
static int do_adasum(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t n = (size_t)c->size, bytes = w->count * hvd_dtype_size(w->dtype);
    uint8_t *all = malloc(n * bytes + 1);
    size_t *each = malloc(n * sizeof(*each));
    int rc = HVD_ENOMEM;
    if (all == NULL || each == NULL)
        goto out;
    for (size_t r = 0; r < n; r++)
        each[r] = bytes;
    rc = hvd__coll_allgatherv(c, w->sendbuf, all, each, w->err, sizeof(w->err));
    if (rc == 0)
        rc = hvd__adasum(w->recvbuf, all, w->count, w->dtype, c->size, NULL, 0);
out:
    free(all);
    free(each);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Writes "[1, 2, 3]" (cut to fit) into out. */
static void list_ranks(char *out, size_t cap, const int *v, size_t n)
{
    size_t at = (size_t)snprintf(out, cap, "[");
    for (size_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? ", " : "", v[i]);
    if (at < cap)
        snprintf(out + at, cap - at, "]");
}

/* Every rank's list of w->count ranks goes to every rank; if all are the
 * same set, every rank adds it to its table, where it takes the same id
 * on every rank (into w->root). */
static int do_pset_add(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t n = w->count, size = (size_t)c->size;
    int *all = malloc(size * n * sizeof(int) + 1);
    size_t *bytes = malloc(size * sizeof(*bytes));
    int rc = HVD_ENOMEM;
    if (all == NULL || bytes == NULL)
        goto out;
    for (size_t r = 0; r < size; r++)
        bytes[r] = n * sizeof(int);
    rc =
        hvd__coll_allgatherv(c, w->sendbuf, all, bytes, w->err, sizeof(w->err));
    if (rc)
        goto out;
    for (size_t r = 0; r < size; r++)
        qsort(all + r * n, n, sizeof(int), cmp_int);
    for (size_t r = 1; r < size; r++)
        if (memcmp(all, all + r * n, n * sizeof(int)) != 0) {
            char a[96], b[96];
            list_ranks(a, sizeof(a), all, n);
            list_ranks(b, sizeof(b), all + r * n, n);
            snprintf(w->err, sizeof(w->err),
                     "ranks disagree about the process set to add: rank 0 "
                     "gave %s, rank %zu %s",
                     a, r, b);
            rc = HVD_EMISMATCH;
            goto out;
        }
    rc = hvd__pset_add(&c->psets, all, (int)n, w->err, sizeof(w->err));
    if (rc > 0) {
        w->root = rc;
        rc = 0;
    }
out:
    free(all);
    free(bytes);
    return rc;
}

int hvd__exec(struct hvd_ctx *c, struct hvd_work *w)
{
    uint8_t token[1] = {1};
    uint8_t *all;
    size_t *ones;
    int rc, divisor = 1;

    hvd__coll_reset_abort(c);
    /* A process set's average: the sum over the job, where the ranks
     * outside the set add zeros, divided by the set's size (floats scale
     * by its inverse, as Horovod does). */
    if (w->pset != 0 && w->op_kind == HVD_AVERAGE &&
        (w->kind == HVD_OP_ALLREDUCE || w->kind == HVD_OP_REDUCESCATTER)) {
        w->op_kind = HVD_SUM;
        if (hvd__acc_dtype(w->dtype) == HVD_FLOAT32 || w->dtype == HVD_FLOAT64)
            w->postscale /= w->set_size;
        else
            divisor = w->set_size;
    }
    switch (w->kind) {
    case HVD_OP_ALLREDUCE:
        if (w->op_kind == HVD_ADASUM)
            rc = do_adasum(c, w);
        else if (w->compress || w->prescale != 1 || w->postscale != 1)
            rc = reduce_opts(c, w, NULL);
        else
            rc = hvd__coll_allreduce(c, w->sendbuf, w->recvbuf, w->count,
                                     w->dtype, w->op_kind, w->err,
                                     sizeof(w->err));
        if (rc == 0 && divisor > 1 && w->set_rank >= 0)
            hvd__finish(w->recvbuf, w->recvbuf, w->count, w->dtype, HVD_AVERAGE,
                        divisor);
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
        if (rc == 0 && divisor > 1)
            hvd__finish(w->recvbuf, w->recvbuf, hvd__exec_mine(w), w->dtype,
                        HVD_AVERAGE, divisor);
        break;
    case HVD_OP_PSET_ADD:
        rc = do_pset_add(c, w);
        break;
    case HVD_OP_PSET_REMOVE:
        rc = hvd__pset_remove(&c->psets, w->root, w->err, sizeof(w->err));
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

/* The first pass of hvd__exec_gather carries a block per rank: a length
 * and the start of the data, so that short lists (the usual negotiation:
 * a bitmap of cached names, a bit per name) take one pass instead of
 * two. Every rank copies n blocks per cycle, so a block is as long as the
 * longest message of the last cycle needed, between these bounds: every
 * rank saw the same lengths, so every rank picks the same. */
#define GATHER_BLOCK_MIN 64u
/* Room for a message that carries small tensors' data (eager.h) and
 * the usual requests. */
#define GATHER_BLOCK_MAX 2048u

static size_t next_block(const size_t *lens, size_t n)
{
    size_t most = 0;
    for (size_t i = 0; i < n; i++)
        if (lens[i] > most)
            most = lens[i];
    size_t b =
        (most + 8 + GATHER_BLOCK_MIN - 1) & ~(size_t)(GATHER_BLOCK_MIN - 1);
    return b < GATHER_BLOCK_MIN   ? GATHER_BLOCK_MIN
           : b > GATHER_BLOCK_MAX ? GATHER_BLOCK_MAX
                                  : b;
}

int hvd__exec_gather(struct hvd_ctx *c, const uint8_t *mine, size_t len,
                     const uint8_t **msgs, size_t *lens, char *err,
                     size_t errlen)
{
    struct hvd_gather *g = &c->gather;
    size_t n = (size_t)c->size, total = 0, rest = 0;
    size_t block = g->block ? g->block : GATHER_BLOCK_MAX, head = block - 8;
    int rc = HVD_ENOMEM;

    if (g->bytes == NULL && (g->bytes = calloc(n, sizeof(*g->bytes))) == NULL)
        return rc;
    if (hvd__grow(&g->blocks, &g->blocks_cap, n * block))
        return rc;
    size_t *bytes = g->bytes;
    uint8_t *me = g->blocks + (size_t)c->rank * block;
    uint64_t l64 = len;
    memcpy(me, &l64, 8);
    memcpy(me + 8, mine, len < head ? len : head);
    for (size_t i = 0; i < n; i++)
        bytes[i] = block;
    rc = hvd__coll_allgatherv(c, me, g->blocks, bytes, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        memcpy(&l64, g->blocks + i * block, 8);
        lens[i] = (size_t)l64;
        bytes[i] = lens[i] > head ? lens[i] - head : 0;
        total += lens[i];
        rest += bytes[i];
        msgs[i] = g->blocks + i * block + 8;
    }
    g->block = next_block(lens, n);
    if (rest == 0)
        return 0; /* every message is whole in its block */
    /* Longer lists: a second pass with what did not fit, and every
     * message joined up in one buffer. */
    rc = HVD_ENOMEM;
    if (hvd__grow(&g->tails, &g->tails_cap, rest) ||
        hvd__grow(&g->all, &g->all_cap, total))
        return rc;
    size_t off = 0;
    for (int i = 0; i < c->rank; i++)
        off += bytes[i];
    if (bytes[c->rank])
        memcpy(g->tails + off, mine + head, bytes[c->rank]);
    rc = hvd__coll_allgatherv(c, g->tails + off, g->tails, bytes, err, errlen);
    if (rc)
        return rc;
    size_t at = 0, toff = 0;
    for (size_t i = 0; i < n; i++) {
        size_t first = lens[i] < head ? lens[i] : head;
        memcpy(g->all + at, msgs[i], first);
        if (bytes[i])
            memcpy(g->all + at + first, g->tails + toff, bytes[i]);
        msgs[i] = g->all + at;
        at += lens[i];
        toff += bytes[i];
    }
    return 0;
}

void hvd__exec_gather_free(struct hvd_ctx *c)
{
    struct hvd_gather *g = &c->gather;
    free(g->blocks);
    free(g->bytes);
    free(g->tails);
    free(g->all);
    memset(g, 0, sizeof(*g));
}
