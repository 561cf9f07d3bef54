/* Ring collectives: a schedule of send and receive steps run by one
 * non-blocking loop, so sending, receiving and reducing overlap; and the
 * TCP ring of every rank as a transport. */
#include "worker/transport/ring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/buf.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/kernels/reduce.h"
#include "worker/sock.h"
#include "worker/transport/connect.h"
#include "worker/transport/transport.h"
#include "worker/wait.h"

/* Bytes taken from a socket per receive call, and the staging size. */
#define RING_STAGE (256u * 1024)
/* Tensors up to this many accumulator bytes are gathered whole rather than
 * reduce-scattered: fewer steps matter more than bytes for them. */
#define RING_SMALL (32u * 1024)
/* Allgathers of at most this many bytes in all take Bruck's ceil(log2 n)
 * steps over the ring's skip links rather than the ring's n-1: for small
 * blocks the steps cost, not the bytes. */
#define RING_BRUCK_MAX (512u * 1024)

struct step {
    uint8_t *ptr;
    size_t esize;
    size_t count; /* elements */
    int dep;      /* sends: the receive step that must land first, or -1 */
    int direct;   /* receives: straight into ptr, no processing */
};

struct sched {
    struct step *send;
    int nsend;
    struct step *recv;
    int nrecv;
    /* Called with whole received elements of a staged receive step. */
    void (*process)(void *ctx, int step, size_t first, const uint8_t *data,
                    size_t n);
    void *ctx;
};

void hvd__ring_init(struct hvd_ring *r, int rank, int size)
{
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    r->size = size;
    for (int k = 0; k < HVD_RING_LINKS; k++)
        r->to[k].fd = r->from[k].fd = -1;
}

void hvd__ring_close(struct hvd_ring *r)
{
    if (r == NULL)
        return;
    for (int k = 0; k < HVD_RING_LINKS; k++) {
        if (r->to[k].fd >= 0)
            close(r->to[k].fd);
        if (r->from[k].fd >= 0)
            close(r->from[k].fd);
        r->to[k].fd = r->from[k].fd = -1;
    }
    r->nlinks = 0;
    free(r->stage);
    free(r->acc);
    r->stage = r->acc = NULL;
}

static int peer_error(const char *desc, ssize_t n, char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "%s closed its connection", desc);
    } else if (errno == ETIMEDOUT) {
        /* TCP gave up on data the peer did not take (sock.c). */
        snprintf(err, errlen,
                 "%s took no data for too long (it is stopped or hung, or "
                 "its host is unreachable)",
                 desc);
        return HVD_ETIMEDOUT;
    } else {
        snprintf(err, errlen, "lost the connection to %s: %s", desc,
                 strerror(errno));
    }
    return HVD_EPEER;
}

/* Bytes of the current send step that may go out now. */
static size_t send_allowed(const struct sched *sc, int si, int ri, size_t rdone)
{
    const struct step *s = &sc->send[si];
    if (s->dep < 0 || s->dep < ri)
        return s->count * s->esize;
    if (s->dep == ri)
        return rdone * s->esize;
    return 0;
}

