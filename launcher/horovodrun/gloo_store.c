/* Horovod's Gloo rendezvous: a bounded HTTP key-value store. */
#include "launcher/horovodrun/gloo_store.h"

#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/lib/errmsg.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "common/secret.h"

/* Refusals logged one by one; the rest are counted, and told at close. */
#define LOG_MAX 5

/* Chained hash table over nodes embedded in the scopes and entries. */
struct hnode {
    struct hnode *next;
    uint64_t hash;
    const char *key;
    size_t klen;
};

struct htab {
    struct hnode **b;
    size_t nb; /* a power of two */
    size_t n;
};

/* A value, shared by its entry and the responses still sending it. */
struct val {
    unsigned refs;
    size_t len;
    unsigned char data[];
};

struct entry;

struct scope {
    struct hnode node; /* keyed by name */
    char *name;
    int size;            /* ranks that use it; 0 for an ad-hoc scope */
    unsigned char *done; /* bitmap of the ranks done with it */
    int ndone;
    struct entry *head; /* its keys */
    size_t nkeys;
};

struct entry {
    struct hnode node; /* keyed by path, "/<scope>/<key>" */
    char *path;
    size_t plen;
    struct scope *scope;
    struct val *val;
    struct entry *prev, *next;
};

enum { M_GET = 1, M_PUT, M_DELETE };

/* One HTTP request, from its headers to its completion. */
struct req {
    int method;
    char *path;
    size_t plen, slen; /* the scope is path[1] .. path[slen] */
    struct val *val;   /* the body of a PUT */
    size_t got;
    size_t reserved; /* bytes counted against bytes_max until stored */
    int key_slot;    /* a key counted against keys_max until stored */
};

struct hr_gloo_store {
    struct MHD_Daemon *d;
    struct hr_gloo_limits lim;
    int keep_alive;
    uint64_t seed;
    struct hr_gloo_peer *peers; /* sorted; fixed once serving */
    size_t npeers;
    struct htab scopes, entries;
    size_t nkeys, bytes;   /* held */
    size_t rkeys, rbytes;  /* reserved by PUTs still receiving */
    unsigned told;         /* refusals logged one by one */
    atomic_ulong refusals; /* read by other threads */
};

/* ---- the store's tables, touched only by the serving thread ---- */

/* FNV-1a under a random seed, so that peers cannot aim keys at one chain,
 * with a final mix for the low bits that pick the bucket. */
