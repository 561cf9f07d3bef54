/* The negotiation table: requests per name until every rank has asked,
 * then one response, the same on every rank. */
#include "worker/negotiate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/wire.h"
#include "worker/pset.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct hvd_neg_entry {
    struct hvd_req first; /* the first request */
    int first_rank;       /* the lowest rank that asked the same */
    struct hvd_req diff;  /* the lowest rank's that asked otherwise */
    int diff_rank;        /* or -1 */
    int64_t since_us;     /* when this rank first heard of the name */
    int nseen;
    int error;
    char msg[256];
    struct hvd_neg_entry *next; /* hash chain */
    uint8_t seen[];             /* one byte per rank */
};

/* Indexed by enum hvd_req_kind. */
static const char *kind_name(int k)
{
    static const char *n[] = {
        "allreduce",       "broadcast",         "allgather", "barrier",
        "operation",       "reducescatter",     "alltoall",  "join",
        "process set add", "process set remove"};
    return k >= 0 && k < (int)(sizeof(n) / sizeof(n[0])) ? n[k] : "operation";
}

/* Whether kind reduces: op and the allreduce options must agree. */
static int reduces(int k)
{
    return k == HVD_REQ_ALLREDUCE || k == HVD_REQ_REDUCESCATTER;
}

/* Indexed by hvd_dtype value. */
static const char *dtype_name(int d)
{
    static const char *n[] = {"uint8",   "int8",    "int32",
                              "int64",   "float16", "bfloat16",
                              "float32", "float64", "int16"};
    return d >= 0 && d < (int)(sizeof(n) / sizeof(n[0])) ? n[d] : "unknown";
}

static const char *op_name(int o)
{
    static const char *n[] = {"sum", "average", "min",
                              "max", "product", "adasum"};
    return o >= 0 && o < 6 ? n[o] : "unknown";
}

/* Whether q is the request of this name in this process set. */
static int is(const struct hvd_req *q, const char *name, int32_t pset)
{
    return q->pset == pset && strcmp(q->name, name) == 0;
}

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int hvd__neg_init(struct hvd_neg *t, int size, size_t cache_cap)
{
    memset(t, 0, sizeof(*t));
    t->size = size;
    t->nslots = 64;
    t->slots = calloc(t->nslots, sizeof(*t->slots));
    t->joined = calloc((size_t)size + 1, 1);
    t->last_joined = -1;
    t->cache_cap = cache_cap;
    t->cache_buckets = 2 * cache_cap + 1;
    if (cache_cap > 0) {
        t->cache = calloc(cache_cap, sizeof(*t->cache));
        t->cache_next = calloc(cache_cap, sizeof(*t->cache_next));
        t->cache_head = malloc(t->cache_buckets * sizeof(*t->cache_head));
        if (t->cache_head)
            memset(t->cache_head, 0xff,
                   t->cache_buckets * sizeof(*t->cache_head));
    }
    if (t->slots == NULL || t->joined == NULL ||
        (cache_cap > 0 && (!t->cache || !t->cache_next || !t->cache_head)))
        return HVD_ENOMEM;
    return 0;
}

/* The id of a cached request equal to req in every field, or -1. */
static int32_t cache_find(const struct hvd_neg *t, const struct hvd_req *req)
{
    if (t->cache_cap == 0 || req->name == NULL)
        return -1;
    int32_t id = t->cache_head[hash(req->name) % t->cache_buckets];
    for (; id >= 0; id = t->cache_next[id]) {
        const struct hvd_req *c = &t->cache[id];
        if (!is(c, req->name, req->pset))
            continue;
        return c->kind == req->kind && c->dtype == req->dtype &&
                       c->op == req->op && c->root == req->root &&
                       c->count == req->count && c->row == req->row &&
                       c->shape == req->shape && c->compress == req->compress &&
                       c->device == req->device &&
                       c->prescale == req->prescale &&
                       c->postscale == req->postscale
                   ? id
                   : -1;
    }
    return -1;
}

int32_t hvd__neg_cache_id(const struct hvd_neg *t, const struct hvd_req *req)
{
    return cache_find(t, req);
}

