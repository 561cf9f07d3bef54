/* One negotiation cycle: announce, exchange, coordinate, respond
 * (cycle.h). */
#include "worker/cycle.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/eager.h"
#include "worker/exec.h"
#include "worker/failure.h"
#include "worker/pending.h"
#include "worker/respond.h"
#include "worker/setting.h"
#include "worker/steady.h"
#include "worker/wait.h"

int hvd__cycle_init(struct hvd_ctx *c)
{
    struct hvd_engine *e = &c->eng;
    struct hvd_per_rank *pr = &e->per_rank;
    size_t n = (size_t)c->size;
    e->npend_slots = 1024;
    e->pend = calloc(e->npend_slots, sizeof(*e->pend));
    pr->lens = calloc(n, sizeof(*pr->lens));
    pr->nreqs = calloc(n, sizeof(*pr->nreqs));
    pr->msgs = calloc(n, sizeof(*pr->msgs));
    pr->bits = calloc(n, sizeof(*pr->bits));
    pr->reqs = calloc(n, sizeof(*pr->reqs));
    if (!pr->lens || !pr->nreqs || !pr->msgs || !pr->bits || !pr->reqs)
        return HVD_ENOMEM;
    const char *cc = getenv(HVD_ENV_CACHE_CAPACITY);
    size_t cache = cc ? (size_t)strtoull(cc, NULL, 10) : 1024;
    if (e->pend == NULL || hvd__neg_init(&c->neg, c->size, cache) != 0)
        return HVD_ENOMEM;
    c->neg.psets = &c->psets;
    const char *ft = getenv(HVD_ENV_FUSION_THRESHOLD);
    e->fusion_threshold = ft ? (size_t)strtoull(ft, NULL, 10) : 128u << 20;
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
    e->cycle_ms = ct ? atof(ct) : 1.0;
    if (e->cycle_ms < 0)
        e->cycle_ms = 0;
    return 0;
}

/*
 * Announce: this rank's message, the data of its small allreduces that
 * may travel (eager.h), then its new requests and the names rank 0's
 * stall inspector gives up on. The fresh parts count as announced from
 * here, whether or not the message is made.
 */
static int announce(struct hvd_ctx *c, uint8_t **msg, size_t *msglen)
{
    struct hvd_engine *e = &c->eng;
    struct hvd_req *mine = calloc(e->nfresh + c->nstall + 1, sizeof(*mine));
    uint8_t *enc = NULL;
    size_t enclen = 0;
    int rc = HVD_ENOMEM;

    if (mine == NULL)
        goto out;
    for (size_t i = 0; i < e->nfresh; i++) {
        struct hvd_work *w = e->fresh[i];
        w->announce_us = e->last_cycle_us;
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
        mine[e->nfresh + i] = (struct hvd_req){.kind = HVD_REQ_STALL,
                                               .name = c->stall[i].name,
                                               .pset = c->stall[i].pset};
    rc = hvd__neg_encode(&c->neg, mine, e->nfresh + c->nstall, &enc, &enclen);
    for (size_t i = 0; i < c->nstall; i++)
        free(c->stall[i].name);
    c->nstall = 0;
    if (rc)
        goto out;
    e->nfresh = 0;
    rc = hvd__eager_encode(c, enc, enclen, msg, msglen);
out:
    free(enc);
    free(mine);
    return rc;
}

/*
 * Exchange: every rank's message to every rank, msgs[r] (lens[r]) past
 * their small tensors' sections, which go to c->eager_in. The plain way
 * is the gather; *how says whether the steady shortcut served instead.
 */
static int exchange(struct hvd_ctx *c, const uint8_t *msg, size_t msglen,
                    enum hvd_exchange *how, char *err, size_t errlen)
{
    const uint8_t **msgs = c->eng.per_rank.msgs;
    size_t *lens = c->eng.per_rank.lens;
    int rc = 0;

    *how = HVD_EXCHANGE_GATHER;
    if (hvd__steady_on(c))
        rc = hvd__steady_exchange(c, msg, msglen, msgs, lens, how, err, errlen);
    if (rc || *how == HVD_EXCHANGE_STEADY)
        return rc;
    rc = hvd__exec_gather(c, msg, msglen, msgs, lens, err, errlen);
    if (rc == 0)
        rc = hvd__eager_decode(c, &c->eager_in, msgs, lens);
    return rc;
}

/*
 * Coordinate: feeds every rank's message to the table in rank order.
 * Cached requests that every rank sent this cycle are ready at once (in
 * cache order, the same on every rank): in steady state that is all of
 * them, every rank sent the same bitmap, and the work is reading rank 0's
 * plus one step per ready tensor.
 */
static int coordinate(struct hvd_ctx *c, struct hvd_resp **resp, size_t *nresp)
{
    const uint8_t *const *msgs = c->eng.per_rank.msgs;
    const size_t *lens = c->eng.per_rank.lens;
    size_t nbytes = (c->neg.ncache + 7) / 8;
    const uint8_t **bits = c->eng.per_rank.bits;
    struct hvd_req **reqs = c->eng.per_rank.reqs;
    size_t *nreqs = c->eng.per_rank.nreqs;
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

void hvd__cycle_run(struct hvd_ctx *c)
{
    struct hvd_resp *resp = NULL;
    size_t nresp = 0;
    uint8_t *msg = NULL;
    size_t msglen = 0;
    enum hvd_exchange how;
    char err[HVD_ERRMSG] = "";
    int rc;

    c->eng.last_cycle_us = hvd__now_us();
    hvd__coll_reset_abort(c);
    hvd__coll_cycle_start(c);
    hvd__timeline_cycle(&c->tl, c->eng.last_cycle_us);
    if ((rc = announce(c, &msg, &msglen)) == 0 &&
        (rc = exchange(c, msg, msglen, &how, err, sizeof(err))) == 0 &&
        (rc = coordinate(c, &resp, &nresp)) == 0)
        hvd__respond(c, resp, nresp, &c->eager_in);
    if (rc == HVD_EPEER || rc == HVD_ESYS || rc == HVD_ETIMEDOUT)
        rc = hvd__ring_failed(c, rc, err);
    else if (rc)
        hvd__set_failed(c, rc,
                        "negotiation failed: the ranks' requests were "
                        "malformed or memory ran out");
    if (c->failed)
        hvd__pending_fail_all(c, c->fail_rc, c->fail_msg);
    for (size_t i = 0; i < nresp; i++)
        free(resp[i].req.name);
    free(resp);
    free(msg);
}

void hvd__cycle_close(struct hvd_ctx *c)
{
    struct hvd_engine *e = &c->eng;
    hvd__neg_close(&c->neg);
    hvd__timeline_close(&c->tl);
    free(e->pend);
    free(e->fresh);
    free(c->fuse_buf);
    hvd__exec_gather_free(c);
    if (e->eager_runs > 0 && hvd__coll_debug())
        fprintf(stderr,
                "hvd: debug: rank %d: %" PRIu64 " small allreduces folded "
                "from the negotiation\n",
                c->rank, e->eager_runs);
    hvd__eager_free(&c->eager_in);
    hvd__steady_free(c);
    free(e->per_rank.lens);
    free(e->per_rank.nreqs);
    free(e->per_rank.msgs);
    free(e->per_rank.bits);
    free(e->per_rank.reqs);
    memset(&e->per_rank, 0, sizeof(e->per_rank));
    for (size_t i = 0; i < c->nstall; i++)
        free(c->stall[i].name);
    free(c->stall);
    c->stall = NULL;
    c->nstall = 0;
    e->pend = NULL;
    e->fresh = NULL;
    c->fuse_buf = NULL;
}