static uint64_t hash(uint64_t seed, const char *p, size_t n)
{
    uint64_t h = seed ^ 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static int ht_init(struct htab *t, size_t nb)
{
    t->b = calloc(nb, sizeof(*t->b));
    t->nb = nb;
    t->n = 0;
    return t->b == NULL ? HVD_ENOMEM : 0;
}

static struct hnode *ht_find(const struct htab *t, uint64_t h, const char *k,
                             size_t n)
{
    struct hnode *e;

    for (e = t->b[h & (t->nb - 1)]; e != NULL; e = e->next)
        if (e->hash == h && e->klen == n && memcmp(e->key, k, n) == 0)
            return e;
    return NULL;
}

/* Doubles the buckets when full; without memory, chains grow instead. */
static void ht_add(struct htab *t, struct hnode *e)
{
    if (t->n >= t->nb && t->nb <= SIZE_MAX / 2 / sizeof(*t->b)) {
        struct hnode **nb = calloc(t->nb * 2, sizeof(*nb));
        if (nb != NULL) {
            for (size_t i = 0; i < t->nb; i++) {
                struct hnode *x = t->b[i], *next;
                for (; x != NULL; x = next) {
                    next = x->next;
                    x->next = nb[x->hash & (t->nb * 2 - 1)];
                    nb[x->hash & (t->nb * 2 - 1)] = x;
                }
            }
            free(t->b);
            t->b = nb;
            t->nb *= 2;
        }
    }
    e->next = t->b[e->hash & (t->nb - 1)];
    t->b[e->hash & (t->nb - 1)] = e;
    t->n++;
}

static void ht_del(struct htab *t, struct hnode *e)
{
    struct hnode **pp = &t->b[e->hash & (t->nb - 1)];

    while (*pp != NULL && *pp != e)
        pp = &(*pp)->next;
    if (*pp == e) {
        *pp = e->next;
        t->n--;
    }
}

static void val_unref(void *cls)
{
    struct val *v = cls;

    if (v != NULL && --v->refs == 0)
        free(v);
}

static struct scope *scope_find(struct hr_gloo_store *s, const char *name,
                                size_t n)
{
    struct hnode *h = ht_find(&s->scopes, hash(s->seed, name, n), name, n);

    return h == NULL ? NULL : (struct scope *)h;
}

static struct scope *scope_new(struct hr_gloo_store *s, const char *name,
                               size_t n, int size)
{
    struct scope *sc = calloc(1, sizeof(*sc));

    if (sc == NULL)
        return NULL;
    sc->name = malloc(n + 1);
    if (size > 0)
        sc->done = calloc(((size_t)size + 7) / 8, 1);
    if (sc->name == NULL || (size > 0 && sc->done == NULL)) {
        free(sc->name);
        free(sc->done);
        free(sc);
        return NULL;
    }
    memcpy(sc->name, name, n);
    sc->name[n] = '\0';
    sc->size = size;
    sc->node.key = sc->name;
    sc->node.klen = n;
    sc->node.hash = hash(s->seed, name, n);
    ht_add(&s->scopes, &sc->node);
    return sc;
}

static void scope_free(struct hr_gloo_store *s, struct scope *sc)
{
    ht_del(&s->scopes, &sc->node);
    free(sc->name);
    free(sc->done);
    free(sc);
}

static void entry_free(struct hr_gloo_store *s, struct entry *e)
{
    struct scope *sc = e->scope;

    ht_del(&s->entries, &e->node);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        sc->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    sc->nkeys--;
    s->nkeys--;
    s->bytes -= e->plen + e->val->len;
    val_unref(e->val);
    free(e->path);
    free(e);
}

/* All ranks are done with a declared scope: it starts over, empty. */
static void scope_clear(struct hr_gloo_store *s, struct scope *sc)
{
    while (sc->head != NULL)
        entry_free(s, sc->head);
    memset(sc->done, 0, ((size_t)sc->size + 7) / 8);
    sc->ndone = 0;
}

/* ---- serving ---- */

static void refuse(struct hr_gloo_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Counts a refusal, and logs it while few have been. */
static void refuse(struct hr_gloo_store *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    atomic_fetch_add_explicit(&s->refusals, 1, memory_order_relaxed);
    if (s->told >= LOG_MAX)
        return;
    s->told++;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    hvd_log_warn("Gloo store: %s%s", line,
                 s->told == LOG_MAX ? " (further refusals are only counted)"
                                    : "");
}

/* Orders peers by address, whatever their connection counts. */
static int peer_cmp(const void *a, const void *b)
{
    const struct hr_gloo_peer *x = a, *y = b;

    if (x->fam != y->fam)
        return x->fam < y->fam ? -1 : 1;
    return memcmp(x->a, y->a, sizeof(x->a));
}

static struct hr_gloo_peer *peer_find(struct hr_gloo_store *s,
                                      const struct hr_gloo_peer *k)
{
    return s->npeers == 0
               ? NULL
               : bsearch(k, s->peers, s->npeers, sizeof(*s->peers), peer_cmp);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *sa,
                                 socklen_t len)
{
    struct hr_gloo_store *s = cls;
    struct hr_gloo_peer k, *p;
    char who[INET6_ADDRSTRLEN];

    if (hr_gloo__peer_key(sa, len, &k) != 0) {
        refuse(s, "refused a connection of an unknown address family");
        return MHD_NO;
    }
    p = peer_find(s, &k);
    hr_gloo__peer_text(&k, who, sizeof(who));
    if (p == NULL) {
        refuse(s,
               "refused a connection from %s, which is no job host's "
               "address; if a rank runs there, name its host in -H by a "
               "name that resolves to %s",
               who, who);
        return MHD_NO;
    }
    if (p->conns >= s->lim.conns_per_ip) {
        refuse(s,
               "refused a connection from %s, which already has %u open; "
               "check what else on that host talks to this port",
               who, p->conns);
        return MHD_NO;
    }
    return MHD_YES;
}

static void on_conn(void *cls, struct MHD_Connection *c, void **sock_ctx,
                    enum MHD_ConnectionNotificationCode toe)
{
    struct hr_gloo_store *s = cls;
    const union MHD_ConnectionInfo *ci;
    struct hr_gloo_peer k, *p;

    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        p = *sock_ctx;
        if (p != NULL)
            p->conns--;
        *sock_ctx = NULL;
        return;
    }
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    /* The address family is known: on_accept let the connection in. */
    if (ci == NULL || ci->client_addr == NULL ||
        hr_gloo__peer_key(ci->client_addr, sizeof(struct sockaddr_storage),
                          &k) != 0)
        return;
    p = peer_find(s, &k);
    if (p != NULL)
        p->conns++;
    *sock_ctx = p;
}

static void conn_peer(struct MHD_Connection *c, char *out, size_t n)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    hr_gloo__sockaddr_text(ci == NULL ? NULL : ci->client_addr,
                           sizeof(struct sockaddr_storage), out, n);
}