void hvd__neg_cache_put(struct hvd_neg *t, const struct hvd_req *req)
{
    /* A join's answer (the last rank) and the process set changes are
     * not the same each time. */
    if (t->cache_cap == 0 || req->name == NULL || req->kind >= HVD_REQ_JOIN)
        return;
    size_t b = hash(req->name) % t->cache_buckets;
    /* One entry per name: a name asked for with new attributes (a new
     * shape, say) takes its entry over, as every rank puts the same
     * responses in the same order. */
    for (int32_t id = t->cache_head[b]; id >= 0; id = t->cache_next[id])
        if (is(&t->cache[id], req->name, req->pset)) {
            char *name = t->cache[id].name;
            t->cache[id] = *req;
            t->cache[id].name = name;
            return;
        }
    char *name = t->ncache < t->cache_cap ? strdup(req->name) : NULL;
    if (name == NULL)
        return;
    int32_t id = (int32_t)t->ncache++;
    t->cache[id] = *req;
    t->cache[id].name = name;
    t->cache_next[id] = t->cache_head[b];
    t->cache_head[b] = id;
}

void hvd__neg_close(struct hvd_neg *t)
{
    if (t == NULL || t->slots == NULL)
        return;
    for (size_t i = 0; i < t->ncache; i++)
        free(t->cache[i].name);
    free(t->cache);
    free(t->cache_next);
    free(t->cache_head);
    for (size_t i = 0; i < t->nslots; i++)
        while (t->slots[i]) {
            struct hvd_neg_entry *e = t->slots[i];
            t->slots[i] = e->next;
            free(e->first.name);
            free(e);
        }
    free(t->slots);
    free(t->joined);
    t->slots = NULL;
    t->joined = NULL;
}

static int grow(struct hvd_neg *t)
{
    size_t n = t->nslots * 2;
    struct hvd_neg_entry **s = calloc(n, sizeof(*s));
    if (s == NULL)
        return HVD_ENOMEM;
    for (size_t i = 0; i < t->nslots; i++)
        while (t->slots[i]) {
            struct hvd_neg_entry *e = t->slots[i];
            t->slots[i] = e->next;
            e->next = s[hash(e->first.name) % n];
            s[hash(e->first.name) % n] = e;
        }
    free(t->slots);
    t->slots = s;
    t->nslots = n;
    return 0;
}

/* Writes into msg (when not NULL) the first way r, from rank b, differs
 * from f, from rank a, and says whether it does. The lower rank is named
 * first. */
static int describe(char *msg, size_t cap, const char *name,
                    const struct hvd_req *f, int a, const struct hvd_req *r,
                    int b)
{
    if (b < a) {
        const struct hvd_req *t = f;
        int tr = a;
        f = r;
        a = b;
        r = t;
        b = tr;
    }
    const char *k = kind_name(f->kind);
    if (r->kind != f->kind)
        snprintf(msg, cap,
                 "Mismatched operations: rank %d asked for %s, rank %d for "
                 "%s of tensor '%s'",
                 a, kind_name(f->kind), b, kind_name(r->kind), name);
    else if (r->dtype != f->dtype)
        snprintf(msg, cap,
                 "Mismatched %s data types: rank %d sent %s, rank %d sent %s "
                 "for tensor '%s'",
                 k, a, dtype_name(f->dtype), b, dtype_name(r->dtype), name);
    else if (r->count != f->count && f->kind != HVD_REQ_ALLGATHER &&
             f->kind != HVD_REQ_ALLTOALL)
        snprintf(msg, cap,
                 "Mismatched %s tensor sizes: rank %d sent %llu elements, "
                 "rank %d sent %llu for tensor '%s'",
                 k, a, (unsigned long long)f->count, b,
                 (unsigned long long)r->count, name);
    else if (r->shape != f->shape && r->shape != 0 && f->shape != 0)
        snprintf(msg, cap,
                 "Mismatched %s tensor shapes: rank %d and rank %d gave "
                 "tensors of different shapes%s for tensor '%s'",
                 k, a, b,
                 f->kind == HVD_REQ_ALLGATHER || f->kind == HVD_REQ_ALLTOALL ||
                         f->kind == HVD_REQ_REDUCESCATTER
                     ? " (beyond the first dimension)"
                     : "",
                 name);
    else if (r->row != f->row && f->kind == HVD_REQ_REDUCESCATTER)
        snprintf(msg, cap,
                 "Mismatched %s row sizes: rank %d sent rows of %llu "
                 "elements, rank %d rows of %llu for tensor '%s'",
                 k, a, (unsigned long long)f->row, b,
                 (unsigned long long)r->row, name);
    else if (r->op != f->op && reduces(f->kind))
        snprintf(msg, cap,
                 "Mismatched %s operations: rank %d asked for %s, rank %d "
                 "for %s of tensor '%s'",
                 k, a, op_name(f->op), b, op_name(r->op), name);
    else if (reduces(f->kind) &&
             (r->compress != f->compress || r->prescale != f->prescale ||
              r->postscale != f->postscale))
        snprintf(msg, cap,
                 "Mismatched %s options: rank %d asked for compression %d, "
                 "prescale %g, postscale %g, rank %d for %d, %g, %g of "
                 "tensor '%s'",
                 k, a, f->compress, f->prescale, f->postscale, b, r->compress,
                 r->prescale, r->postscale, name);
    else if (r->device != f->device && f->kind != HVD_REQ_BARRIER)
        snprintf(msg, cap,
                 "Mismatched %s memory: rank %d gave %s memory, rank %d %s "
                 "memory for tensor '%s'",
                 k, a, f->device ? "CUDA device" : "host", b,
                 r->device ? "CUDA device" : "host", name);
    else if (r->root != f->root && f->kind == HVD_REQ_BROADCAST)
        snprintf(msg, cap,
                 "Mismatched %s root ranks: rank %d named root %d, rank %d "
                 "named root %d for tensor '%s'",
                 k, a, f->root, b, r->root, name);
    else if (r->root != f->root && f->kind == HVD_REQ_PSET_REMOVE)
        snprintf(msg, cap,
                 "Mismatched %s: rank %d named process set %d, rank %d "
                 "process set %d",
                 k, a, f->root, b, r->root);
    else
        return 0;
    return 1;
}

