/* Collectives on the transport chosen at start-up: the TCP ring, shared
 * memory on one host, hierarchical across hosts, or MPI. */
#include "coll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "ctx.h"
#include "mpi_backend.h"
#include "reduce.h"
#include "shm_coll.h"

int hvd__topo_build(struct hvd_topo *t, int size, int rank,
                    const char *const *hosts)
{
    memset(t, 0, sizeof(*t));
    t->first = calloc((size_t)size, sizeof(int));
    t->count = calloc((size_t)size, sizeof(int));
    if (t->first == NULL || t->count == NULL)
        return HVD_ENOMEM;
    t->contiguous = 1;
    int prev = -1;
    for (int r = 0; r < size; r++) {
        int h = 0;
        while (h < t->nhosts && strcmp(hosts[t->first[h]], hosts[r]) != 0)
            h++;
        if (h == t->nhosts)
            t->first[t->nhosts++] = r;
        else if (h != prev)
            t->contiguous = 0; /* a host seen before comes back */
        t->count[h]++;
        if (t->count[h] > t->most)
            t->most = t->count[h];
        if (r == rank)
            t->host = h;
        prev = h;
    }
    return 0;
}

void hvd__topo_close(struct hvd_topo *t)
{
    if (t == NULL)
        return;
    free(t->first);
    free(t->count);
    free(t->buf);
    memset(t, 0, sizeof(*t));
}

enum hvd_coll_mode hvd__coll_choose(const struct hvd_topo *t, int size)
{
    if (size < 2 || hvd__env_flag(HVD_ENV_SHM_DISABLE, 0) || t->most < 2 ||
        t->most > HVD_SHM_MAX)
        return HVD_COLL_RING;
    if (t->nhosts == 1)
        return HVD_COLL_SHM;
    if (t->contiguous && hvd__env_flag(HVD_ENV_HIERARCHICAL_ALLREDUCE, 1))
        return HVD_COLL_HIER;
    return HVD_COLL_RING;
}

static int is_leader(const struct hvd_ctx *c)
{
    return c->topo.first[c->topo.host] == c->rank;
}

/* Within the host into the leader's accumulator (unfinished), across
 * hosts among the leaders, then finished and handed to the host. */
static int hier_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
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

int hvd__coll_reduce_segs(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          size_t count, hvd_dtype dt, hvd_op op,
                          const size_t *bounds, char *err, size_t errlen)
{
    switch (c->mode) {
    case HVD_COLL_MPI:
        /* MPI picks its own segments: the bounds cannot steer it. */
        return hvd__mpi_allreduce(c, sendbuf, recvbuf, count, dt, op, err,
                                  errlen);
    case HVD_COLL_SHM:
        return hvd__shm_reduce(&c->shm, sendbuf, recvbuf, count, dt, op, bounds,
                               c->size, -1, err, errlen);
    case HVD_COLL_HIER:
        return hier_allreduce(c, sendbuf, recvbuf, count, dt, op, err, errlen);
    default:
        return hvd__ring_reduce_segs(&c->ring, sendbuf, recvbuf, count, dt, op,
                                     bounds, err, errlen);
    }
}

int hvd__coll_gather_reduce(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, char *err, size_t errlen)
{
    /* Elsewhere NULL bounds (no segments) give the same rank-order fold. */
    if (c->mode == HVD_COLL_RING)
        return hvd__ring_gather_reduce(&c->ring, sendbuf, recvbuf, count, dt,
                                       op, err, errlen);
    return hvd__coll_reduce_segs(c, sendbuf, recvbuf, count, dt, op, NULL, err,
                                 errlen);
}

int hvd__coll_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        size_t count, hvd_dtype dt, hvd_op op, char *err,
                        size_t errlen)
{
    if (c->mode == HVD_COLL_MPI)
        return hvd__mpi_allreduce(c, sendbuf, recvbuf, count, dt, op, err,
                                  errlen);
    if (c->mode == HVD_COLL_RING || c->size == 1 || hvd_dtype_size(dt) == 0 ||
        (int)op < HVD_SUM || op > HVD_PRODUCT)
        return hvd__ring_allreduce(&c->ring, sendbuf, recvbuf, count, dt, op,
                                   err, errlen);
    if (c->mode == HVD_COLL_HIER || hvd__ring_is_small(count, dt))
        return hvd__coll_gather_reduce(c, sendbuf, recvbuf, count, dt, op, err,
                                       errlen);
    /* The ring's segments, so that the result has the ring's bits. */
    size_t *bounds = hvd__ring_bounds(count, c->size);
    if (bounds == NULL) {
        hvd__shm_abort(&c->shm);
        return HVD_ENOMEM;
    }
    int rc = hvd__coll_reduce_segs(c, sendbuf, recvbuf, count, dt, op, bounds,
                                   err, errlen);
    free(bounds);
    return rc;
}