/* Queues resp with status, closing afterwards unless keep-alive is on. */
static enum MHD_Result reply(struct hr_gloo_store *s, struct MHD_Connection *c,
                             unsigned status, struct MHD_Response *resp)
{
    enum MHD_Result r;

    if (resp == NULL)
        return MHD_NO;
    if (!s->keep_alive &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") !=
            MHD_YES) {
        MHD_destroy_response(resp);
        return MHD_NO;
    }
    r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result reply_text(struct hr_gloo_store *s,
                                  struct MHD_Connection *c, unsigned status,
                                  const char *text)
{
    return reply(s, c, status,
                 MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                 MHD_RESPMEM_PERSISTENT));
}

static enum MHD_Result reply_val(struct hr_gloo_store *s,
                                 struct MHD_Connection *c, struct val *v)
{
#if MHD_VERSION >= 0x00097302
    /* Values are shared, not copied: thousands of ranks read each one. */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback_cls(v->len, v->data,
                                                               val_unref, v);
    if (resp != NULL)
        v->refs++;
#else
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(v->len, v->data, MHD_RESPMEM_MUST_COPY);
#endif
    return reply(s, c, MHD_HTTP_OK, resp);
}

/* A rank of a declared scope, as Horovod writes it; -1 if it is not one. */
static int parse_rank(const char *k, size_t n, int size)
{
    long v = 0;

    if (n == 0 || n > 10)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9')
            return -1;
        v = v * 10 + (k[i] - '0');
    }
    return v < size ? (int)v : -1;
}

/*
 * Checks a request once its headers are in. 0 to go on, or the status of
 * an early refusal with its reason in *why; the body is then never read.
 */