/* Runs sc on link k: sends to rank + 2^k, receives from rank - 2^k. */
static int run(struct hvd_ring *r, int k, const struct sched *sc, char *err,
               size_t errlen)
{
    const struct hvd_chan *to = &r->to[k], *from = &r->from[k];
    int si = 0, ri = 0;
    size_t sbytes = 0, rbytes = 0, rdone = 0, held = 0;
    int64_t moved_ms = hvd__now_ms();
    struct hvd_spin spin = {0};

    if (hvd__grow(&r->stage, &r->stage_cap, RING_STAGE))
        return HVD_ENOMEM;
    for (;;) {
        while (si < sc->nsend &&
               sbytes == sc->send[si].count * sc->send[si].esize) {
            si++;
            sbytes = 0;
        }
        while (ri < sc->nrecv && rdone == sc->recv[ri].count) {
            ri++;
            rbytes = rdone = held = 0;
        }
        if (si == sc->nsend && ri == sc->nrecv)
            return 0;

        int progress = 0;
        size_t allowed = si < sc->nsend ? send_allowed(sc, si, ri, rdone) : 0;
        if (allowed > sbytes) {
            ssize_t n = send(to->fd, sc->send[si].ptr + sbytes,
                             allowed - sbytes, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                sbytes += (size_t)n;
                progress = 1;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                return peer_error(to->desc, n, err, errlen);
            }
        }
        if (ri < sc->nrecv) {
            const struct step *s = &sc->recv[ri];
            size_t total = s->count * s->esize;
            uint8_t *dst = s->direct ? s->ptr + rbytes : r->stage + held;
            size_t want = total - rbytes;
            if (!s->direct && want > r->stage_cap - held)
                want = r->stage_cap - held;
            ssize_t n = recv(from->fd, dst, want, MSG_DONTWAIT);
            if (n > 0) {
                rbytes += (size_t)n;
                progress = 1;
                if (s->direct) {
                    rdone = rbytes / s->esize;
                } else {
                    held += (size_t)n;
                    size_t whole = held / s->esize;
                    if (whole > 0) {
                        sc->process(sc->ctx, ri, rdone, r->stage, whole);
                        rdone += whole;
                        held -= whole * s->esize;
                        memmove(r->stage, r->stage + whole * s->esize, held);
                    }
                }
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                return peer_error(from->desc, n, err, errlen);
            }
        }
        if (progress) {
            spin.since_us = 0;
            moved_ms = hvd__now_ms();
            if (r->busy_ms)
                atomic_store_explicit(r->busy_ms, moved_ms,
                                      memory_order_relaxed);
            continue;
        }
        /* Data usually follows within microseconds: spin a little before
         * paying for a sleep and a wake-up. */
        if (r->spin_us > 0 && hvd__spin_spent(&spin) < r->spin_us)
            continue;

        /* Nothing moved: sleep until a socket or the abort channel can. */
        struct pollfd p[3];
        int np = 0;
        p[np++] = (struct pollfd){.fd = hvd__abort_fd(r->ab), .events = POLLIN};
        if (allowed > sbytes)
            p[np++] = (struct pollfd){.fd = to->fd, .events = POLLOUT};
        if (ri < sc->nrecv)
            p[np++] = (struct pollfd){.fd = from->fd, .events = POLLIN};
        int timeout = hvd__poll_timeout(
            r->ab ? r->ab->deadline : 0,
            r->progress_ms > 0 ? moved_ms + r->progress_ms : 0, -1);
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll failed: %s", strerror(errno));
            return HVD_ESYS;
        }
        int rc = hvd__abort_poll(r->ab, p[0].revents != 0, err, errlen);
        if (rc < 0)
            return rc;
        /* A stopped or hung peer keeps its connection open: only the
         * silence tells. */
        if (r->progress_ms > 0 && hvd__now_ms() - moved_ms >= r->progress_ms) {
            snprintf(err, errlen,
                     "no progress for %d s waiting for %s (it, or a rank "
                     "before it, is stopped or hung)",
                     (r->progress_ms + 999) / 1000,
                     ri < sc->nrecv ? from->desc : to->desc);
            return HVD_ETIMEDOUT;
        }
    }
}

int hvd__ring_is_small(size_t count, hvd_dtype dt)
{
    return count * hvd_dtype_size(hvd__acc_dtype(dt)) <= RING_SMALL;
}

size_t hvd__ring_seg_first(size_t count, int size, int i)
{
    size_t base = count / (size_t)size, extra = count % (size_t)size;
    return (size_t)i * base + ((size_t)i < extra ? (size_t)i : extra);
}

size_t *hvd__ring_bounds(size_t count, int size)
{
    size_t *bounds = malloc(((size_t)size + 1) * sizeof(*bounds));
    for (int i = 0; bounds && i <= size; i++)
        bounds[i] = hvd__ring_seg_first(count, size, i);
    return bounds;
}

struct ar_ctx {
    struct hvd_ring *r;
    const uint8_t *src; /* the caller's input */
    uint8_t *acc;
    uint8_t *out;
    size_t acc_es, out_es;
    hvd_dtype dt, acc_dt;
    hvd_op op;
    int init; /* acc is not src: load each chunk from src before folding */
    const size_t *first; /* first element of each receive step's segment */
};

