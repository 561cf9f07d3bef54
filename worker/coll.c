/* Collectives on the transport chosen at start-up (transport/: the TCP
 * ring, shared memory on one host, hierarchical across hosts, or MPI),
 * through its table. */
#include "worker/coll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/transport/transport.h"

int hvd__coll_kernels_take(const struct hvd_ctx *c, hvd_dtype dt, hvd_op op)
{
    return c->size > 1 && hvd_dtype_size(dt) != 0 && (int)op >= HVD_SUM &&
           op <= HVD_PRODUCT;
}

int hvd__coll_reduce_segs(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          size_t count, hvd_dtype dt, hvd_op op,
                          const size_t *bounds, char *err, size_t errlen)
{
    /* A transport that picks its own segments (MPI): bounds cannot steer
     * it. */
    if (c->tp->reduce_segs == NULL)
        return c->tp->allreduce(c, sendbuf, recvbuf, count, dt, op, err,
                                errlen);
    return c->tp->reduce_segs(c, sendbuf, recvbuf, count, dt, op, bounds, err,
                              errlen);
}

int hvd__coll_gather_reduce(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, char *err, size_t errlen)
{
    /* Without a path of its own, NULL bounds (no segments) give the same
     * rank-order fold. */
    if (c->tp->gather_reduce == NULL)
        return hvd__coll_reduce_segs(c, sendbuf, recvbuf, count, dt, op, NULL,
                                     err, errlen);
    return c->tp->gather_reduce(c, sendbuf, recvbuf, count, dt, op, err,
                                errlen);
}

int hvd__coll_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        size_t count, hvd_dtype dt, hvd_op op, char *err,
                        size_t errlen)
{
    return c->tp->allreduce(c, sendbuf, recvbuf, count, dt, op, err, errlen);
}

int hvd__coll_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                        char *err, size_t errlen)
{
    /* The ring refuses a root that is no rank, on every transport. */
    if (root < 0 || root >= c->size)
        return hvd__ring_broadcast(&c->ring, buf, bytes, root, err, errlen);
    return c->tp->broadcast(c, buf, bytes, root, err, errlen);
}

int hvd__coll_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen)
{
    return c->tp->allgatherv(c, sendbuf, recvbuf, bytes, err, errlen);
}

int hvd__coll_reducescatter_by_allreduce(struct hvd_ctx *c, const void *sendbuf,
                                         void *recvbuf, size_t count,
                                         hvd_dtype dt, hvd_op op,
                                         const size_t *bounds, char *err,
                                         size_t errlen)
{
    /* The allreduce's own path, whole: every element is folded as
     * hvd_allreduce folds it, so the slice has its bits. */
    size_t es = hvd_dtype_size(dt);
    size_t lo = bounds[c->rank], hi = bounds[c->rank + 1];
    uint8_t *all = malloc(count * es + 1);
    if (all == NULL)
        return HVD_ENOMEM;
    int rc = hvd__coll_allreduce(c, sendbuf, all, count, dt, op, err, errlen);
    if (rc == 0 && hi > lo)
        memcpy(recvbuf, all + lo * es, (hi - lo) * es);
    free(all);
    return rc;
}

int hvd__coll_reducescatter(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, const size_t *bounds, char *err,
                            size_t errlen)
{
    if (c->tp->reducescatter == NULL)
        return hvd__coll_reducescatter_by_allreduce(
            c, sendbuf, recvbuf, count, dt, op, bounds, err, errlen);
    return c->tp->reducescatter(c, sendbuf, recvbuf, count, dt, op, bounds, err,
                                errlen);
}

int hvd__coll_alltoallv_by_allgatherv(struct hvd_ctx *c, const void *sendbuf,
                                      void *recvbuf, const size_t *bytes,
                                      char *err, size_t errlen)
{
    size_t n = (size_t)c->size, me = (size_t)c->rank, total = 0;
    size_t *whole = calloc(n, sizeof(*whole));
    uint8_t *all = NULL, *out = recvbuf;
    int rc = HVD_ENOMEM;

    if (whole == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++)
            whole[i] += bytes[i * n + j];
        total += whole[i];
    }
    if ((all = malloc(total + 1)) == NULL)
        goto out;
    rc = hvd__coll_allgatherv(c, sendbuf, all, whole, err, errlen);
    if (rc)
        goto out;
    /* Rank i's block for this rank follows its blocks for lower ranks. */
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t off = at;
        for (size_t j = 0; j < me; j++)
            off += bytes[i * n + j];
        if (bytes[i * n + me] > 0)
            memcpy(out, all + off, bytes[i * n + me]);
        out += bytes[i * n + me];
        at += whole[i];
    }
out:
    free(whole);
    free(all);
    return rc;
}

int hvd__coll_alltoallv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        const size_t *bytes, char *err, size_t errlen)
{
    if (c->tp->alltoallv == NULL)
        return hvd__coll_alltoallv_by_allgatherv(c, sendbuf, recvbuf, bytes,
                                                 err, errlen);
    return c->tp->alltoallv(c, sendbuf, recvbuf, bytes, err, errlen);
}

int hvd__coll_debug(void)
{
    const char *lv = getenv(HVD_ENV_LOG_LEVEL);
    /* In any case, as Horovod reads it (its horovodrun passes "DEBUG"). */
    return lv != NULL &&
           (strcasecmp(lv, "debug") == 0 || strcasecmp(lv, "trace") == 0);
}

void hvd__coll_log(const struct hvd_ctx *c)
{
    char what[160];
    if (!hvd__coll_debug())
        return;
    c->tp->describe(c, what, sizeof(what));
    fprintf(stderr, "hvd: debug: rank %d: transport: %s\n", c->rank, what);
}

void hvd__coll_reset_abort(struct hvd_ctx *c)
{
    c->abort.deadline = 0;
}

/*
 * Bytes from a ring neighbour while no collective runs can only be
 * another rank starting one, or a broken connection. An end of file is a
 * rank that shut down, or died (horovodrun's rendezvous tells of a death):
 * there is no collective to join, and the socket is watched no more. Had
 * it started a cycle, a rank whose host peers had shut down too would
 * wait for them in shared memory until the peer timeout.
 */
static int peer_sent(struct hvd_ctx *c, int fd, int bit)
{
    char b;
    if (fd < 0 || (c->rings_ended & bit))
        return 0;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        c->rings_ended |= bit;
    return n > 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

int hvd__coll_peer_started(struct hvd_ctx *c)
{
    if (c->failed)
        return 0;
    if (c->tp->peer_started != NULL)
        return c->tp->peer_started(c);
    return peer_sent(c, c->ring.from[0].fd, 1) ||
           peer_sent(c, c->xring.from[0].fd, 2) ||
           (c->shm.n > 0 && hvd__shm_peer_ahead(&c->shm));
}

int hvd__coll_watched_fd(const struct hvd_ctx *c, int cross)
{
    int fd = cross ? c->xring.from[0].fd : c->ring.from[0].fd;
    return c->failed || (c->rings_ended & (cross ? 2 : 1)) ? -1 : fd;
}

void hvd__coll_cycle_start(struct hvd_ctx *c)
{
    if (c->tp->cycle_start != NULL)
        c->tp->cycle_start(c);
}

int64_t hvd__coll_idle_us(struct hvd_ctx *c)
{
    return c->tp->idle_us != NULL && !c->failed ? c->tp->idle_us(c) : -1;
}