static unsigned begin(struct hr_gloo_store *s, struct MHD_Connection *c,
                      struct req *r, const char *url, const char *method,
                      const char **why)
{
    const char *cl, *slash, *reason;
    char who[INET6_ADDRSTRLEN], q[HVD_QUOTE_MAX + 1], mq[HVD_QUOTE_MAX + 1];
    char big[96];
    unsigned long long want = 0;
    unsigned status;
    size_t klen, need;

    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        r->method = M_GET;
    else if (strcmp(method, MHD_HTTP_METHOD_PUT) == 0)
        r->method = M_PUT;
    else if (strcmp(method, MHD_HTTP_METHOD_DELETE) == 0)
        r->method = M_DELETE;
    slash = url[0] == '/' ? strchr(url + 1, '/') : NULL;
    if (r->method == 0 || slash == NULL) {
        reason = "Horovod sends GET, PUT or DELETE of /<scope>/<key>; is "
                 "another program using this port?";
        *why = "want GET, PUT or DELETE of /<scope>/<key>\n";
        status = MHD_HTTP_BAD_REQUEST;
        goto refused;
    }
    r->slen = (size_t)(slash - url) - 1;
    klen = strlen(slash + 1);
    if (r->slen > s->lim.name_max || klen > s->lim.name_max) {
        reason = "a scope or key name is too long";
        *why = "scope or key name too long\n";
        status = MHD_HTTP_URI_TOO_LONG;
        goto refused;
    }
    if (!hr_gloo__name_ok(url + 1, r->slen) ||
        !hr_gloo__name_ok(slash + 1, klen)) {
        reason = "not a /<scope>/<key> path";
        *why = "want a path /<scope>/<key>\n";
        status = MHD_HTTP_BAD_REQUEST;
        goto refused;
    }
    /* Streamed bodies have no size to check in advance. */
    if (MHD_lookup_connection_value(
            c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL) {
        reason = "a body without Content-Length";
        *why = "send Content-Length\n";
        status = MHD_HTTP_LENGTH_REQUIRED;
        goto refused;
    }
    cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL) {
        char *end;
        errno = 0;
        want = strtoull(cl, &end, 10);
        if (end == cl || *end != '\0' || errno != 0)
            want = ULLONG_MAX;
    }
    if (want > s->lim.value_max) {
        snprintf(big, sizeof(big),
                 "a value of %llu bytes, over the limit of %zu", want,
                 s->lim.value_max);
        reason = big;
        *why = "value too large\n";
        status = MHD_HTTP_CONTENT_TOO_LARGE;
        goto refused;
    }
    r->plen = strlen(url);
    r->path = malloc(r->plen + 1);
    if (r->path == NULL) {
        *why = "out of memory\n";
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    }
    memcpy(r->path, url, r->plen + 1);
    if (r->method != M_PUT)
        return 0;
    /*
     * The body is counted as held from now on, so that PUTs still
     * receiving cannot together overrun the store.
     */
    need = r->plen + (size_t)want;
    if (ht_find(&s->entries, hash(s->seed, url, r->plen), url, r->plen) ==
        NULL) {
        if (s->nkeys + s->rkeys >= s->lim.keys_max)
            goto full;
        r->key_slot = 1;
        s->rkeys++;
    }
    if (s->bytes + s->rbytes > s->lim.bytes_max ||
        need > s->lim.bytes_max - s->bytes - s->rbytes)
        goto full;
    r->reserved = need;
    s->rbytes += need;
    r->val = malloc(sizeof(*r->val) + (size_t)want);
    if (r->val == NULL) {
        *why = "out of memory\n";
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    }
    r->val->refs = 1;
    r->val->len = (size_t)want;
    return 0;
full:
    reason = "the store is full; something other than this job's ranks may "
             "be filling it";
    *why = "store full\n";
    status = MHD_HTTP_INSUFFICIENT_STORAGE;
refused:
    conn_peer(c, who, sizeof(who));
    hvd_quote(q, url, strlen(url));
    hvd_quote(mq, method, strlen(method));
    refuse(s, "refused %s %s from %s (HTTP %u): %s", mq, q, who, status,
           reason);
    return status;
}

static void req_release(struct hr_gloo_store *s, struct req *r)
{
    s->rbytes -= r->reserved;
    r->reserved = 0;
    if (r->key_slot)
        s->rkeys--;
    r->key_slot = 0;
}

