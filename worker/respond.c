/* Running a cycle's responses (respond.h). */
#include "worker/respond.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/eager.h"
#include "worker/exec.h"
#include "worker/failure.h"
#include "worker/fusion.h"
#include "worker/gpu/device.h"
#include "worker/negotiate.h"
#include "worker/pending.h"
#include "worker/pset.h"
#include "worker/standin.h"
#include "worker/wait.h"

/* How one response runs: the plain way is a collective, and the others
 * are the ways around it. */
enum route {
    ROUTE_REFUSED,   /* the coordination answered with an error */
    ROUTE_JOIN,      /* a join: the answer is the last rank to join */
    ROUTE_CARRIED,   /* a small allreduce whose data every rank carried */
    ROUTE_COLLECTIVE /* the plain way: a collective on the transport */
};

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
    size_t threshold = c->eng.fusion_threshold;
    return threshold > 0 && rj->error == 0 && !q->compress && q->pset == 0 &&
           w->pset == 0 && w->op_kind != HVD_ADASUM && !w->compress &&
           q->prescale == 1 && q->postscale == 1 && w->prescale == 1 &&
           w->postscale == 1 && w->count * es <= FUSE_MAX_TENSOR &&
           q->count * es <= FUSE_MAX_TENSOR && w->kind == HVD_OP_ALLREDUCE &&
           q->kind == HVD_REQ_ALLREDUCE && q->dtype == w->dtype &&
           q->op == w->op_kind && q->device == w->device &&
           bytes + q->count * hvd_dtype_size(w->dtype) <= threshold;
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
    struct hvd_work *w = hvd__pending_take(c, r->req.name, r->req.pset);
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

static enum route route_of(const struct hvd_ctx *c, const struct hvd_work *w,
                           const struct hvd_resp *r,
                           const struct hvd_eager_in *in)
{
    if (r->error)
        return ROUTE_REFUSED;
    if (w->kind == HVD_OP_JOIN)
        return ROUTE_JOIN;
    if (!c->failed && hvd__eager_ready(c, in, r))
        return ROUTE_CARRIED;
    return ROUTE_COLLECTIVE;
}

/* The shortcut for a small allreduce every rank carried: each rank folds
 * the carried data itself, with no collective. */
static void run_carried(struct hvd_ctx *c, const struct hvd_eager_in *in,
                        const struct hvd_resp *r, struct hvd_work *w)
{
    int64_t t0 = hvd__now_us();
    hvd__eager_run(c, in, r, w);
    c->eng.eager_runs++;
    trace(c, w, t0, 1);
    hvd__pending_done(c, w, 0, NULL);
}

/* Runs response i's collective (part w), with the responses after it that
 * fuse with it, in group (room for n, or NULL: no fusion); returns the
 * index of the first response it did not take. */
static size_t run_collective(struct hvd_ctx *c, struct hvd_resp *resp, size_t n,
                             size_t i, const struct hvd_eager_in *in,
                             struct hvd_work *w, struct hvd_work **group)
{
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
         : w->device ? hvd__device_exec(c, ng ? group : &w, ng ? ng : 1, err,
                                        sizeof(err))
         : ng > 1    ? hvd__fused_allreduce(c, group, ng, err, sizeof(err))
                     : hvd__exec(c, w);
    if (ng <= 1 && !w->device)
        snprintf(err, sizeof(err), "%s", w->err);
    if (rc == HVD_EPEER || rc == HVD_ESYS || rc == HVD_ETIMEDOUT)
        rc = hvd__ring_failed(c, rc, err);
    for (int k = 0; k < (ng ? ng : 1); k++) {
        trace(c, ng ? group[k] : w, t0, ng);
        hvd__pending_done(c, ng ? group[k] : w, rc,
                          c->failed ? c->fail_msg : err);
    }
    return i;
}

void hvd__respond(struct hvd_ctx *c, struct hvd_resp *resp, size_t n,
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
        switch (route_of(c, w, &resp[i], in)) {
        case ROUTE_REFUSED:
            hvd__pending_done(c, w, resp[i].error, resp[i].msg);
            i++;
            break;
        case ROUTE_JOIN:
            w->root = resp[i].req.root; /* the rank that joined last */
            hvd__pending_done(c, w, 0, NULL);
            i++;
            break;
        case ROUTE_CARRIED:
            run_carried(c, in, &resp[i], w);
            i++;
            break;
        case ROUTE_COLLECTIVE:
            i = run_collective(c, resp, n, i, in, w, group);
            break;
        }
    }
    free(group);
}
