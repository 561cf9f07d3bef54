/* Collectives among the ranks of one host through the shared segment:
 * every rank copies its chunk in, reduces its own slice straight from the
 * others' slots, and copies the finished chunk out; and shared memory as
 * the transport of a job on one host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/kernels/reduce.h"
#include "worker/transport/connect.h"
#include "worker/transport/shm_coll.h"
#include "worker/transport/transport.h"

/* The segment of bounds (n + 1 entries) that holds element e, searching
 * up from k. */
static int seg_of(const size_t *bounds, int n, size_t e, int k)
{
    while (k < n - 1 && e >= bounds[k + 1])
        k++;
    return k;
}

/* Folds elements [e, e+cnt) from every rank's input, starting with rank
 * k's, into acc. This rank's own input is read where it is (src); half
 * types go through a float32 copy of each input. */
static void fold(struct hvd_shm *s, uint8_t *acc, uint8_t *wide,
                 const uint8_t *src, size_t c0, size_t e, size_t cnt, int k,
                 hvd_dtype dt, hvd_op op)
{
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt);
    const uint8_t *first = NULL;
    for (int j = 0; j < s->n; j++) {
        int i = (k + j) % s->n;
        const uint8_t *in =
            i == s->me ? src + e * es : hvd__shm_slot(s, i) + (e - c0) * es;
        /* Same types: the first two inputs fold in one pass. */
        if (j == 0 && acc_dt == dt) {
            first = in;
            continue;
        }
        if (j == 1 && first) {
            hvd__reduce3(acc, first, in, cnt, acc_dt, op);
            continue;
        }
        if (j == 0) {
            hvd__widen(acc, in, cnt, dt);
            continue;
        }
        if (acc_dt != dt) {
            hvd__widen(wide, in, cnt, dt);
            in = wide;
        }
        hvd__reduce(acc, in, cnt, acc_dt, op);
    }
}

/* Copies result elements [e, e + cnt), found at res, into out, which
 * holds elements [wlo, whi) (oes bytes each). */
static void deliver(uint8_t *out, size_t wlo, size_t whi, const uint8_t *res,
                    size_t e, size_t cnt, size_t oes)
{
    size_t a = e > wlo ? e : wlo, b = e + cnt < whi ? e + cnt : whi;
    if (a < b)
        memcpy(out + (a - wlo) * oes, res + (a - e) * oes, (b - a) * oes);
}