/* Keeps, against the first request, the lowest rank that agrees with it
 * and the lowest that does not, so that the message does not depend on the
 * order the ranks asked in: where the ranks fall in two camps it names
 * rank 0 and the lowest rank of the other camp. */
static void compare(struct hvd_neg_entry *e, int rank, const struct hvd_req *r)
{
    if (!describe(NULL, 0, "", &e->first, e->first_rank, r, rank)) {
        if (rank < e->first_rank)
            e->first_rank = rank;
    } else if (e->diff_rank < 0 || rank < e->diff_rank) {
        e->diff = *r;
        e->diff.name = NULL;
        e->diff_rank = rank;
    }
}

/* Whether a rank of entry e's process set has joined. */
static int joined_in(const struct hvd_neg *t, const struct hvd_neg_entry *e)
{
    const struct hvd_pset *s =
        t->psets ? hvd__pset_get(t->psets, e->first.pset) : NULL;
    for (int r = 0; t->njoined > 0 && r < t->size; r++)
        if (t->joined[r] && (s == NULL || hvd__pset_place(s, r) >= 0))
            return 1;
    return 0;
}

/* Only allreduces and barriers go on while some ranks have joined, as in
 * Horovod: the joined ranks have no data to send or place to receive. */
static int refused_by_join(const struct hvd_neg *t,
                           const struct hvd_neg_entry *e)
{
    int k = e->first.kind;
    return !e->error &&
           (k == HVD_REQ_BROADCAST || k == HVD_REQ_ALLGATHER ||
            k == HVD_REQ_ALLTOALL || k == HVD_REQ_REDUCESCATTER) &&
           joined_in(t, e);
}

static void join_check(const struct hvd_neg *t, struct hvd_neg_entry *e)
{
    int k = e->first.kind;
    if (!refused_by_join(t, e))
        return;
    e->error = HVD_EINVAL;
    snprintf(e->msg, sizeof(e->msg),
             "%s of tensor '%s' is not supported while ranks have joined "
             "(hvd_join)%s",
             kind_name(k), e->first.name,
             k == HVD_REQ_ALLGATHER
                 ? "; with DistributedOptimizer, use sparse_as_dense=True"
                 : "");
}

static int respond(struct hvd_neg *t, struct hvd_neg_entry *e,
                   struct hvd_resp **out, size_t *nout)
{
    struct hvd_resp *o = realloc(*out, (*nout + 1) * sizeof(**out));
    if (o == NULL)
        return HVD_ENOMEM;
    *out = o;
    struct hvd_resp *r = &o[(*nout)++];
    if (!e->error && e->diff_rank >= 0) {
        e->error = HVD_EMISMATCH;
        describe(e->msg, sizeof(e->msg), e->first.name, &e->first,
                 e->first_rank, &e->diff, e->diff_rank);
    }
    join_check(t, e);
    if (e->first.kind == HVD_REQ_JOIN) {
        e->first.root = t->last_joined;
        memset(t->joined, 0, (size_t)t->size);
        t->njoined = 0;
        t->last_joined = -1;
    }
    r->req = e->first; /* takes the name */
    r->error = e->error;
    memcpy(r->msg, e->msg, sizeof(r->msg));
    free(e);
    return 0;
}