/* Stores a received PUT. An HTTP status. */
static unsigned put(struct hr_gloo_store *s, struct req *r)
{
    uint64_t h = hash(s->seed, r->path, r->plen);
    struct entry *e = (struct entry *)ht_find(&s->entries, h, r->path, r->plen);
    struct scope *sc;

    req_release(s, r);
    if (e != NULL) {
        s->bytes = s->bytes - e->val->len + r->val->len;
        val_unref(e->val);
        e->val = r->val;
        r->val = NULL;
        return MHD_HTTP_OK;
    }
    /*
     * Other PUTs have reserved their room, so only one whose key was there
     * when it began, and has gone since, can find the store full here.
     */
    if (s->nkeys + s->rkeys >= s->lim.keys_max ||
        s->bytes + s->rbytes + r->plen + r->val->len > s->lim.bytes_max)
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    sc = scope_find(s, r->path + 1, r->slen);
    if (sc == NULL && (sc = scope_new(s, r->path + 1, r->slen, 0)) == NULL)
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        if (sc->nkeys == 0 && sc->size == 0)
            scope_free(s, sc);
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    }
    e->path = r->path;
    e->plen = r->plen;
    r->path = NULL;
    e->val = r->val;
    r->val = NULL;
    e->scope = sc;
    e->node.key = e->path;
    e->node.klen = e->plen;
    e->node.hash = h;
    ht_add(&s->entries, &e->node);
    e->next = sc->head;
    if (sc->head != NULL)
        sc->head->prev = e;
    sc->head = e;
    sc->nkeys++;
    s->nkeys++;
    s->bytes += e->plen + e->val->len;
    return MHD_HTTP_OK;
}

/* A rank is done with a scope, Horovod's way. An HTTP status. */
static unsigned del(struct hr_gloo_store *s, struct req *r)
{
    struct scope *sc = scope_find(s, r->path + 1, r->slen);
    const char *key = r->path + 1 + r->slen + 1;
    struct entry *e;

    if (sc != NULL && sc->size > 0) {
        int rank = parse_rank(key, r->plen - r->slen - 2, sc->size);
        if (rank < 0)
            return MHD_HTTP_BAD_REQUEST;
        /* A rank that says it twice is still one rank. */
        if (!(sc->done[rank / 8] & (1u << (rank % 8)))) {
            sc->done[rank / 8] |= (unsigned char)(1u << (rank % 8));
            sc->ndone++;
        }
        if (sc->ndone == sc->size)
            scope_clear(s, sc);
        return MHD_HTTP_OK;
    }
    e = (struct entry *)ht_find(&s->entries, hash(s->seed, r->path, r->plen),
                                r->path, r->plen);
    if (e != NULL) {
        entry_free(s, e);
        if (sc != NULL && sc->nkeys == 0)
            scope_free(s, sc);
    }
    return MHD_HTTP_OK;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *data,
                                  size_t *data_size, void **req_cls)
{
    struct hr_gloo_store *s = cls;
    struct req *r = *req_cls;
    const char *why = NULL;
    struct entry *e;
    unsigned status;

    (void)version;
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL)
            return MHD_NO;
        *req_cls = r;
        status = begin(s, c, r, url, method, &why);
        /* An answer now means the body is never read. */
        if (status != 0)
            return reply_text(s, c, status, why);
        return MHD_YES;
    }
    if (*data_size != 0) {
        /* Content-Length was checked: a PUT's body fits its buffer. */
        if (r->val != NULL && *data_size <= r->val->len - r->got) {
            memcpy(r->val->data + r->got, data, *data_size);
            r->got += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    switch (r->method) {
    case M_GET:
        e = (struct entry *)ht_find(
            &s->entries, hash(s->seed, r->path, r->plen), r->path, r->plen);
        if (e == NULL)
            return reply_text(s, c, MHD_HTTP_NOT_FOUND, "");
        return reply_val(s, c, e->val);
    case M_PUT:
        status = r->got == r->val->len ? put(s, r) : MHD_HTTP_BAD_REQUEST;
        break;
    default:
        status = del(s, r);
        break;
    }
    if (status != MHD_HTTP_OK) {
        char who[INET6_ADDRSTRLEN], q[HVD_QUOTE_MAX + 1];
        conn_peer(c, who, sizeof(who));
        hvd_quote(q, r->path, r->plen);
        refuse(s, "refused %s %s from %s (HTTP %u): %s", method, q, who, status,
               status == MHD_HTTP_BAD_REQUEST
                   ? "not a rank of that scope"
                   : "the store is full; something other than this job's "
                     "ranks may be filling it");
        return reply_text(s, c, status,
                          status == MHD_HTTP_BAD_REQUEST ? "not a rank\n"
                                                         : "store full\n");
    }
    return reply_text(s, c, MHD_HTTP_OK, "");
}

static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
                    enum MHD_RequestTerminationCode toe)
{
    struct hr_gloo_store *s = cls;
    struct req *r = *req_cls;