/* Reduce-scatter data: fold into the accumulator (loaded from the input
 * chunk by chunk, so that no up-front copy delays the first send); the
 * last step's segment is complete then, so it is finished (averaged,
 * narrowed). */
static void ar_process(void *vctx, int step, size_t first, const uint8_t *d,
                       size_t n)
{
    struct ar_ctx *c = vctx;
    size_t e = c->first[step] + first;
    uint8_t *acc = c->acc + e * c->acc_es;
    if (c->init)
        hvd__widen(acc, c->src + e * c->out_es, n, c->dt);
    hvd__reduce(acc, d, n, c->acc_dt, c->op);
    if (step == c->r->size - 2)
        hvd__finish(c->out + e * c->out_es, acc, n, c->dt, c->op, c->r->size);
}

/*
 * Small tensors: every rank's whole input goes around the ring (n-1 steps
 * instead of 2(n-1)), then each rank folds them in rank order, so every
 * rank computes the same bits.
 */
int hvd__ring_gather_reduce(struct hvd_ring *r, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, char *err, size_t errlen)
{
    if (r->size == 1)
        return hvd__ring_allreduce(r, sendbuf, recvbuf, count, dt, op, err,
                                   errlen);
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t block = count * hvd_dtype_size(acc_dt);
    size_t *bytes = malloc((size_t)r->size * sizeof(*bytes));
    int rc = HVD_ENOMEM;

    if (bytes == NULL ||
        hvd__grow(&r->acc, &r->acc_cap, block * (size_t)r->size))
        goto out;
    for (int i = 0; i < r->size; i++)
        bytes[i] = block;
    uint8_t *all = r->acc;
    hvd__widen(all + block * (size_t)r->rank, sendbuf, count, dt);
    rc = hvd__ring_allgatherv(r, all + block * (size_t)r->rank, all, bytes, err,
                              errlen);
    if (rc)
        goto out;
    for (int i = 1; i < r->size; i++)
        hvd__reduce(all, all + block * (size_t)i, count, acc_dt, op);
    hvd__finish(recvbuf, all, count, dt, op, r->size);
out:
    free(bytes);
    return rc;
}

int hvd__ring_allreduce(struct hvd_ring *r, const void *sendbuf, void *recvbuf,
                        size_t count, hvd_dtype dt, hvd_op op, char *err,
                        size_t errlen)
{
    int n = r->size;
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt), aes = hvd_dtype_size(acc_dt);
    uint8_t *out = recvbuf;
    int rc = 0;

    if (es == 0 || (int)op < HVD_SUM || op > HVD_PRODUCT)
        return HVD_EINVAL;
    if (n == 1) {
        if (acc_dt != dt) {
            if (hvd__grow(&r->acc, &r->acc_cap, count > 0 ? count * aes : 1))
                return HVD_ENOMEM;
            hvd__widen(r->acc, sendbuf, count, dt);
            hvd__finish(out, r->acc, count, dt, op, 1);
        } else {
            if (sendbuf != recvbuf && count > 0)
                memcpy(recvbuf, sendbuf, count * es);
            hvd__finish(out, out, count, dt, op, 1);
        }
        return 0;
    }
    if (hvd__ring_is_small(count, dt))
        return hvd__ring_gather_reduce(r, sendbuf, recvbuf, count, dt, op, err,
                                       errlen);
    size_t *bounds = hvd__ring_bounds(count, n);
    if (bounds == NULL)
        return HVD_ENOMEM;
    rc = hvd__ring_reduce_segs(r, sendbuf, recvbuf, count, dt, op, bounds, err,
                               errlen);
    free(bounds);
    return rc;
}

int hvd__ring_reduce_segs(struct hvd_ring *r, const void *sendbuf,
                          void *recvbuf, size_t count, hvd_dtype dt, hvd_op op,
                          const size_t *bounds, char *err, size_t errlen)
{
    if (r->size == 1)
        return hvd__ring_allreduce(r, sendbuf, recvbuf, count, dt, op, err,
                                   errlen);
    int n = r->size, rank = r->rank;
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt), aes = hvd_dtype_size(acc_dt);
    const uint8_t *src = sendbuf;
    uint8_t *out = recvbuf, *acc = recvbuf;
    int rc = 0;

    if (acc_dt != dt) {
        if (hvd__grow(&r->acc, &r->acc_cap, count * aes))
            return HVD_ENOMEM;
        acc = r->acc;
    }