/* The entry of req's name in its set, and the link that points to it. */
static struct hvd_neg_entry **lookup(struct hvd_neg *t, const char *name,
                                     int32_t pset)
{
    struct hvd_neg_entry **pp = &t->slots[hash(name) % t->nslots];
    while (*pp && !is(&(*pp)->first, name, pset))
        pp = &(*pp)->next;
    return pp;
}

/* Counts rank r as having asked for e (r is outside e's set, or has
 * joined). */
static void presume(struct hvd_neg_entry *e, int r)
{
    if (!e->seen[r]) {
        e->seen[r] = 1;
        e->nseen++;
    }
}

/* A new entry for req, first asked by rank, with the ranks outside its
 * set and the joined ones counted already. */
static struct hvd_neg_entry *entry_new(struct hvd_neg *t, int rank,
                                       const struct hvd_req *req)
{
    struct hvd_neg_entry *e = calloc(1, sizeof(*e) + (size_t)t->size);
    if (e == NULL || (e->first.name = strdup(req->name)) == NULL) {
        free(e);
        return NULL;
    }
    char *name = e->first.name;
    e->first = *req;
    e->first.name = name;
    e->first_rank = rank;
    e->diff_rank = -1;
    e->since_us = now_us();
    const struct hvd_pset *s =
        t->psets && req->pset != 0 ? hvd__pset_get(t->psets, req->pset) : NULL;
    if (req->pset != 0 && s == NULL) {
        e->error = HVD_EINVAL;
        snprintf(e->msg, sizeof(e->msg),
                 "rank %d submitted tensor '%s' on process set %d, which "
                 "does not exist",
                 rank, req->name, (int)req->pset);
        for (int r = 0; r < t->size; r++)
            presume(e, r);
    }
    for (int r = 0; s && r < t->size; r++)
        if (hvd__pset_place(s, r) < 0)
            presume(e, r);
    for (int r = 0; t->njoined > 0 && req->kind != HVD_REQ_JOIN && r < t->size;
         r++)
        if (t->joined[r])
            presume(e, r);
    return e;
}

/*
 * Answers entry *pp if every rank has asked (or counts as having), or at
 * once if a joined rank refuses it: each rank that asks is then told by
 * itself, so that ranks whose unnamed calls drifted apart around the
 * join (one joined where the others gathered) do not wait for one
 * another. A later request of the name starts a new entry.
 */
static int answer_if_done(struct hvd_neg *t, struct hvd_neg_entry **pp,
                          struct hvd_resp **out, size_t *nout)
{
    struct hvd_neg_entry *e = *pp;
    if (e->nseen < t->size && !refused_by_join(t, e))
        return 0;
    *pp = e->next;
    t->used--;
    return respond(t, e, out, nout);
}

/* Rank joins: it counts as having asked for every waiting name, in the
 * table's order, which is the same on every rank. */
static int join(struct hvd_neg *t, int rank, struct hvd_resp **out,
                size_t *nout)
{
    if (t->joined[rank])
        return 0;
    t->joined[rank] = 1;
    t->njoined++;
    t->last_joined = rank;
    for (size_t i = 0; i < t->nslots; i++)
        for (struct hvd_neg_entry **pp = &t->slots[i]; *pp;) {
            struct hvd_neg_entry *e = *pp;
            if (e->first.kind == HVD_REQ_JOIN) {
                pp = &e->next;
                continue;
            }
            presume(e, rank);
            int rc = answer_if_done(t, pp, out, nout);
            if (rc)
                return rc;
            if (*pp == e)
                pp = &e->next;
        }
    return 0;
}