    (void)c;
    (void)toe;
    if (r == NULL)
        return;
    req_release(s, r);
    val_unref(r->val);
    free(r->path);
    free(r);
    *req_cls = NULL;
}

/* Horovod's server takes paths as they come; so does this one. */
static size_t on_unescape(void *cls, struct MHD_Connection *c, char *str)
{
    (void)cls;
    (void)c;
    return strlen(str);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* libmicrohttpd's own messages, for --verbose. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[256];
    size_t n;

    (void)cls;
    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    hvd_log_info("Gloo store: libmicrohttpd: %s", line);
}

/* A request of Horovod's, headers and all, takes well under 4 KiB. */
static int limits_ok(const struct hr_gloo_limits *l)
{
    return l->name_max > 0 && l->value_max > 0 && l->keys_max > 0 &&
           l->bytes_max > 0 && l->request_mem >= 4096 && l->conns_max > 0 &&
           l->conns_per_ip > 0 && l->idle_timeout > 0;
}

/* Binds and listens on addr:port. A descriptor, or a negative code. */
static int listen_on(const char *addr, int port, int *port_out, int *v6,
                     char *err, size_t errlen)
{
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char q[HVD_QUOTE_MAX + 1], ps[16];
    int fd = -1, one = 1, rc;

    hvd_quote(q, addr, strlen(addr));
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(addr, ps, &hints, &ai) != 0 || ai == NULL) {
        hvd_seterr(err, errlen, "'%s' is not an IP address", q);
        rc = HVD_EINVAL;
        goto out;
    }
    *v6 = ai->ai_family == AF_INET6;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    /* A restarted launcher may reuse a port left in TIME_WAIT. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (*v6) {
        const struct sockaddr_in6 *a6 = (const void *)ai->ai_addr;
        /*
         * One address only; but "::" asks for all of them, and an
         * IPv4-mapped address can only be served to IPv4 peers.
         */
        if (!IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) &&
            !IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        goto fail;
    *port_out =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    rc = fd;
    fd = -1;
    goto out;
fail:
    hvd_seterr(err, errlen, "cannot listen on %s port %d: %s", q, port,
               strerror(errno));
    rc = HVD_ESYS;
out:
    if (fd >= 0)
        close(fd);
    if (ai != NULL)
        freeaddrinfo(ai);
    return rc;
}

/* Copies the allowed peers and the declared scopes into s. */
static int load_cfg(struct hr_gloo_store *s, const struct hr_gloo_cfg *cfg,
                    char *err, size_t errlen)
{
    char q[HVD_QUOTE_MAX + 1];
    size_t i, n = 0;

    if (cfg->npeers > 0) {
        s->peers = malloc(cfg->npeers * sizeof(*s->peers));
        if (s->peers == NULL)
            goto nomem;
        memcpy(s->peers, cfg->peers, cfg->npeers * sizeof(*s->peers));
        qsort(s->peers, cfg->npeers, sizeof(*s->peers), peer_cmp);
        for (i = 0; i < cfg->npeers; i++) {
            s->peers[i].conns = 0;
            if (n == 0 || peer_cmp(&s->peers[n - 1], &s->peers[i]) != 0)
                s->peers[n++] = s->peers[i];
        }
    }
    s->npeers = n;
    for (i = 0; i < cfg->ndecls; i++) {
        const struct hr_gloo_decl *d = &cfg->decls[i];
        size_t len = strlen(d->name);
        struct scope *sc = scope_find(s, d->name, len);
        hvd_quote(q, d->name, len);
        if (len > s->lim.name_max) {
            hvd_seterr(err, errlen, "Gloo scope '%s' is over %zu bytes", q,
                       s->lim.name_max);
            return HVD_EINVAL;
        }
        if (sc != NULL && sc->size != d->size) {
            hvd_seterr(err, errlen,
                       "Gloo scope '%s' declared with %d and %d ranks", q,
                       sc->size, d->size);
            return HVD_EDUP;
        }
        if (sc == NULL && scope_new(s, d->name, len, d->size) == NULL)
            goto nomem;
    }
    return 0;
nomem:
    hvd_seterr(err, errlen, "out of memory");
    return HVD_ENOMEM;
}

