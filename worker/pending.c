/* The pending table of parts that wait for negotiation (pending.h). */
#include "worker/pending.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/eager.h"
#include "worker/engine.h"
#include "worker/gpu/gpu.h"
#include "worker/standin.h"
#include "worker/wait.h"

/* By enum hvd_op_kind (4 is no operation). */
static const char *const kind_names[] = {
    "allreduce",       "broadcast",         "allgather", "barrier",
    "operation",       "reducescatter",     "alltoall",  "join",
    "process set add", "process set remove"};

void hvd__pending_done(struct hvd_ctx *c, struct hvd_work *w, int rc,
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
        hvd__engine_finish(c, op);
}

static size_t slot_of(const struct hvd_ctx *c, const char *name, int pset)
{
    size_t h = 1469598103934665603ull ^ (size_t)pset;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h % c->eng.npend_slots;
}

/* Finds (and with take, unlinks) the pending part with this name in this
 * process set. */
static struct hvd_work *find(struct hvd_ctx *c, const char *name, int pset,
                             int take)
{
    struct hvd_work **pp = &c->eng.pend[slot_of(c, name, pset)];
    while (*pp && ((*pp)->pset != pset || strcmp((*pp)->name, name) != 0))
        pp = &(*pp)->pend_next;
    struct hvd_work *w = *pp;
    if (w && take) {
        *pp = w->pend_next;
        c->eng.npend--;
    }
    return w;
}

struct hvd_work *hvd__pending_take(struct hvd_ctx *c, const char *name,
                                   int pset)
{
    return find(c, name, pset, 1);
}

void hvd__pending_fail_all(struct hvd_ctx *c, int rc, const char *msg)
{
    struct hvd_engine *e = &c->eng;
    for (size_t i = 0; i < e->npend_slots; i++)
        while (e->pend[i]) {
            struct hvd_work *w = e->pend[i];
            e->pend[i] = w->pend_next;
            hvd__pending_done(c, w, rc, msg);
        }
    e->npend = 0;
    e->nfresh = 0;
}

void hvd__pending_admit(struct hvd_ctx *c, struct hvd_work *w)
{
    struct hvd_engine *e = &c->eng;
    if (c->failed) {
        hvd__pending_done(c, w, c->fail_rc, c->fail_msg);
        return;
    }
    if (find(c, w->name, w->pset, 0)) {
        hvd__pending_done(c, w, HVD_EINVAL,
                          "an operation of this name is already in flight; "
                          "names must be unique among unfinished operations");
        return;
    }
    if (e->nfresh == e->fresh_cap) {
        size_t cap = e->fresh_cap ? 2 * e->fresh_cap : 64;
        struct hvd_work **f = realloc(e->fresh, cap * sizeof(*f));
        if (f == NULL) {
            hvd__pending_done(c, w, HVD_ENOMEM, "out of memory");
            return;
        }
        e->fresh = f;
        e->fresh_cap = cap;
    }
    w->submit_us = hvd__now_us();
    size_t s = slot_of(c, w->name, w->pset);
    w->pend_next = e->pend[s];
    e->pend[s] = w;
    e->npend++;
    e->fresh[e->nfresh++] = w;
}