int hvd__neg_add(struct hvd_neg *t, int rank, const struct hvd_req *req,
                 struct hvd_resp **out, size_t *nout)
{
    if (rank < 0 || rank >= t->size || req->name == NULL)
        return HVD_EINVAL;
    if (req->kind == HVD_REQ_JOIN) {
        int rc = join(t, rank, out, nout);
        if (rc)
            return rc;
    }
    const struct hvd_pset *s =
        t->psets && req->pset != 0 ? hvd__pset_get(t->psets, req->pset) : NULL;
    int outside = s && hvd__pset_place(s, rank) < 0;
    struct hvd_neg_entry **pp = lookup(t, req->name, req->pset);
    struct hvd_neg_entry *e = *pp;
    if (e == NULL) {
        if ((e = entry_new(t, rank, req)) == NULL)
            return HVD_ENOMEM;
        *pp = e;
        t->used++;
    } else if (!outside && e->seen[rank]) {
        if (!e->error) {
            e->error = HVD_EMISMATCH;
            snprintf(e->msg, sizeof(e->msg),
                     "rank %d submitted tensor '%s' again before it "
                     "completed",
                     rank, req->name);
        }
        return 0;
    } else if (!outside) {
        compare(e, rank, req);
    }
    if (outside && !e->error) {
        e->error = HVD_EINVAL;
        snprintf(e->msg, sizeof(e->msg),
                 "rank %d submitted tensor '%s' on process set %d, which "
                 "does not include it",
                 rank, req->name, (int)req->pset);
    }
    presume(e, rank);
    int rc = answer_if_done(t, pp, out, nout);
    if (rc == 0 && *pp == e)
        return t->used > t->nslots ? grow(t) : 0;
    return rc;
}

void hvd__neg_each_waiting(struct hvd_neg *t, int64_t before_us,
                           void (*fn)(void *ctx, const char *name, int pset,
                                      const uint8_t *seen),
                           void *ctx)
{
    for (size_t i = 0; i < t->nslots; i++)
        for (struct hvd_neg_entry *e = t->slots[i]; e; e = e->next)
            if (e->since_us < before_us)
                fn(ctx, e->first.name, e->first.pset, e->seen);
}

int hvd__neg_fail_stalled(struct hvd_neg *t, const char *name, int pset,
                          double secs, struct hvd_resp **out, size_t *nout)
{
    struct hvd_neg_entry **pp = lookup(t, name, pset);
    struct hvd_neg_entry *e = *pp;
    if (e == NULL)
        return 0;
    int n = snprintf(e->msg, sizeof(e->msg), "stalled: rank");
    int missing = 0;
    for (int r = 0; r < t->size && n < (int)sizeof(e->msg); r++)
        if (!e->seen[r])
            n += snprintf(e->msg + n, sizeof(e->msg) - (size_t)n, "%s %d",
                          missing++ ? "," : "", r);
    if (n < (int)sizeof(e->msg))
        snprintf(e->msg + n, sizeof(e->msg) - (size_t)n,
                 " did not submit tensor '%s' within %g s "
                 "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)",
                 name, secs);
    e->error = HVD_ETIMEDOUT;
    *pp = e->next;
    t->used--;
    return respond(t, e, out, nout);
}

int hvd__neg_encode(const struct hvd_neg *t, const struct hvd_req *reqs,
                    size_t n, uint8_t **out, size_t *len)
{
    struct hvd_wbuf w;
    size_t nbytes = (t->ncache + 7) / 8, nfull = 0;
    uint8_t *bits = calloc(nbytes + 1, 1);
    int32_t *ids = malloc((n + 1) * sizeof(*ids));
    int err = HVD_ENOMEM;

    if (bits == NULL || ids == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        ids[i] = cache_find(t, &reqs[i]);
        if (ids[i] >= 0)
            bits[ids[i] / 8] |= (uint8_t)(1u << (ids[i] % 8));
        else
            nfull++;
    }
    hvd_wbuf_init(&w);
    hvd_wbuf_bytes(&w, bits, nbytes);
    hvd_wbuf_u32(&w, (uint32_t)nfull);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0)
            continue;
        hvd_wbuf_u8(&w, reqs[i].kind);
        hvd_wbuf_u8(&w, reqs[i].dtype);
        hvd_wbuf_u8(&w, reqs[i].op);
        hvd_wbuf_i32(&w, reqs[i].root);
        hvd_wbuf_u32(&w, (uint32_t)(reqs[i].count >> 32));
        hvd_wbuf_u32(&w, (uint32_t)reqs[i].count);
        hvd_wbuf_str(&w, reqs[i].name);
        hvd_wbuf_i32(&w, reqs[i].pset);
        hvd_wbuf_u8(&w, reqs[i].compress);
        hvd_wbuf_u8(&w, reqs[i].device);
        double f[2] = {reqs[i].prescale, reqs[i].postscale};
        for (int k = 0; k < 2; k++) {
            uint64_t b;
            memcpy(&b, &f[k], sizeof(b));
            hvd_wbuf_u32(&w, (uint32_t)(b >> 32));
            hvd_wbuf_u32(&w, (uint32_t)b);
        }
        hvd_wbuf_u32(&w, (uint32_t)(reqs[i].row >> 32));
        hvd_wbuf_u32(&w, (uint32_t)reqs[i].row);
        hvd_wbuf_u32(&w, (uint32_t)(reqs[i].shape >> 32));
        hvd_wbuf_u32(&w, (uint32_t)reqs[i].shape);
    }
    /* The frame header is not needed on the ring: hand out the payload. */
    uint8_t *f;
    err = hvd_wbuf_finish(&w, 0, &f, len);
    hvd_wbuf_close(&w);
    if (err)
        goto out;
    *len -= HVD_FRAME_HDR;
    memmove(f, f + HVD_FRAME_HDR, *len);
    *out = f;