int hvd__coll_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                        char *err, size_t errlen)
{
    if (c->mode == HVD_COLL_RING || root < 0 || root >= c->size)
        return hvd__ring_broadcast(&c->ring, buf, bytes, root, err, errlen);
    if (c->mode == HVD_COLL_MPI)
        return hvd__mpi_broadcast(c, buf, bytes, root, err, errlen);
    if (c->mode == HVD_COLL_SHM)
        return hvd__shm_bcast(&c->shm, buf, bytes, root, err, errlen);
    /* Within root's host, across the leaders, within the other hosts. */
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

int hvd__coll_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen)
{
    switch (c->mode) {
    case HVD_COLL_MPI:
        return hvd__mpi_allgatherv(c, sendbuf, recvbuf, bytes, err, errlen);
    case HVD_COLL_SHM:
        return hvd__shm_allgatherv(&c->shm, sendbuf, recvbuf, bytes, err,
                                   errlen);
    case HVD_COLL_HIER:
        return hier_allgatherv(c, sendbuf, recvbuf, bytes, err, errlen);
    default:
        return hvd__ring_allgatherv(&c->ring, sendbuf, recvbuf, bytes, err,
                                    errlen);
    }
}

void hvd__coll_log(const struct hvd_ctx *c)
{
    const char *lv = getenv(HVD_ENV_LOG_LEVEL);
    const struct hvd_topo *t = &c->topo;
    char what[160];
    /* In any case, as Horovod reads it (its horovodrun passes "DEBUG"). */
    if (lv == NULL ||
        (strcasecmp(lv, "debug") != 0 && strcasecmp(lv, "trace") != 0))
        return;
    int n = c->size > 1 && c->mode != HVD_COLL_MPI ? t->count[t->host] : 1;
    if (c->mode == HVD_COLL_MPI)
        hvd__mpi_describe(c->mpi, what, sizeof(what));
    else if (c->size == 1)
        snprintf(what, sizeof(what), "none (a job of one)");
    else if (c->mode == HVD_COLL_SHM)
        snprintf(what, sizeof(what), "shared memory (%d ranks on host %s)", n,
                 c->shm.host);
    else if (c->mode == HVD_COLL_RING)
        snprintf(what, sizeof(what), "TCP ring (%d ranks)", c->size);
    else if (n > 1)
        snprintf(what, sizeof(what),
                 "hierarchical (%d hosts; shared memory among %d ranks on "
                 "this host%s)",
                 t->nhosts, n,
                 is_leader(c) ? "; leader on the TCP ring of hosts" : "");
    else
        snprintf(what, sizeof(what),
                 "hierarchical (%d hosts; the only rank on this host; leader "
                 "on the TCP ring of hosts)",
                 t->nhosts);
    fprintf(stderr, "hvd: debug: rank %d: transport: %s\n", c->rank, what);
}

void hvd__coll_reset_abort(struct hvd_ctx *c)
{
    c->ring.abort_deadline = c->xring.abort_deadline = 0;
}

/* Bytes from a ring neighbour while no collective runs can only be
 * another rank starting one (or its death). */
static int readable(int fd)
{
    char b;
    if (fd < 0)
        return 0;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EINTR);
}

int hvd__coll_peer_started(struct hvd_ctx *c)
{
    if (c->failed)
        return 0;
    if (c->mode == HVD_COLL_MPI)
        return hvd__mpi_peer_started(c->mpi);
    return readable(c->ring.prev_fd) || readable(c->xring.prev_fd) ||
           (c->shm.n > 0 && hvd__shm_peer_ahead(&c->shm));
}

void hvd__coll_cycle_start(struct hvd_ctx *c)
{
    if (c->mode == HVD_COLL_MPI)
        hvd__mpi_cycle_start(c->mpi);
}

int64_t hvd__coll_idle_us(struct hvd_ctx *c)
{
    return c->mode == HVD_COLL_MPI && !c->failed ? hvd__mpi_idle_us(c->mpi)
                                                 : -1;
}
