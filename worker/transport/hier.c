/* The hierarchical transport: shared memory among each host's ranks and a
 * TCP ring of one leader per host across hosts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/buf.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/kernels/reduce.h"
#include "worker/transport/connect.h"
#include "worker/transport/shm_coll.h"
#include "worker/transport/transport.h"

static int is_leader(const struct hvd_ctx *c)
{
    return c->topo.first[c->topo.host] == c->rank;
}

/* This host's shared memory, then, on its leader, the ring of leaders. */
static int hier_connect(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                        size_t errlen)
{
    const struct hvd_topo *t = &c->topo;
    int rc = hvd__connect_shm(c, l, err, errlen);
    if (rc || !is_leader(c))
        return rc;
    hvd__ring_init(&c->xring, t->host, t->nhosts);
    return hvd__connect_ring(c, &c->xring, 1, t->first, l, err, errlen);
}

/* Within the host into the leader's accumulator (unfinished), across
 * hosts among the leaders, then finished and handed to the host. */
static int hier_reduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                       size_t count, hvd_dtype dt, hvd_op op, char *err,
                       size_t errlen)
{
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t aes = hvd_dtype_size(acc_dt);
    int lead = is_leader(c), rc = 0;

    if (lead && hvd__grow(&c->topo.buf, &c->topo.cap, count * aes + 1)) {
        hvd__shm_abort(&c->shm);
        return HVD_ENOMEM;
    }
    if (c->shm.n > 0)
        rc = hvd__shm_reduce(&c->shm, sendbuf, c->topo.buf, count, dt, op, NULL,
                             0, 0, err, errlen);
    else
        hvd__widen(c->topo.buf, sendbuf, count, dt);
    if (rc == 0 && lead) {
        rc = hvd__ring_allreduce(&c->xring, c->topo.buf, c->topo.buf, count,
                                 acc_dt, op == HVD_AVERAGE ? HVD_SUM : op, err,
                                 errlen);
        if (rc == 0)
            hvd__finish(recvbuf, c->topo.buf, count, dt, op, c->size);
        else if (c->shm.n > 0)
            hvd__shm_abort(&c->shm);
    }
    if (rc == 0 && c->shm.n > 0)
        rc = hvd__shm_bcast(&c->shm, recvbuf, count * hvd_dtype_size(dt), 0,
                            err, errlen);
    return rc;
}

/* Bounds cannot steer the hierarchical reduction: it has one path. */
static int hier_reduce_segs(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, const size_t *bounds, char *err,
                            size_t errlen)
{
    (void)bounds;
    return hier_reduce(c, sendbuf, recvbuf, count, dt, op, err, errlen);
}

static int hier_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          size_t count, hvd_dtype dt, hvd_op op, char *err,
                          size_t errlen)
{
    if (!hvd__coll_kernels_take(c, dt, op))
        return hvd__ring_allreduce(&c->ring, sendbuf, recvbuf, count, dt, op,
                                   err, errlen);
    return hier_reduce(c, sendbuf, recvbuf, count, dt, op, err, errlen);
}

/* Within root's host, across the leaders, within the other hosts. */
static int hier_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                          char *err, size_t errlen)
{
    const struct hvd_topo *t = &c->topo;
    int rh = 0, rc = 0;
    while (rh + 1 < t->nhosts && t->first[rh + 1] <= root)
        rh++;
    if (t->host == rh && c->shm.n > 0)
        rc = hvd__shm_bcast(&c->shm, buf, bytes, root - t->first[rh], err,
                            errlen);
    if (rc == 0 && is_leader(c)) {
        rc = hvd__ring_broadcast(&c->xring, buf, bytes, rh, err, errlen);
        if (rc && c->shm.n > 0)
            hvd__shm_abort(&c->shm);
    }
    if (rc == 0 && t->host != rh && c->shm.n > 0)
        rc = hvd__shm_bcast(&c->shm, buf, bytes, 0, err, errlen);
    return rc;
}

/* Each host's blocks within the host, the hosts' runs across the leaders,
 * and the whole result to the host. */
static int hier_allgatherv(struct hvd_ctx *c, const void *sendbuf,
                           void *recvbuf, const size_t *bytes, char *err,
                           size_t errlen)
{
    const struct hvd_topo *t = &c->topo;
    size_t *hbytes = calloc((size_t)t->nhosts, sizeof(*hbytes));
    size_t at = 0, total = 0;
    uint8_t *out = recvbuf;
    int rc = 0;

    if (hbytes == NULL) {
        hvd__shm_abort(&c->shm);
        return HVD_ENOMEM;
    }
    for (int h = 0; h < t->nhosts; h++)
        for (int r = t->first[h]; r < t->first[h] + t->count[h]; r++) {
            hbytes[h] += bytes[r];
            if (h < t->host)
                at += bytes[r];
        }
    for (int h = 0; h < t->nhosts; h++)
        total += hbytes[h];
    if (c->shm.n > 0)
        rc = hvd__shm_allgatherv(&c->shm, sendbuf, out + at,
                                 bytes + t->first[t->host], err, errlen);
    else if (bytes[c->rank] > 0 && out + at != sendbuf)
        memmove(out + at, sendbuf, bytes[c->rank]);
    if (rc == 0 && is_leader(c)) {
        rc =
            hvd__ring_allgatherv(&c->xring, out + at, out, hbytes, err, errlen);
        if (rc && c->shm.n > 0)
            hvd__shm_abort(&c->shm);
    }
    if (rc == 0 && c->shm.n > 0)
        rc = hvd__shm_bcast(&c->shm, out, total, 0, err, errlen);
    free(hbytes);
    return rc;
}

static void hier_describe(const struct hvd_ctx *c, char *out, size_t len)
{
    const struct hvd_topo *t = &c->topo;
    int n = t->count[t->host];
    if (n > 1)
        snprintf(out, len,
                 "hierarchical (%d hosts; shared memory among %d ranks on "
                 "this host%s)",
                 t->nhosts, n,
                 is_leader(c) ? "; leader on the TCP ring of hosts" : "");
    else
        snprintf(out, len,
                 "hierarchical (%d hosts; the only rank on this host; leader "
                 "on the TCP ring of hosts)",
                 t->nhosts);
}

const struct hvd_transport hvd__transport_hier = {
    .name = "hier",
    .connect = hier_connect,
    .allreduce = hier_allreduce,
    .reduce_segs = hier_reduce_segs,
    .broadcast = hier_broadcast,
    .allgatherv = hier_allgatherv,
    .describe = hier_describe,
};