/* hvd__shm_reduce, of which out receives elements [wlo, whi) only. */
static int reduce_into(struct hvd_shm *s, const void *sendbuf, void *out,
                       size_t count, hvd_dtype dt, hvd_op op,
                       const size_t *bounds, int size, int root, size_t wlo,
                       size_t whi, char *err, size_t errlen)
{
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt), aes = hvd_dtype_size(acc_dt);
    size_t oes = size > 0 ? es : aes, m = s->slot / aes;
    const uint8_t *src = sendbuf;
    int n = s->n, rc = 0, k = 0;

    /* Half types need a float32 accumulator and a float32 copy of each
     * slot's slice. */
    uint8_t *acc = NULL, *wide = NULL;
    if (acc_dt != dt) {
        size_t slice = (m / (size_t)n + 1) * aes;
        if ((acc = hvd__shm_tmp(s, 2 * slice)) == NULL) {
            hvd__shm_abort(s);
            return HVD_ENOMEM;
        }
        wide = acc + slice;
    }
    int mine = root < 0 || root == s->me; /* this rank wants the result */
    for (size_t c0 = 0; c0 < count; c0 += m) {
        size_t len = count - c0 < m ? count - c0 : m;
        /* Slice i of each chunk is rank i's to reduce: the others need
         * every part of this rank's input but that one. */
        size_t lo = hvd__ring_seg_first(len, n, s->me);
        size_t hi = hvd__ring_seg_first(len, n, s->me + 1);
        uint8_t *slot = hvd__shm_slot(s, s->me), *res = hvd__shm_slot(s, n);
        memcpy(slot, src + c0 * es, lo * es);
        memcpy(slot + hi * es, src + (c0 + hi) * es, (len - hi) * es);
        if ((rc = hvd__shm_sync(s, err, errlen)))
            return rc;
        for (size_t e = c0 + lo; e < c0 + hi;) {
            /* Elements of one ring segment are folded in the ring's order,
             * so the result has the same bits as the TCP ring's. */
            size_t end = c0 + hi;
            if (bounds) {
                k = seg_of(bounds, n, e, k);
                if (bounds[k + 1] < end)
                    end = bounds[k + 1];
            }
            size_t cnt = end - e;
            uint8_t *a = acc_dt == dt || size == 0 ? res + (e - c0) * aes : acc;
            fold(s, a, wide, src, c0, e, cnt, bounds ? k : 0, dt, op);
            if (size > 0)
                hvd__finish(res + (e - c0) * es, a, cnt, dt, op, size);
            if (mine)
                deliver(out, wlo, whi, res + (e - c0) * oes, e, cnt, oes);
            e = end;
        }
        if ((rc = hvd__shm_sync(s, err, errlen)))
            return rc;
        if (mine) {
            deliver(out, wlo, whi, res, c0, lo, oes);
            deliver(out, wlo, whi, res + hi * oes, c0 + hi, len - hi, oes);
        }
        hvd__shm_flip(s);
    }
    return 0;
}

/* A small allreduce among many ranks: each rank's input goes to its slot,
 * local rank 0 alone folds them all in rank order (the ring's order for
 * small tensors, so the same bits) into the result slot, and every rank
 * copies the result. A rank waits for rank 0 alone and rank 0 for all,
 * where two full syncs would have each rank see every rank enter twice. */
static int reduce_through_first(struct hvd_shm *s, const void *sendbuf,
                                void *out, size_t count, hvd_dtype dt,
                                hvd_op op, int size, char *err, size_t errlen)
{
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt), aes = hvd_dtype_size(acc_dt);
    uint8_t *res = hvd__shm_slot(s, s->n);
    memcpy(hvd__shm_slot(s, s->me), sendbuf, count * es);
    int rc = hvd__shm_arrive(s, err, errlen);
    if (rc)
        return rc;
    if (s->me == 0) {
        uint8_t *acc = res, *wide = NULL;
        if (acc_dt != dt) {
            if ((acc = hvd__shm_tmp(s, 2 * count * aes)) == NULL) {
                hvd__shm_abort(s);
                return HVD_ENOMEM;
            }
            wide = acc + count * aes;
        }
        fold(s, acc, wide, sendbuf, 0, 0, count, 0, dt, op);
        hvd__finish(res, acc, count, dt, op, size);
    }
    if ((rc = hvd__shm_release(s, err, errlen)) != 0)
        return rc;
    memcpy(out, res, count * es);
    hvd__shm_flip(s);
    return 0;
}

int hvd__shm_reduce(struct hvd_shm *s, const void *sendbuf, void *out,
                    size_t count, hvd_dtype dt, hvd_op op, const size_t *bounds,
                    int size, int root, char *err, size_t errlen)
{
    return reduce_into(s, sendbuf, out, count, dt, op, bounds, size, root, 0,
                       count, err, errlen);
}

