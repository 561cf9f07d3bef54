/* libhvd's process set and join API: collectives every rank calls, run
 * through the background thread like the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/api.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/engine.h"

/* Runs a one-part op of kind among every rank and returns its answer
 * (the part's root afterwards), or a negative code. */
static int run(struct hvd_ctx *c, const char *what, enum hvd_op_kind kind,
               const char *name, const int *ranks, size_t n, int root)
{
    char msg[HVD_ERRMSG + 64];
    hvd_handle h;
    struct hvd_request *op = hvd__api_new_op(1);
    if (op == NULL)
        return hvd__api_fail(HVD_ENOMEM, "out of memory");
    struct hvd_work *w = &op->parts[0];
    w->kind = kind;
    w->dtype = HVD_INT32;
    w->sendbuf = ranks;
    w->count = n;
    w->root = root;
    snprintf(w->name, sizeof(w->name), "%s", name);
    op->sync = 1;
    int rc = hvd__api_start(op, &h);
    if (rc == 0)
        rc = hvd__engine_wait(c, op);
    int answer = w->root;
    if (rc) {
        snprintf(msg, sizeof(msg), "%s: %s on rank %d", what, op->err, c->rank);
        hvd__api_fail(rc, msg);
    }
    free(op);
    return rc ? rc : answer;
}

static struct hvd_ctx *ctx_or_fail(const char *what)
{
    char msg[96];
    struct hvd_ctx *c = hvd__api_ctx();
    if (c == NULL) {
        snprintf(msg, sizeof(msg), "%s() before hvd_init()", what);
        hvd__api_fail(HVD_ENOTINIT, msg);
    }
    return c;
}

HVD_EXPORT int hvd_add_process_set(const int *ranks, int n)
{
    char err[HVD_ERRMSG], msg[HVD_ERRMSG + 64];
    struct hvd_ctx *c = ctx_or_fail("hvd_add_process_set");
    if (c == NULL)
        return HVD_ENOTINIT;
    if (n < 1 || ranks == NULL)
        return hvd__api_fail(HVD_EINVAL, "hvd_add_process_set: no ranks given");
    if (!c->standalone)
        return run(c, "hvd_add_process_set", HVD_OP_PSET_ADD, "process_set.add",
                   ranks, (size_t)n, 0);
    /* A job of one has nobody to agree with (and its only set exists). */
    int rc = hvd__pset_add(&c->psets, ranks, n, err, sizeof(err));
    if (rc < 0) {
        snprintf(msg, sizeof(msg), "hvd_add_process_set: %s", err);
        hvd__api_fail(rc, msg);
    }
    return rc;
}

HVD_EXPORT int hvd_remove_process_set(int id)
{
    char err[HVD_ERRMSG], msg[HVD_ERRMSG + 64];
    struct hvd_ctx *c = ctx_or_fail("hvd_remove_process_set");
    if (c == NULL)
        return HVD_ENOTINIT;
    pthread_mutex_lock(&c->psets.mu);
    int known = id != 0 && hvd__pset_get(&c->psets, id) != NULL;
    pthread_mutex_unlock(&c->psets.mu);
    if (!known) {
        snprintf(msg, sizeof(msg),
                 "hvd_remove_process_set: there is no "
                 "process set %d%s",
                 id, id == 0 ? " to remove (0 is every rank)" : "");
        return hvd__api_fail(HVD_EINVAL, msg);
    }
    if (c->standalone)
        return hvd__pset_remove(&c->psets, id, err, sizeof(err));
    int rc = run(c, "hvd_remove_process_set", HVD_OP_PSET_REMOVE,
                 "process_set.remove", NULL, 0, id);
    return rc < 0 ? rc : 0;
}

HVD_EXPORT int hvd_join(void)
{
    struct hvd_ctx *c = ctx_or_fail("hvd_join");
    if (c == NULL)
        return HVD_ENOTINIT;
    /* A job of one is its own last rank to join. */
    if (c->standalone)
        return 0;
    return run(c, "hvd_join", HVD_OP_JOIN, "join", NULL, 0, -1);
}

/* The set of this id, looked up under the table's lock: fn gets it and
 * returns the answer. */
static int with_set(const char *what, int id,
                    int (*fn)(const struct hvd_pset *s, int *out, int cap),
                    int *out, int cap)
{
    char msg[128];
    struct hvd_ctx *c = ctx_or_fail(what);
    if (c == NULL)
        return HVD_ENOTINIT;
    pthread_mutex_lock(&c->psets.mu);
    const struct hvd_pset *s = hvd__pset_get(&c->psets, id);
    int rc = s ? fn(s, out, cap) : HVD_EINVAL;
    pthread_mutex_unlock(&c->psets.mu);
    if (s == NULL) {
        snprintf(msg, sizeof(msg), "%s: there is no process set %d", what, id);
        return hvd__api_fail(rc, msg);
    }
    if (rc == HVD_ENOTMEMBER) {
        snprintf(msg, sizeof(msg), "%s: rank %d is not in process set %d", what,
                 c->rank, id);
        return hvd__api_fail(rc, msg);
    }
    return rc;
}

static int set_size(const struct hvd_pset *s, int *out, int cap)
{
    (void)out;
    (void)cap;
    return s->n;
}

static int set_rank(const struct hvd_pset *s, int *out, int cap)
{
    (void)out;
    (void)cap;
    return s->me >= 0 ? s->me : HVD_ENOTMEMBER;
}

static int set_ranks(const struct hvd_pset *s, int *out, int cap)
{
    for (int i = 0; out && i < s->n && i < cap; i++)
        out[i] = s->ranks[i];
    return s->n;
}

HVD_EXPORT int hvd_process_set_size(int id)
{
    return with_set("hvd_process_set_size", id, set_size, NULL, 0);
}

HVD_EXPORT int hvd_process_set_rank(int id)
{
    return with_set("hvd_process_set_rank", id, set_rank, NULL, 0);
}

HVD_EXPORT int hvd_process_set_ranks(int id, int *ranks, int cap)
{
    return with_set("hvd_process_set_ranks", id, set_ranks, ranks, cap);
}

HVD_EXPORT int hvd_process_set_ids(int *ids, int cap)
{
    struct hvd_ctx *c = ctx_or_fail("hvd_process_set_ids");
    if (c == NULL)
        return HVD_ENOTINIT;
    pthread_mutex_lock(&c->psets.mu);
    int n = (int)c->psets.n + 1;
    for (int i = 0; ids && i < n && i < cap; i++)
        ids[i] = i == 0 ? 0 : c->psets.v[i - 1]->id;
    pthread_mutex_unlock(&c->psets.mu);
    return n;
}