static void store_free(struct hr_gloo_store *s)
{
    size_t i;

    if (s->entries.b != NULL)
        for (i = 0; i < s->entries.nb; i++)
            while (s->entries.b[i] != NULL)
                entry_free(s, (struct entry *)s->entries.b[i]);
    if (s->scopes.b != NULL)
        for (i = 0; i < s->scopes.nb; i++)
            while (s->scopes.b[i] != NULL)
                scope_free(s, (struct scope *)s->scopes.b[i]);
    free(s->entries.b);
    free(s->scopes.b);
    free(s->peers);
    free(s);
}

int hr_gloo_store_start(struct hr_gloo_store **out,
                        const struct hr_gloo_cfg *cfg, const char *addr,
                        int port, int *port_out, char *err, size_t errlen)
{
    struct hr_gloo_store *s = NULL;
    uint8_t rnd[HVD_SECRET_LEN];
    sigset_t all, old;
    unsigned flags;
    int rc, fd = -1, v6 = 0, p = 0;

    if ((rc = hvd_errmsg_start(err, errlen,
                               out != NULL && cfg != NULL && addr != NULL &&
                                   port_out != NULL && port >= 0 &&
                                   port <= 65535)))
        return rc;
    *out = NULL;
    if (!limits_ok(&cfg->limits)) {
        hvd_seterr(err, errlen, "a Gloo store limit is zero or too small");
        return HVD_EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL || (rc = ht_init(&s->entries, 1024)) != 0 ||
        (rc = ht_init(&s->scopes, 64)) != 0) {
        hvd_seterr(err, errlen, "out of memory");
        rc = HVD_ENOMEM;
        goto out;
    }
    s->lim = cfg->limits;
    s->keep_alive = cfg->keep_alive;
    atomic_init(&s->refusals, 0);
    if ((rc = hvd_secret_new(rnd)) != 0) {
        hvd_seterr(err, errlen, "no random bytes for the Gloo store");
        goto out;
    }
    memcpy(&s->seed, rnd, sizeof(s->seed));
    if ((rc = load_cfg(s, cfg, err, errlen)) != 0)
        goto out;
    fd = listen_on(addr, port, &p, &v6, err, errlen);
    if (fd < 0) {
        rc = fd;
        goto out;
    }
    flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* Signals are for the launcher's loop, not the store's thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    /* The logger first, or libmicrohttpd warns that it came late. */
    s->d = MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, s, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, s->lim.conns_max,
        MHD_OPTION_CONNECTION_TIMEOUT, s->lim.idle_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->lim.request_mem,
        MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_conn, s, MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, s,
        MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /*
     * libmicrohttpd owns the socket now and closes it on most of its
     * failure paths, not all: closing it here could close a descriptor
     * that another thread has opened since, so a failed start may leak it.
     */
    fd = -1;
    if (s->d == NULL) {
        char q[HVD_QUOTE_MAX + 1];
        hvd_quote(q, addr, strlen(addr));
        hvd_seterr(err, errlen,
                   "cannot start the Gloo store on %s (libmicrohttpd failed; "
                   "--verbose tells why)",
                   q);
        rc = HVD_ESYS;
        goto out;
    }
    *port_out = p;
    *out = s;
    s = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (s != NULL)
        store_free(s);
    return rc;
}

void hr_gloo_store_close(struct hr_gloo_store *s)
{
    unsigned long n;

    if (s == NULL)
        return;
    /* Joins the serving thread, which closes every connection first. */
    MHD_stop_daemon(s->d);
    n = atomic_load(&s->refusals);
    if (n > s->told)
        hvd_log_warn("Gloo store: refused %lu connections or requests in "
                     "all; only the first %u were logged",
                     n, s->told);
    store_free(s);
}

unsigned long hr_gloo_store_refusals(const struct hr_gloo_store *s)
{
    return s == NULL ? 0 : atomic_load(&s->refusals);
}