out:
    free(bits);
    free(ids);
    return err;
}

int hvd__neg_add_cached(struct hvd_neg *t, int rank, size_t id,
                        struct hvd_resp **out, size_t *nout)
{
    return id < t->ncache ? hvd__neg_add(t, rank, &t->cache[id], out, nout)
                          : HVD_EPROTO;
}

int hvd__neg_ready_cached(struct hvd_neg *t, size_t id, struct hvd_resp **out,
                          size_t *nout)
{
    if (id >= t->ncache)
        return HVD_EPROTO;
    struct hvd_resp *o = realloc(*out, (*nout + 1) * sizeof(**out));
    if (o == NULL)
        return HVD_ENOMEM;
    *out = o;
    struct hvd_resp *r = &o[(*nout)++];
    memset(r, 0, sizeof(*r));
    r->req = t->cache[id];
    if ((r->req.name = strdup(t->cache[id].name)) == NULL) {
        (*nout)--;
        return HVD_ENOMEM;
    }
    return 0;
}

void hvd__neg_free_reqs(struct hvd_req *reqs, size_t n)
{
    for (size_t i = 0; reqs && i < n; i++)
        free(reqs[i].name);
    free(reqs);
}

int hvd__neg_decode(const struct hvd_neg *t, const uint8_t *p, size_t len,
                    const uint8_t **bits, struct hvd_req **reqs, size_t *n)
{
    struct hvd_rbuf r;
    size_t nbytes;
    hvd_rbuf_init(&r, p, len);
    *reqs = NULL;
    *n = 0;
    *bits = hvd_rbuf_bytes(&r, &nbytes);
    /* The bitmap covers exactly the cache, which every rank shares. */
    if (r.err || nbytes != (t->ncache + 7) / 8 ||
        (t->ncache % 8 && nbytes &&
         ((*bits)[nbytes - 1] >> (t->ncache % 8)) != 0))
        return r.err ? r.err : HVD_EPROTO;
    uint32_t cnt = hvd_rbuf_u32(&r);
    /* Each request takes at least 55 bytes: no forged count allocates. */
    if (r.err || cnt > (r.len - r.off) / 55)
        return r.err ? r.err : HVD_EPROTO;
    if (cnt == 0) /* the steady state: cached names only */
        return hvd_rbuf_done(&r);
    struct hvd_req *a = calloc(cnt, sizeof(*a));
    if (a == NULL)
        return HVD_ENOMEM;
    for (uint32_t i = 0; i < cnt; i++) {
        a[i].kind = hvd_rbuf_u8(&r);
        a[i].dtype = hvd_rbuf_u8(&r);
        a[i].op = hvd_rbuf_u8(&r);
        a[i].root = hvd_rbuf_i32(&r);
        uint64_t hi = hvd_rbuf_u32(&r);
        a[i].count = hi << 32 | hvd_rbuf_u32(&r);
        a[i].name = hvd_rbuf_strdup(&r);
        a[i].pset = hvd_rbuf_i32(&r);
        a[i].compress = hvd_rbuf_u8(&r);
        a[i].device = hvd_rbuf_u8(&r);
        double *f[2] = {&a[i].prescale, &a[i].postscale};
        for (int k = 0; k < 2; k++) {
            uint64_t b = (uint64_t)hvd_rbuf_u32(&r) << 32;
            b |= hvd_rbuf_u32(&r);
            memcpy(f[k], &b, sizeof(b));
        }
        hi = hvd_rbuf_u32(&r);
        a[i].row = hi << 32 | hvd_rbuf_u32(&r);
        hi = hvd_rbuf_u32(&r);
        a[i].shape = hi << 32 | hvd_rbuf_u32(&r);
    }
    int err = hvd_rbuf_done(&r);
    if (err) {
        hvd__neg_free_reqs(a, cnt);
        return err;
    }
    *reqs = a;
    *n = cnt;
    return 0;
}