#define SEG_FIRST(i) bounds[i]
#define SEG_COUNT(i) (bounds[(i) + 1] - bounds[i])
    int steps = 2 * (n - 1);
    struct step *send = calloc((size_t)steps, sizeof(*send));
    struct step *recv = calloc((size_t)steps, sizeof(*recv));
    size_t *first = calloc((size_t)steps, sizeof(*first));
    if (send == NULL || recv == NULL || first == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    for (int s = 0; s < n - 1; s++) {
        /* Reduce-scatter: pass segment rank-s on, fold in rank-s-1. */
        int ss = ((rank - s) % n + n) % n, rs = ((rank - s - 1) % n + n) % n;
        send[s] = (struct step){acc + SEG_FIRST(ss) * aes, aes, SEG_COUNT(ss),
                                s - 1, 0};
        recv[s] = (struct step){NULL, aes, SEG_COUNT(rs), -1, 0};
        first[s] = SEG_FIRST(rs);
        /* Allgather: pass finished segment rank+1-s on, store rank-s. */
        int as = ((rank + 1 - s) % n + n) % n, ar = ((rank - s) % n + n) % n;
        int g = n - 1 + s;
        send[g] = (struct step){out + SEG_FIRST(as) * es, es, SEG_COUNT(as),
                                g - 1, 0};
        recv[g] =
            (struct step){out + SEG_FIRST(ar) * es, es, SEG_COUNT(ar), -1, 1};
    }
    /* The first send is this rank's own segment, straight from the input
     * (widened first for half types). */
    size_t f0 = SEG_FIRST(rank), c0 = SEG_COUNT(rank);
    if (acc_dt != dt)
        hvd__widen(acc + f0 * aes, src + f0 * es, c0, dt);
    else
        send[0].ptr = (uint8_t *)(uintptr_t)(src + f0 * es);
    struct ar_ctx ctx = {r,  src,    acc, out,        aes,  es,
                         dt, acc_dt, op,  acc != src, first};
    struct sched sc = {send, steps, recv, steps, ar_process, &ctx};
    rc = run(r, 0, &sc, err, errlen);
#undef SEG_FIRST
#undef SEG_COUNT
out:
    free(send);
    free(recv);
    free(first);
    return rc;
}

int hvd__ring_broadcast(struct hvd_ring *r, void *buf, size_t bytes, int root,
                        char *err, size_t errlen)
{
    if (root < 0 || root >= r->size)
        return HVD_EINVAL;
    if (r->size == 1 || bytes == 0)
        return 0;
    /* A chain from root around the ring; each rank forwards what it got,
     * except the one before root. */
    struct step recv = {buf, 1, bytes, -1, 1};
    struct step send = {buf, 1, bytes, r->rank == root ? -1 : 0, 0};
    int forward = (r->rank + 1) % r->size != root;
    struct sched sc = {&send, forward, &recv, r->rank != root, NULL, NULL};
    return run(r, 0, &sc, err, errlen);
}

/* The m blocks first, first+1, ... (mod n) of out as receive-ready
 * steps: one, or two where the run wraps past the last block. */
static int block_steps(uint8_t *out, const size_t *off, const size_t *bytes,
                       int n, int first, int m, struct step *st)
{
    int ns = 0;
    first = (first % n + n) % n;
    while (m > 0) {
        int len = first + m <= n ? m : n - first;
        size_t end = off[first + len - 1] + bytes[first + len - 1];
        st[ns++] = (struct step){out + off[first], 1, end - off[first], -1, 1};
        m -= len;
        first = 0;
    }
    return ns;
}

/*
 * Bruck's allgather: in step k each rank, holding the 2^k blocks that end
 * at its own, sends them on link k to rank + 2^k and gets as many from
 * rank - 2^k (fewer in the last step, just the ones still missing).
 */