int hvd__shm_alltoallv(struct hvd_shm *s, const void *sendbuf, void *recvbuf,
                       const size_t *bytes, char *err, size_t errlen)
{
    size_t n = (size_t)s->n, me = (size_t)s->me, most = 0, mine = 0;
    const uint8_t *src = sendbuf;
    uint8_t *out = recvbuf;
    size_t *from = malloc(2 * n * sizeof(*from)), *at = from + n;
    int rc = 0;

    if (from == NULL) {
        hvd__shm_abort(s);
        return HVD_ENOMEM;
    }
    /* Rank i's block for this rank starts from[i] bytes into i's input
     * and lands at[i] bytes into the output. */
    for (size_t i = 0, got = 0; i < n; i++) {
        size_t total = 0;
        for (size_t j = 0; j < n; j++) {
            if (j == me)
                from[i] = total;
            total += bytes[i * n + j];
        }
        if (total > most)
            most = total;
        if (i == me)
            mine = total;
        at[i] = got;
        got += bytes[i * n + me];
    }
    if (bytes[me * n + me] > 0)
        memcpy(out + at[me], src + from[me], bytes[me * n + me]);
    /* Round r carries bytes r*slot .. (r+1)*slot-1 of every rank's whole
     * input; each rank takes its own block's part of every slot. At least
     * one round, so that even empty exchanges synchronise. */
    for (size_t off = 0; off == 0 || off < most; off += s->slot) {
        if (mine > off)
            memcpy(hvd__shm_slot(s, s->me), src + off,
                   mine - off < s->slot ? mine - off : s->slot);
        if ((rc = hvd__shm_sync(s, err, errlen)))
            break;
        for (size_t i = 0; i < n; i++) {
            size_t b0 = from[i], b1 = b0 + bytes[i * n + me];
            size_t a = b0 > off ? b0 : off;
            size_t b = b1 < off + s->slot ? b1 : off + s->slot;
            if (i != me && a < b)
                memcpy(out + at[i] + (a - b0),
                       hvd__shm_slot(s, (int)i) + (a - off), b - a);
        }
        hvd__shm_flip(s);
    }
    free(from);
    return rc;
}

int hvd__shm_bcast(struct hvd_shm *s, void *buf, size_t bytes, int root,
                   char *err, size_t errlen)
{
    /* A set's slots lie end to end: the whole set is one buffer here. */
    size_t cap = ((size_t)s->n + 1) * s->slot;
    uint8_t *p = buf;
    int rc;

    for (size_t off = 0; off < bytes; off += cap) {
        size_t len = bytes - off < cap ? bytes - off : cap;
        if (s->me == root)
            memcpy(hvd__shm_slot(s, 0), p + off, len);
        if ((rc = hvd__shm_sync(s, err, errlen)))
            return rc;
        if (s->me != root)
            memcpy(p + off, hvd__shm_slot(s, 0), len);
        hvd__shm_flip(s);
    }
    return 0;
}

int hvd__shm_allgatherv(struct hvd_shm *s, const void *sendbuf, void *recvbuf,
                        const size_t *bytes, char *err, size_t errlen)
{
    size_t most = 0, mine_at = 0;
    uint8_t *out = recvbuf;
    int rc;

    for (int i = 0; i < s->n; i++) {
        if (bytes[i] > most)
            most = bytes[i];
        if (i < s->me)
            mine_at += bytes[i];
    }
    if (bytes[s->me] > 0 && out + mine_at != sendbuf)
        memmove(out + mine_at, sendbuf, bytes[s->me]);
    /* Round r carries bytes r*slot .. (r+1)*slot-1 of every block; at
     * least one round, so that even empty gathers synchronise. */
    for (size_t off = 0; off == 0 || off < most; off += s->slot) {
        size_t len = bytes[s->me] > off ? bytes[s->me] - off : 0;
        if (len > 0)
            memcpy(hvd__shm_slot(s, s->me), out + mine_at + off,
                   len < s->slot ? len : s->slot);
        if ((rc = hvd__shm_sync(s, err, errlen)))
            return rc;
        size_t at = 0;
        for (int i = 0; i < s->n; i++) {
            len = bytes[i] > off ? bytes[i] - off : 0;
            if (i != s->me && len > 0)
                memcpy(out + at + off, hvd__shm_slot(s, i),
                       len < s->slot ? len : s->slot);
            at += bytes[i];
        }
        hvd__shm_flip(s);
    }
    return 0;
}

