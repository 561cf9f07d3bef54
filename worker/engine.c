/* The background thread: owns the sockets, runs collectives in the order
 * they were submitted, and turns a peer's failure into errors. */
#include "worker/engine.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/eager.h"
#include "worker/exec.h"
#include "worker/failure.h"
#include "worker/fusion.h"
#include "worker/gpu/device.h"
#include "worker/gpu/gpu.h"
#include "worker/join.h"
#include "worker/setting.h"
#include "worker/sock.h"
#include "worker/stall.h"
#include "worker/standin.h"
#include "worker/steady.h"
#include "worker/transport/transport.h"
#include "worker/wait.h"

static void finish_op(struct hvd_ctx *c, struct hvd_request *op)
{
    pthread_mutex_lock(&c->mu);
    atomic_store(&op->done, 1);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* By enum hvd_op_kind (4 is no operation). */
static const char *const kind_names[] = {
    "allreduce",       "broadcast",         "allgather", "barrier",
    "operation",       "reducescatter",     "alltoall",  "join",
    "process set add", "process set remove"};

/* One part is done; the op completes with its last part. */
static void complete(struct hvd_ctx *c, struct hvd_work *w, int rc,
                     const char *err)
{
    struct hvd_request *op = w->op;
    char why[HVD_ERRMSG];
    hvd__eager_forget(c, w);
    /* A part failed before it ran: its stream's mark is not needed. */
    hvd__gpu_wait_mark(&w->mark, why, sizeof(why));
    if (rc != 0 && op->rc == 0) {
        op->rc = rc;
        snprintf(op->err, sizeof(op->err), "%s '%s': %s", kind_names[w->kind],
                 w->name, err && err[0] ? err : hvd_strerror(rc));
    }
    if (--op->left == 0 && !hvd__standin_done(w))
        finish_op(c, op);
}

static size_t slot_of(const struct hvd_ctx *c, const char *name, int pset)
{
    size_t h = 1469598103934665603ull ^ (size_t)pset;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h % c->npend_slots;
}

/* Finds (and with take, unlinks) the pending part with this name in this
 * process set. */
static struct hvd_work *pending(struct hvd_ctx *c, const char *name, int pset,
                                int take)
{
    struct hvd_work **pp = &c->pend[slot_of(c, name, pset)];
    while (*pp && ((*pp)->pset != pset || strcmp((*pp)->name, name) != 0))
        pp = &(*pp)->pend_next;
    struct hvd_work *w = *pp;
    if (w && take) {
        *pp = w->pend_next;
        c->npend--;
    }
    return w;
}

/* Fails every part that waits for negotiation (after a peer failure or
 * at shutdown). */
static void fail_pending(struct hvd_ctx *c, int rc, const char *msg)
{
    for (size_t i = 0; i < c->npend_slots; i++)
        while (c->pend[i]) {
            struct hvd_work *w = c->pend[i];
            c->pend[i] = w->pend_next;
            complete(c, w, rc, msg);
        }
    c->npend = 0;
    c->nfresh = 0;
}

/* Takes a submitted part: it waits in the pending table and is announced
 * in the next cycle. */
static void admit(struct hvd_ctx *c, struct hvd_work *w)
{
    if (c->failed) {
        complete(c, w, c->fail_rc, c->fail_msg);
        return;
    }
    if (pending(c, w->name, w->pset, 0)) {
        complete(c, w, HVD_EINVAL,
                 "an operation of this name is already in flight; names "
                 "must be unique among unfinished operations");
        return;
    }
    if (c->nfresh == c->fresh_cap) {
        size_t cap = c->fresh_cap ? 2 * c->fresh_cap : 64;
        struct hvd_work **f = realloc(c->fresh, cap * sizeof(*f));
        if (f == NULL) {
            complete(c, w, HVD_ENOMEM, "out of memory");
            return;
        }
        c->fresh = f;
        c->fresh_cap = cap;
    }
    w->submit_us = hvd__now_us();
    size_t s = slot_of(c, w->name, w->pset);
    w->pend_next = c->pend[s];
    c->pend[s] = w;
    c->npend++;
    c->fresh[c->nfresh++] = w;
}

/* Tensors above this size go alone: their collective's fixed cost is
 * small next to their data, and packing them would only add copies
 * (measured: fusing 130 MiB of ResNet-like gradients whole was slower). */
#define FUSE_MAX_TENSOR (1u << 20)

/* Whether response j can join a fused group that starts with work w and
 * holds bytes so far. */
static int fusable(const struct hvd_ctx *c, const struct hvd_work *w,
                   const struct hvd_resp *rj, size_t bytes)
{
    const struct hvd_req *q = &rj->req;
    size_t es = hvd_dtype_size(w->dtype);
    return c->fusion_threshold > 0 && rj->error == 0 && !q->compress &&
           q->pset == 0 && w->pset == 0 && w->op_kind != HVD_ADASUM &&
           !w->compress && q->prescale == 1 && q->postscale == 1 &&
           w->prescale == 1 && w->postscale == 1 &&
           w->count * es <= FUSE_MAX_TENSOR &&
           q->count * es <= FUSE_MAX_TENSOR && w->kind == HVD_OP_ALLREDUCE &&
           q->kind == HVD_REQ_ALLREDUCE && q->dtype == w->dtype &&
           q->op == w->op_kind && q->device == w->device &&
           bytes + q->count * hvd_dtype_size(w->dtype) <= c->fusion_threshold;
}

/* The timeline's phases of one tensor: waiting for its cycle, waiting for
 * the other ranks, and the collective (fused with n-1 others). */
static void trace(struct hvd_ctx *c, const struct hvd_work *w, int64_t start,
                  int n)
{
    static const char *ops[] = {
        "ALLREDUCE",       "BROADCAST",         "ALLGATHER", "BARRIER",
        "OPERATION",       "REDUCESCATTER",     "ALLTOALL",  "JOIN",
        "PROCESS_SET_ADD", "PROCESS_SET_REMOVE"};
    char args[160];
    /* A stand-in was never submitted here: the tensor is the others'. */
    if (c->tl.fd < 0 || w->op->standin)
        return;
    int64_t end = hvd__now_us();
    hvd__timeline_phase(&c->tl, w->name, "QUEUE", w->submit_us,
                        w->announce_us - w->submit_us, NULL);
    hvd__timeline_phase(&c->tl, w->name, "NEGOTIATE", w->announce_us,
                        start - w->announce_us, NULL);
    snprintf(args, sizeof(args),
             "\"dtype\": %d, \"count\": %zu, \"fused_with\": %d", (int)w->dtype,
             w->count, n > 1 ? n - 1 : 0);
    hvd__timeline_phase(&c->tl, w->name, ops[w->kind], start, end - start,
                        args);
}

/* The part this rank runs for response r: its own, or a stand-in when
 * r's process set leaves this rank out or this rank has joined; NULL
 * when there is none (an error for names this rank never submitted, or
 * no memory, which fails this rank). */
static struct hvd_work *part_for(struct hvd_ctx *c, const struct hvd_resp *r)
{
    char err[HVD_ERRMSG];
    struct hvd_work *w = pending(c, r->req.name, r->req.pset, 1);
    if (w || r->error)
        return w;
    if ((w = hvd__standin_new(c, &r->req, err, sizeof(err))) == NULL)
        hvd__set_failed(c, HVD_ENOMEM, err);
    return w;
}

/* Gives w its process set, which must still exist. */
static int bind_set(struct hvd_ctx *c, struct hvd_work *w)
{
    const struct hvd_pset *s = hvd__pset_get(&c->psets, w->pset);
    if (s == NULL) {
        snprintf(w->err, sizeof(w->err),
                 "process set %d was removed while the collective waited",
                 w->pset);
        return HVD_EINVAL;
    }
    w->set_size = s->n;
    w->set_ranks = s->ranks;
    w->set_rank = w->op->standin ? -1 : s->me;
    return 0;
}

/* Runs the operations every rank asked for, in the agreed order; runs of
 * allreduces that fit the fusion threshold go together. */
static void respond(struct hvd_ctx *c, struct hvd_resp *resp, size_t n,
                    const struct hvd_eager_in *in)
{
    struct hvd_work **group = malloc((n + 1) * sizeof(*group));
    /* Every rank remembers the same responses in the same order. */
    for (size_t i = 0; i < n; i++)
        if (resp[i].error == 0)
            hvd__neg_cache_put(&c->neg, &resp[i].req);
    for (size_t i = 0; i < n;) {
        struct hvd_work *w = part_for(c, &resp[i]);
        if (w == NULL) {
            i++;
            continue;
        }
        if (resp[i].error) {
            complete(c, w, resp[i].error, resp[i].msg);
            i++;
            continue;
        }
        if (w->kind == HVD_OP_JOIN) {
            w->root = resp[i].req.root; /* the rank that joined last */
            complete(c, w, 0, NULL);
            i++;
            continue;
        }
        if (!c->failed && hvd__eager_ready(c, in, &resp[i])) {
            int64_t t0 = hvd__now_us();
            hvd__eager_run(c, in, &resp[i], w);
            c->eager_runs++;
            trace(c, w, t0, 1);
            complete(c, w, 0, NULL);
            i++;
            continue;
        }
        int ng = 0;
        size_t bytes = w->count * hvd_dtype_size(w->dtype);
        if (group)
            group[ng++] = w;
        for (i++; group && i < n && fusable(c, w, &resp[i], bytes) &&
                  !hvd__eager_ready(c, in, &resp[i]);
             i++) {
            struct hvd_work *x = part_for(c, &resp[i]);
            if (x == NULL)
                continue;
            group[ng++] = x;
            bytes += x->count * hvd_dtype_size(x->dtype);
        }
        char err[HVD_ERRMSG] = "";
        int64_t t0 = hvd__now_us();
        int rc = 0;
        for (int k = 0; k < (ng ? ng : 1) && rc == 0; k++)
            rc = bind_set(c, ng ? group[k] : w);
        rc = c->failed   ? c->fail_rc
             : rc        ? rc
             : w->device ? hvd__device_exec(c, ng ? group : &w, ng ? ng : 1,
                                            err, sizeof(err))
             : ng > 1    ? hvd__fused_allreduce(c, group, ng, err, sizeof(err))
                         : hvd__exec(c, w);
        if (ng <= 1 && !w->device)
            snprintf(err, sizeof(err), "%s", w->err);
        if (rc == HVD_EPEER || rc == HVD_ESYS || rc == HVD_ETIMEDOUT)
            rc = hvd__ring_failed(c, rc, err);
        for (int k = 0; k < (ng ? ng : 1); k++) {
            trace(c, ng ? group[k] : w, t0, ng);
            complete(c, ng ? group[k] : w, rc, c->failed ? c->fail_msg : err);
        }
    }
    free(group);
}

/*
 * Feeds every rank's message to the table in rank order. Cached requests
 * that every rank sent this cycle are ready at once (in cache order, the
 * same on every rank): in steady state that is all of them, every rank
 * sent the same bitmap, and the work is reading rank 0's plus one step
 * per ready tensor.
 */
static int feed(struct hvd_ctx *c, const uint8_t *const *msgs,
                const size_t *lens, struct hvd_resp **resp, size_t *nresp)
{
    size_t nbytes = (c->neg.ncache + 7) / 8;
    const uint8_t **bits = c->per_rank.bits;
    struct hvd_req **reqs = c->per_rank.reqs;
    size_t *nreqs = c->per_rank.nreqs;
    uint8_t *every = malloc(nbytes + 1);
    int rc = HVD_ENOMEM;

    memset(reqs, 0, (size_t)c->size * sizeof(*reqs));
    memset(nreqs, 0, (size_t)c->size * sizeof(*nreqs));
    if (every == NULL)
        goto out;
    rc = hvd__neg_decode(&c->neg, msgs[0], lens[0], &bits[0], &reqs[0],
                         &nreqs[0]);
    /* Every rank sent rank 0's bitmap and no named request (eager_in.same,
     * the steady state): rank 0's message stands for all of them. */
    int n = c->eager_in.same && nreqs[0] == 0 ? 1 : c->size;
    for (int r = 1; r < n && rc == 0; r++)
        rc = hvd__neg_decode(&c->neg, msgs[r], lens[r], &bits[r], &reqs[r],
                             &nreqs[r]);
    if (rc)
        goto out;
    memset(every, 0xff, nbytes);
    for (int r = 0; r < n; r++)
        for (size_t b = 0; b < nbytes; b++)
            every[b] &= bits[r][b];
    for (size_t id = 0; id < c->neg.ncache && rc == 0; id++)
        if (every[id / 8] >> (id % 8) & 1)
            rc = hvd__neg_ready_cached(&c->neg, id, resp, nresp);
    for (int r = 0; r < n && rc == 0; r++) {
        for (size_t id = 0; id < c->neg.ncache && rc == 0; id++)
            if ((bits[r][id / 8] & ~every[id / 8]) >> (id % 8) & 1)
                rc = hvd__neg_add_cached(&c->neg, r, id, resp, nresp);
        for (size_t i = 0; i < nreqs[r] && rc == 0; i++) {
            struct hvd_req *q = &reqs[r][i];
            if (q->kind == HVD_REQ_STALL)
                rc = r != 0 ? 0
                            : hvd__neg_fail_stalled(&c->neg, q->name, q->pset,
                                                    c->stall_shutdown_s, resp,
                                                    nresp);
            else
                rc = hvd__neg_add(&c->neg, r, q, resp, nresp);
        }
    }
out:
    for (int r = 0; r < c->size; r++)
        hvd__neg_free_reqs(reqs[r], nreqs[r]);
    free(every);
    return rc;
}

/*
 * One negotiation cycle: every rank's new requests go to every rank (a
 * ring allgather, so each rank plays the coordinator's part on identical
 * input), each rank feeds them to its table in rank order, and runs what
 * every rank has asked for.
 */
static void cycle(struct hvd_ctx *c)
{
    struct hvd_req *mine = calloc(c->nfresh + c->nstall + 1, sizeof(*mine));
    struct hvd_resp *resp = NULL;
    size_t nresp = 0, *lens = c->per_rank.lens;
    const uint8_t **msgs = c->per_rank.msgs;
    uint8_t *enc = NULL, *msg = NULL;
    size_t enclen = 0, msglen = 0;
    char err[HVD_ERRMSG] = "";
    int rc = HVD_ENOMEM;

    c->last_cycle_us = hvd__now_us();
    hvd__coll_reset_abort(c);
    hvd__coll_cycle_start(c);
    hvd__timeline_cycle(&c->tl, c->last_cycle_us);
    if (mine == NULL)
        goto out;
    for (size_t i = 0; i < c->nfresh; i++) {
        struct hvd_work *w = c->fresh[i];
        w->announce_us = c->last_cycle_us;
        mine[i] = (struct hvd_req){.kind = (uint8_t)w->kind,
                                   .dtype = (uint8_t)w->dtype,
                                   .op = (uint8_t)w->op_kind,
                                   .root = w->root,
                                   .count = w->count,
                                   .row = w->row,
                                   .shape = w->shape,
                                   .name = w->name,
                                   .pset = w->pset,
                                   .compress = (uint8_t)w->compress,
                                   .device = (uint8_t)w->device,
                                   .prescale = w->prescale,
                                   .postscale = w->postscale};
        hvd__eager_note(c, w, &mine[i]);
    }
    for (size_t i = 0; i < c->nstall; i++)
        mine[c->nfresh + i] = (struct hvd_req){.kind = HVD_REQ_STALL,
                                               .name = c->stall[i].name,
                                               .pset = c->stall[i].pset};
    rc = hvd__neg_encode(&c->neg, mine, c->nfresh + c->nstall, &enc, &enclen);
    for (size_t i = 0; i < c->nstall; i++)
        free(c->stall[i].name);
    c->nstall = 0;
    if (rc)
        goto out;
    c->nfresh = 0;
    /* The message: the small tensors' data, then the requests. */
    if ((rc = hvd__eager_encode(c, enc, enclen, &msg, &msglen)) != 0)
        goto out;
    struct hvd_eager_in *in = &c->eager_in;
    rc = hvd__steady_on(c) ? hvd__steady_exchange(c, msg, msglen, msgs, lens,
                                                  err, sizeof(err))
                           : 0;
    if (rc == 0 && (rc = hvd__exec_gather(c, msg, msglen, msgs, lens, err,
                                          sizeof(err))) == 0)
        rc = hvd__eager_decode(c, in, msgs, lens);
    else if (rc == 1)
        rc = 0;
    if (rc == 0)
        rc = feed(c, msgs, lens, &resp, &nresp);
    if (rc == 0)
        respond(c, resp, nresp, in);
out:
    if (rc == HVD_EPEER || rc == HVD_ESYS || rc == HVD_ETIMEDOUT)
        rc = hvd__ring_failed(c, rc, err);
    else if (rc)
        hvd__set_failed(c, rc,
                        "negotiation failed: the ranks' requests were "
                        "malformed or memory ran out");
    if (c->failed)
        fail_pending(c, c->fail_rc, c->fail_msg);
    for (size_t i = 0; i < nresp; i++)
        free(resp[i].req.name);
    free(resp);
    free(enc);
    free(msg);
    free(mine);
}

/* Carries out a timeline request (hvd__engine_timeline): the timeline is
 * this thread's, so it alone opens and closes it. */
static void set_timeline(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_timeline tl;
    if (op->tl_path == NULL) {
        hvd__timeline_close(&c->tl);
        return;
    }
    if (hvd__timeline_open(&tl, op->tl_path, op->tl_mark_cycles) != 0) {
        op->rc = HVD_ESYS;
        snprintf(op->err, sizeof(op->err), "cannot open '%.300s': %s",
                 op->tl_path, strerror(errno));
        return;
    }
    hvd__timeline_close(&c->tl);
    c->tl = tl;
}

/* Takes everything submitted; a shutdown request goes to c->stop, for the
 * background thread. */
static void take_submitted(struct hvd_ctx *c)
{
    pthread_mutex_lock(&c->mu);
    struct hvd_request *op = c->head;
    c->head = c->tail = NULL;
    atomic_store(&c->pending, 0);
    pthread_mutex_unlock(&c->mu);
    while (op) {
        /* Admitting the last part may complete the op and let its caller
         * free it: read everything needed first. */
        struct hvd_request *next = op->next;
        int nparts = op->nparts;
        if (op->shutdown)
            c->stop = op;
        if (op->timeline) {
            set_timeline(c, op);
            finish_op(c, op);
        }
        for (int i = 0; i < nparts; i++)
            admit(c, &op->parts[i]);
        op = next;
    }
}

/* When the heartbeat below is due: a peer timeout after the last cycle. */
static int64_t heartbeat_at(const struct hvd_ctx *c)
{
    return c->last_cycle_us + (int64_t)c->peer_timeout_s * 1000000;
}

/*
 * Names this rank announced still wait for other ranks, and no cycle ran
 * for the peer timeout: start one anyway. If a rank is stopped or hung
 * (rank 0 included, whose stall inspector would otherwise end the wait),
 * it fails on the data-plane timeout; a rank that is merely busy joins it
 * at once from its idle background thread, at the cost of one empty cycle.
 */
static int heartbeat_due(const struct hvd_ctx *c, int64_t now)
{
    return !c->failed && c->size > 1 && c->neg.used > 0 &&
           now >= heartbeat_at(c);
}

/* When this rank's next cycle may start: cycle_ms after its last (a job
 * of one has nobody to batch with). */
static int64_t due_at(const struct hvd_ctx *c)
{
    return c->size == 1 ? 0 : c->last_cycle_us + (int64_t)(c->cycle_ms * 1000);
}

/* Whether a cycle must run now. */
static int cycle_due(struct hvd_ctx *c, int64_t now)
{
    return (c->nfresh > 0 && now >= due_at(c)) || c->nstall > 0 ||
           hvd__coll_peer_started(c) || heartbeat_due(c, now);
}

/* Says goodbye to the rendezvous and finishes the shutdown request. */
static void stop_engine(struct hvd_ctx *c)
{
    fail_pending(c, HVD_ESHUTDOWN, "hvd_shutdown() was called");
    hvd__join_leave(c);
    finish_op(c, c->stop);
}

/* Marks this thread as asleep (on) or awake, for the callers that submit
 * and, through shared memory, for the other local ranks. */
static void set_asleep(struct hvd_ctx *c, int on)
{
    atomic_store(&c->sleeping, on);
    hvd__shm_set_sleeping(&c->shm, on);
}

static void kick(struct hvd_ctx *c)
{
    uint64_t one = 1;
    while (write(c->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

/* A caller that ran the engine lately is likely to do so again at once:
 * for this long, another rank's cycle is left to it. */
#define INLINE_WINDOW_US 1000
#define INLINE_GRACE_US 30

/* Whether a caller ran the engine lately. */
static int callers_run(struct hvd_ctx *c)
{
    return hvd__now_us() < atomic_load(&c->inline_until_us);
}

/* Woken by another rank's cycle while callers run the engine: lets a
 * caller about to submit take that cycle on its own thread, instead of
 * this thread taking it and the caller waiting for this thread. Only the
 * failure channel cuts the pause short. */
static void defer_to_caller(struct hvd_ctx *c)
{
    if (!callers_run(c) || atomic_load(&c->nwaiting) > 0)
        return;
    struct pollfd q = {.fd = c->rdv_fd, .events = POLLIN};
    struct timespec grace = {0, INLINE_GRACE_US * 1000};
    ppoll(&q, 1, &grace, NULL);
}

/* Takes the engine back after a sleep. Callers that would take it
 * meanwhile leave their collectives to this thread instead (engine_wait):
 * taking it first at every call, they woke the thread at every unlock
 * only for it to lose the engine again (measured: half a futex wake-up
 * per rank per collective at -np 64). */
static void retake(struct hvd_ctx *c)
{
    atomic_store(&c->thread_waits, 1);
    pthread_mutex_lock(&c->run_mu);
    atomic_store(&c->thread_waits, 0);
}

/* Another rank's cycle found this one idle: the thread waits this long
 * for its caller to ask before it joins (idle_join_us). */
#define IDLE_JOIN_US 2000
#define IDLE_JOIN_LONG_US 100000

/* Whether this rank has no work of its own in flight. Then no cycle can
 * finish anything without its next request (but a process set's without
 * it), and a cycle it joins empty-handed is one more for every rank. */
static int rank_idle(const struct hvd_ctx *c)
{
    return c->npend == 0 && c->nstall == 0 && !c->failed && !c->stop &&
           atomic_load(&c->pending) == 0;
}

/* Whether a process set leaves this rank out: its collectives need this
 * rank's cycles though this rank asks nothing. */
static int left_out(const struct hvd_ctx *c)
{
    for (size_t i = 0; i < c->psets.n; i++)
        if (c->psets.v[i]->me < 0)
            return 1;
    return 0;
}

/*
 * How long an idle rank's thread waits for its caller. A cycle it joins
 * empty-handed finishes none of the others' collectives in a set that
 * holds this rank (each waits for this rank's request too) and costs
 * every rank one more cycle; it only keeps their wait within the peer
 * timeout. So the wait is long (measured: at -np 64 on two cores a woken
 * caller often took over 2 ms to run, its thread joined without it, and
 * every allreduce took two cycles), unless a process set leaves this
 * rank out.
 */
static int64_t idle_join_us(const struct hvd_ctx *c)
{
    if (left_out(c))
        return IDLE_JOIN_US;
    int64_t cap = (int64_t)c->peer_timeout_s * 250000; /* a quarter */
    return cap > 0 && cap < IDLE_JOIN_LONG_US ? cap : IDLE_JOIN_LONG_US;
}

/*
 * Another rank started a cycle while this one is idle: gives this rank's
 * caller up to idle_join_us to ask, so that the cycle carries its request
 * (measured: at -np 4 and more ranks than CPUs, every allreduce took two
 * cycles, the first started by the rank whose caller asked first and
 * joined empty-handed by every other). Sleeps without the engine, so a
 * caller may take it; a submit or the failure channel cuts the wait short.
 */
static void wait_for_caller(struct hvd_ctx *c)
{
    int64_t us = idle_join_us(c);
    struct pollfd q[2] = {{.fd = c->wake_fd, .events = POLLIN},
                          {.fd = c->rdv_fd, .events = POLLIN}};
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    uint64_t v;
    /* A kick whose work was taken already must not end the wait: read it
     * first, then look for work (a submit counts before it kicks). */
    while (read(c->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
    atomic_store(&c->sleeping, 1);
    if (atomic_load(&c->pending) == 0) {
        c->parked = 1;
        pthread_mutex_unlock(&c->run_mu);
        ppoll(q, 2, &ts, NULL);
        retake(c);
        c->parked = 0;
    }
    atomic_store(&c->sleeping, 0);
    if (q[0].revents)
        while (read(c->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR)
            ;
}

/*
 * The loop runs with run_mu held, and lets go of it only to sleep: a
 * caller waiting for its collective may take the engine meanwhile
 * (run_inline).
 */
static void *thread_main(void *arg)
{
    struct hvd_ctx *c = arg;
    int quiet = 0; /* the last sleep ended with nothing to do */
    /* The start of the last cycle this rank ran when the thread last
     * waited for its caller: it waits once for each cycle that the others
     * start (a cycle its caller runs meanwhile makes the next one new). */
    int64_t waited = -1;
    pthread_mutex_lock(&c->run_mu);
    for (;;) {
        take_submitted(c);
        if (c->stop) {
            stop_engine(c);
            pthread_mutex_unlock(&c->run_mu);
            return NULL;
        }
        int64_t now = hvd__now_us(), due = due_at(c);
        hvd__stall_check(c);
        if (cycle_due(c, now)) {
            if (waited != c->last_cycle_us && rank_idle(c)) {
                waited = c->last_cycle_us;
                wait_for_caller(c);
                continue;
            }
            cycle(c);
            quiet = 0;
            continue;
        }
        /* Nothing to do yet: spin a little, then sleep until new work, a
         * peer's cycle, a failure, or our own next cycle is due. After a
         * sleep that ended with nothing to do (a timeout; under MPI, a look
         * for bells; a caller's collective run on its own thread) there is
         * no burst of activity to catch: sleep again at once. While
         * callers run the engine, sleep at once too, so that the next
         * caller finds the engine free. */
        struct hvd_spin spin = {0};
        while (c->spin_us > 0 && !quiet && !callers_run(c) &&
               atomic_load(&c->pending) == 0 &&
               !(c->nfresh > 0 && hvd__now_us() >= due) &&
               !hvd__coll_peer_started(c) &&
               hvd__spin_spent(&spin) < c->spin_us)
            ;
        if (atomic_load(&c->pending) > 0 || hvd__coll_peer_started(c))
            continue;
        /* While callers run the engine and this rank has nothing in
         * flight, the other ranks' cycles need not wake this thread (in
         * shared memory or on a ring socket): the callers take those, and
         * the thread looks again when the window closes. Work in flight
         * is the thread's to carry on: then they wake it at once. An idle
         * rank's caller brings it to the next cycle anyway, so in shared
         * memory the others wake it only if they wait long for it. */
        int64_t watch = atomic_load(&c->inline_until_us) - now;
        c->peers_wake = !rank_idle(c) || left_out(c) ? HVD_SHM_WAKE_NOW
                        : watch <= 0                 ? HVD_SHM_WAKE_LATE
                                                     : HVD_SHM_AWAKE;
        atomic_store(&c->sleeping, 1);
        hvd__shm_set_sleeping(&c->shm, c->peers_wake);
        if (atomic_load(&c->pending) > 0 || hvd__coll_peer_started(c)) {
            set_asleep(c, 0);
            continue;
        }
        int64_t timeout = c->peers_wake ? -1 : watch; /* microseconds */
        if (c->nfresh > 0 && (timeout < 0 || timeout > due - now))
            timeout = due > now ? due - now : 0;
        /* Rank 0 looks for stalls every second while names wait; every
         * rank wakes for its heartbeat. */
        if (c->rank == 0 && !c->stall_off && c->neg.used > 0 &&
            (timeout < 0 || timeout > 1000000))
            timeout = 1000000;
        if (c->neg.used > 0 && !c->failed) {
            int64_t beat = heartbeat_at(c) - now;
            if (beat < 0)
                beat = 0;
            if (timeout < 0 || timeout > beat)
                timeout = beat;
        }
        /* Another rank starting a collective shows on a ring socket or,
         * in shared memory, as a wake-up on our eventfd; under MPI nothing
         * shows, and the thread wakes now and then to look. */
        int64_t idle = hvd__coll_idle_us(c);
        if (idle >= 0 && (timeout < 0 || timeout > idle))
            timeout = idle;
        int rings = c->peers_wake;
        struct timespec ts = {(time_t)(timeout / 1000000),
                              (long)(timeout % 1000000) * 1000};
        struct pollfd p[5] = {
            {.fd = c->wake_fd, .events = POLLIN},
            {.fd = c->rdv_fd, .events = POLLIN},
            {.fd = rings ? hvd__coll_watched_fd(c, 0) : -1, .events = POLLIN},
            {.fd = rings ? hvd__coll_watched_fd(c, 1) : -1, .events = POLLIN},
            {.fd = c->shm.n > 0 && c->peers_wake ? c->shm.efd[c->shm.me] : -1,
             .events = POLLIN}};
        c->parked = 1;
        waited = -1;
        pthread_mutex_unlock(&c->run_mu);
        int n = ppoll(p, 5, timeout < 0 ? NULL : &ts, NULL);
        if (n > 0 && !p[0].revents && !p[1].revents)
            defer_to_caller(c);
        retake(c);
        c->parked = 0;
        set_asleep(c, 0);
        hvd__shm_drain(&c->shm);
        quiet = n == 0 || (atomic_load(&c->pending) == 0 &&
                           !hvd__coll_peer_started(c) && !cycle_due(c, now));
        if (n <= 0)
            continue;
        if (p[0].revents) {
            uint64_t v;
            while (read(c->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR)
                ;
        }
        if (c->rdv_fd >= 0 && p[1].revents)
            hvd__read_rdv(c);
        if (c->failed)
            fail_pending(c, c->fail_rc, c->fail_msg);
    }
}

/*
 * A caller waiting for op runs the engine on its own thread while the
 * background thread sleeps: no hand-over to that thread and no wake-up
 * back, which cost more than a small collective (measured: 8 B at -np 2
 * in shared memory went from 11-90 to 6-8 us). It runs the cycles that
 * are due, spinning briefly for the other ranks to start theirs, and
 * stops when op is done or nothing is left to run now. Then the engine
 * goes back to the sleeping thread as that thread left it (asleep for the
 * other local ranks too, or not while callers run it), or the thread is woken
 * when there is work for it or its sleep needs a new timeout. Called with
 * run_mu held.
 */
static void run_inline(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_spin spin = {0};
    int parked = c->parked;
    /* The others need not wake the sleeping thread: this one is awake. */
    if (parked)
        hvd__shm_set_sleeping(&c->shm, 0);
    while (!atomic_load(&op->done) && !c->failed) {
        take_submitted(c);
        if (c->stop)
            break;
        hvd__stall_check(c);
        if (cycle_due(c, hvd__now_us())) {
            cycle(c);
            spin = (struct hvd_spin){0};
        } else if (c->nfresh > 0 || c->spin_us <= 0 ||
                   hvd__spin_spent(&spin) >= c->spin_us) {
            /* The next cycle is not due yet (HOROVOD_CYCLE_TIME), or the
             * other ranks are slow to ask: the sleeping thread waits. */
            break;
        }
    }
    atomic_store(&c->inline_until_us, hvd__now_us() + INLINE_WINDOW_US);
    if (!parked)
        return; /* the thread is awake and waits for run_mu */
    if (c->stop || c->nfresh > 0 || c->neg.used > 0 || c->nstall > 0 ||
        c->failed) {
        kick(c);
        return;
    }
    hvd__shm_set_sleeping(&c->shm, c->peers_wake);
    if (atomic_load(&c->pending) > 0 ||
        (c->peers_wake && hvd__coll_peer_started(c)))
        kick(c);
}

int hvd__engine_start(struct hvd_ctx *c)
{
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0)
        return HVD_ESYS;
    c->npend_slots = 1024;
    c->pend = calloc(c->npend_slots, sizeof(*c->pend));
    struct hvd_per_rank *pr = &c->per_rank;
    size_t n = (size_t)c->size;
    pr->lens = calloc(n, sizeof(*pr->lens));
    pr->nreqs = calloc(n, sizeof(*pr->nreqs));
    pr->msgs = calloc(n, sizeof(*pr->msgs));
    pr->bits = calloc(n, sizeof(*pr->bits));
    pr->reqs = calloc(n, sizeof(*pr->reqs));
    if (!pr->lens || !pr->nreqs || !pr->msgs || !pr->bits || !pr->reqs)
        return HVD_ENOMEM;
    const char *cc = getenv(HVD_ENV_CACHE_CAPACITY);
    size_t cache = cc ? (size_t)strtoull(cc, NULL, 10) : 1024;
    if (c->pend == NULL || hvd__neg_init(&c->neg, c->size, cache) != 0)
        return HVD_ENOMEM;
    c->neg.psets = &c->psets;
    const char *ft = getenv(HVD_ENV_FUSION_THRESHOLD);
    c->fusion_threshold = ft ? (size_t)strtoull(ft, NULL, 10) : 128u << 20;
    const char *sw = getenv(HVD_ENV_STALL_WARN);
    const char *ss = getenv(HVD_ENV_STALL_SHUTDOWN);
    c->stall_warn_s = sw && atof(sw) > 0 ? atof(sw) : 60;
    c->stall_shutdown_s = ss && atof(ss) > 0 ? atof(ss) : 0;
    c->stall_off = hvd__env_flag(HVD_ENV_STALL_DISABLE, 0);
    const char *tl = getenv(HVD_ENV_TIMELINE);
    if (hvd__timeline_open(&c->tl, c->rank == 0 ? tl : NULL,
                           hvd__env_flag(HVD_ENV_TIMELINE_MARK_CYCLES, 0)) != 0)
        return HVD_ESYS;
    const char *ct = getenv(HVD_ENV_CYCLE_TIME);
    c->cycle_ms = ct ? atof(ct) : 1.0;
    if (c->cycle_ms < 0)
        c->cycle_ms = 0;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->run_mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    /* Spinning pays only while every spinning thread has a CPU: one
     * thread per rank spins (the background thread, or a caller running
     * the engine while that thread sleeps), other callers sleep (measured
     * on two cores: callers that spin too slow everything down). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv(HVD_ENV_SPIN_US);
    int spin = v ? atoi(v) : 20;
    c->spin_us = c->local_size <= cpus && spin > 0 ? spin : 0;
    /* Callers may run the engine on their own threads (run_inline), but
     * not under MPI, which is initialised for the background thread alone.
     * Measured on two cores, 8 B, inline against handed over to the
     * thread: -np 12 64-67 against 116-124 us, -np 32 213 against 318 us,
     * -np 64 531-551 against 846-886 us, -np 256 4.1 against 5.9 ms. */
    c->inline_ok = strcmp(c->tp->name, "mpi") != 0;
    /* Inside a shared-memory collective the others are due any moment,
     * and a sleep and wake-up costs tens of microseconds a time: after
     * the spin, yield the CPU until 10 times as long has passed (50 us
     * with more ranks than CPUs) before sleeping. Measured: 64 MiB at
     * -np 2 went from 2-3 to 5 GB/s. */
    c->shm.spin_us = c->spin_us;
    c->shm.yield_us = spin <= 0 ? 0 : c->spin_us > 0 ? 10 * c->spin_us : 50;
    /* Every transport fails its collectives through the same hooks. */
    c->ring.spin_us = c->xring.spin_us = c->spin_us;
    c->abort = (struct hvd_abort){
        .fd = c->rdv_fd, .check = hvd__check_abort, .ctx = c};
    c->ring.ab = c->xring.ab = c->shm.ab = &c->abort;
    /* A collective stuck on a stopped or hung rank fails after the peer
     * timeout, like one whose peer's host vanished. */
    c->ring.progress_ms = c->xring.progress_ms = c->shm.progress_ms =
        c->peer_timeout_s * 1000;
    /* The local ranks waiting for a leader's ring between hosts wait as
     * long as it moves data. */
    c->xring.busy_ms = hvd__shm_busy_ms(&c->shm);
    if (pthread_create(&c->thread, NULL, thread_main, c) != 0)
        return HVD_ESYS;
    /* So that top -H, perf and gdb tell it from the rank's own threads. */
    pthread_setname_np(c->thread, "hvd-engine");
    c->thread_started = 1;
    return 0;
}

/* Whether op's waiter may run the engine itself: host buffers only, and
 * not the requests that the background thread alone carries out. */
static int may_run_inline(const struct hvd_ctx *c, const struct hvd_request *op)
{
    if (!c->inline_ok || op->shutdown || op->timeline)
        return 0;
    for (int i = 0; i < op->nparts; i++)
        if (op->parts[i].device)
            return 0;
    return 1;
}

void hvd__engine_submit(struct hvd_ctx *c, struct hvd_request *op)
{
    atomic_store(&op->done, 0);
    op->next = NULL;
    op->left = op->nparts;
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = op;
    else
        c->head = op;
    c->tail = op;
    atomic_fetch_add(&c->pending, 1);
    pthread_mutex_unlock(&c->mu);
    /* A synchronous call's caller takes the sleeping engine itself. */
    if (atomic_load(&c->sleeping) && !(op->sync && may_run_inline(c, op)))
        kick(c);
}

int hvd__engine_wait(struct hvd_ctx *c, struct hvd_request *op)
{
    /* A thread that wants the engine back takes this collective (the
     * submit counted it before this look, so the thread sees it). */
    if (!atomic_load(&op->done) && may_run_inline(c, op) &&
        !atomic_load(&c->thread_waits)) {
        if (pthread_mutex_trylock(&c->run_mu) == 0) {
            run_inline(c, op);
            pthread_mutex_unlock(&c->run_mu);
        } else if (op->sync) {
            /* Its submit left it to this caller, but the engine was not
             * free: the thread may have been on its way to sleep. */
            kick(c);
        }
    }
    pthread_mutex_lock(&c->mu);
    atomic_fetch_add(&c->nwaiting, 1);
    while (!atomic_load(&op->done))
        pthread_cond_wait(&c->cv, &c->mu);
    atomic_fetch_sub(&c->nwaiting, 1);
    pthread_mutex_unlock(&c->mu);
    return op->rc;
}

int hvd__engine_timeline(struct hvd_ctx *c, const char *path, int mark_cycles,
                         char *err, size_t errlen)
{
    struct hvd_request req = {
        .timeline = 1, .tl_path = path, .tl_mark_cycles = mark_cycles};
    hvd__engine_submit(c, &req);
    int rc = hvd__engine_wait(c, &req);
    if (rc)
        snprintf(err, errlen, "%s", req.err);
    return rc;
}

void hvd__engine_stop(struct hvd_ctx *c)
{
    if (c->thread_started) {
        struct hvd_request stop = {.shutdown = 1};
        hvd__engine_submit(c, &stop);
        hvd__engine_wait(c, &stop);
        pthread_join(c->thread, NULL);
        c->thread_started = 0;
        pthread_mutex_destroy(&c->mu);
        pthread_mutex_destroy(&c->run_mu);
        pthread_cond_destroy(&c->cv);
    }
    if (c->wake_fd > 0)
        close(c->wake_fd);
    c->wake_fd = -1;
    hvd__neg_close(&c->neg);
    hvd__timeline_close(&c->tl);
    free(c->pend);
    free(c->fresh);
    free(c->fuse_buf);
    hvd__exec_gather_free(c);
    if (c->eager_runs > 0 && hvd__coll_debug())
        fprintf(stderr,
                "hvd: debug: rank %d: %" PRIu64 " small allreduces folded "
                "from the negotiation\n",
                c->rank, c->eager_runs);
    hvd__eager_free(&c->eager_in);
    hvd__steady_free(c);
    free(c->per_rank.lens);
    free(c->per_rank.nreqs);
    free(c->per_rank.msgs);
    free(c->per_rank.bits);
    free(c->per_rank.reqs);
    memset(&c->per_rank, 0, sizeof(c->per_rank));
    for (size_t i = 0; i < c->nstall; i++)
        free(c->stall[i].name);
    free(c->stall);
    c->stall = NULL;
    c->nstall = 0;
    c->pend = NULL;
    c->fresh = NULL;
    c->fuse_buf = NULL;
}