static int bruck_allgatherv(struct hvd_ring *r, uint8_t *out, const size_t *off,
                            const size_t *bytes, char *err, size_t errlen)
{
    int n = r->size, rank = r->rank;
    for (int k = 0, d = 1; d < n; k++, d *= 2) {
        int m = d < n - d ? d : n - d;
        struct step send[2], recv[2];
        struct sched sc = {send, 0, recv, 0, NULL, NULL};
        sc.nsend = block_steps(out, off, bytes, n, rank - m + 1, m, send);
        sc.nrecv = block_steps(out, off, bytes, n, rank - d - m + 1, m, recv);
        int rc = run(r, k, &sc, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int hvd__ring_allgatherv(struct hvd_ring *r, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen)
{
    int n = r->size, rank = r->rank;
    size_t *off = calloc((size_t)n, sizeof(*off));
    struct step *send = calloc((size_t)n, sizeof(*send));
    struct step *recv = calloc((size_t)n, sizeof(*recv));
    uint8_t *out = recvbuf;
    int rc = 0;

    if (off == NULL || send == NULL || recv == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    for (int i = 1; i < n; i++)
        off[i] = off[i - 1] + bytes[i - 1];
    if (bytes[rank] > 0 && out + off[rank] != sendbuf)
        memcpy(out + off[rank], sendbuf, bytes[rank]);
    if (n >= 4 && (1 << r->nlinks) >= n &&
        off[n - 1] + bytes[n - 1] <= RING_BRUCK_MAX) {
        rc = bruck_allgatherv(r, out, off, bytes, err, errlen);
        goto out;
    }
    for (int s = 0; s < n - 1; s++) {
        int sb = ((rank - s) % n + n) % n, rb = ((rank - s - 1) % n + n) % n;
        send[s] = (struct step){out + off[sb], 1, bytes[sb], s - 1, 0};
        recv[s] = (struct step){out + off[rb], 1, bytes[rb], -1, 1};
    }
    struct sched sc = {send, n - 1, recv, n - 1, NULL, NULL};
    rc = run(r, 0, &sc, err, errlen);
out:
    free(off);
    free(send);
    free(recv);
    return rc;
}

/* The transport: every collective on the ring of all ranks (c->ring). */

static int tcp_connect(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                       size_t errlen)
{
    return hvd__connect_ring(c, &c->ring, 0, NULL, l, err, errlen);
}

static int tcp_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op, char *err,
                         size_t errlen)
{
    return hvd__ring_allreduce(&c->ring, sendbuf, recvbuf, count, dt, op, err,
                               errlen);
}

static int tcp_reduce_segs(struct hvd_ctx *c, const void *sendbuf,
                           void *recvbuf, size_t count, hvd_dtype dt, hvd_op op,
                           const size_t *bounds, char *err, size_t errlen)
{
    return hvd__ring_reduce_segs(&c->ring, sendbuf, recvbuf, count, dt, op,
                                 bounds, err, errlen);
}

static int tcp_gather_reduce(struct hvd_ctx *c, const void *sendbuf,
                             void *recvbuf, size_t count, hvd_dtype dt,
                             hvd_op op, char *err, size_t errlen)
{
    return hvd__ring_gather_reduce(&c->ring, sendbuf, recvbuf, count, dt, op,
                                   err, errlen);
}

static int tcp_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                         char *err, size_t errlen)
{
    return hvd__ring_broadcast(&c->ring, buf, bytes, root, err, errlen);
}

static int tcp_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          const size_t *bytes, char *err, size_t errlen)
{
    return hvd__ring_allgatherv(&c->ring, sendbuf, recvbuf, bytes, err, errlen);
}

static void tcp_describe(const struct hvd_ctx *c, char *out, size_t len)
{
    if (c->size == 1)
        snprintf(out, len, "none (a job of one)");
    else
        snprintf(out, len, "TCP ring (%d ranks)", c->size);
}

const struct hvd_transport hvd__transport_ring = {
    .name = "ring",
    .connect = tcp_connect,
    .allreduce = tcp_allreduce,
    .reduce_segs = tcp_reduce_segs,
    .gather_reduce = tcp_gather_reduce,
    .broadcast = tcp_broadcast,
    .allgatherv = tcp_allgatherv,
    .describe = tcp_describe,
};