/* The transport: every rank on this host (c->shm). */

static int shm_connect(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                       size_t errlen)
{
    return hvd__connect_shm(c, l, err, errlen);
}

/* In the ring's segments (bounds), or in rank order without: either way
 * with the ring's bits. */
static int shm_reduce_segs(struct hvd_ctx *c, const void *sendbuf,
                           void *recvbuf, size_t count, hvd_dtype dt, hvd_op op,
                           const size_t *bounds, char *err, size_t errlen)
{
    return hvd__shm_reduce(&c->shm, sendbuf, recvbuf, count, dt, op, bounds,
                           c->size, -1, err, errlen);
}

static int shm_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op, char *err,
                         size_t errlen)
{
    if (!hvd__coll_kernels_take(c, dt, op))
        return hvd__ring_allreduce(&c->ring, sendbuf, recvbuf, count, dt, op,
                                   err, errlen);
    if (hvd__ring_is_small(count, dt))
        return c->size >= HVD_SHM_VIA_FIRST_MIN
                   ? reduce_through_first(&c->shm, sendbuf, recvbuf, count, dt,
                                          op, c->size, err, errlen)
                   : shm_reduce_segs(c, sendbuf, recvbuf, count, dt, op, NULL,
                                     err, errlen);
    /* The ring's segments, so that the result has the ring's bits. */
    size_t *bounds = hvd__ring_bounds(count, c->size);
    if (bounds == NULL) {
        hvd__shm_abort(&c->shm);
        return HVD_ENOMEM;
    }
    int rc = shm_reduce_segs(c, sendbuf, recvbuf, count, dt, op, bounds, err,
                             errlen);
    free(bounds);
    return rc;
}

/* The allreduce's own path (segments and bits), delivering this rank's
 * rows only: no scratch copy of the whole result. */
static int shm_reducescatter(struct hvd_ctx *c, const void *sendbuf,
                             void *recvbuf, size_t count, hvd_dtype dt,
                             hvd_op op, const size_t *rows, char *err,
                             size_t errlen)
{
    if (!hvd__coll_kernels_take(c, dt, op))
        return hvd__coll_reducescatter_by_allreduce(c, sendbuf, recvbuf, count,
                                                    dt, op, rows, err, errlen);
    size_t *segs = NULL;
    if (!hvd__ring_is_small(count, dt) &&
        (segs = hvd__ring_bounds(count, c->size)) == NULL) {
        hvd__shm_abort(&c->shm);
        return HVD_ENOMEM;
    }
    int rc =
        reduce_into(&c->shm, sendbuf, recvbuf, count, dt, op, segs, c->size, -1,
                    rows[c->rank], rows[c->rank + 1], err, errlen);
    free(segs);
    return rc;
}

static int shm_alltoallv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen)
{
    return hvd__shm_alltoallv(&c->shm, sendbuf, recvbuf, bytes, err, errlen);
}

static int shm_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                         char *err, size_t errlen)
{
    return hvd__shm_bcast(&c->shm, buf, bytes, root, err, errlen);
}

static int shm_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          const size_t *bytes, char *err, size_t errlen)
{
    return hvd__shm_allgatherv(&c->shm, sendbuf, recvbuf, bytes, err, errlen);
}

static void shm_describe(const struct hvd_ctx *c, char *out, size_t len)
{
    snprintf(out, len, "shared memory (%d ranks on host %s)",
             c->topo.count[c->topo.host], c->shm.host);
}

const struct hvd_transport hvd__transport_shm = {
    .name = "shm",
    .connect = shm_connect,
    .allreduce = shm_allreduce,
    .reduce_segs = shm_reduce_segs,
    .broadcast = shm_broadcast,
    .allgatherv = shm_allgatherv,
    .reducescatter = shm_reducescatter,
    .alltoallv = shm_alltoallv,
    .describe = shm_describe,
};
