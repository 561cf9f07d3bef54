/* Job spec encoding and validating decoder for the agent channel. */
#include "launcher/lib/proto.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "common/wire.h"

void hvd_jobspec_init(struct hvd_jobspec *js)
{
    memset(js, 0, sizeof(*js));
    hvd_strvec_init(&js->argv);
    hvd_strvec_init(&js->env);
}

void hvd_jobspec_close(struct hvd_jobspec *js)
{
    if (js == NULL)
        return;
    free(js->cwd);
    hvd_strvec_close(&js->argv);
    hvd_strvec_close(&js->env);
    for (uint32_t i = 0; i < js->nranks; i++)
        hvd_strvec_close(&js->ranks[i].env);
    free(js->ranks);
    hvd_jobspec_init(js);
}

struct hvd_jobrank *hvd_jobspec_add_rank(struct hvd_jobspec *js, uint32_t rank,
                                         uint32_t local_rank)
{
    struct hvd_jobrank *nr =
        realloc(js->ranks, (js->nranks + 1) * sizeof(*js->ranks));
    if (nr == NULL)
        return NULL;
    js->ranks = nr;
    struct hvd_jobrank *r = &js->ranks[js->nranks++];
    r->rank = rank;
    r->local_rank = local_rank;
    hvd_strvec_init(&r->env);
    return r;
}

static void put_vec(struct hvd_wbuf *w, const struct hvd_strvec *sv)
{
    hvd_wbuf_u32(w, (uint32_t)sv->n);
    for (size_t i = 0; i < sv->n; i++)
        hvd_wbuf_str(w, sv->v[i]);
}

/* A count, then each rank: JOB and RANKS lay ranks out alike. */
static void put_ranks(struct hvd_wbuf *w, const struct hvd_jobrank *ranks,
                      uint32_t n)
{
    hvd_wbuf_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        hvd_wbuf_u32(w, ranks[i].rank);
        hvd_wbuf_u32(w, ranks[i].local_rank);
        put_vec(w, &ranks[i].env);
    }
}

int hvd_jobspec_encode(const struct hvd_jobspec *js, uint8_t **out,
                       size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_str(&w, js->cwd ? js->cwd : "");
    put_vec(&w, &js->argv);
    put_vec(&w, &js->env);
    hvd_wbuf_u32(&w, js->kill_grace_ms);
    hvd_wbuf_u8(&w, js->gpu_pinning);
    hvd_wbuf_u8(&w, js->bind);
    hvd_wbuf_u8(&w, js->carry_rdv);
    put_ranks(&w, js->ranks, js->nranks);
    return hvd_wbuf_finish(&w, HVD_MSG_JOB, out, outlen);
}

int hvd_ranks_encode(const struct hvd_jobrank *ranks, uint32_t n, uint8_t **out,
                     size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    put_ranks(&w, ranks, n);
    return hvd_wbuf_finish(&w, HVD_MSG_RANKS, out, outlen);
}

int hvd_kill_encode(uint32_t rank, uint8_t now, uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, rank);
    hvd_wbuf_u8(&w, now);
    return hvd_wbuf_finish(&w, HVD_MSG_KILL, out, outlen);
}

/* A count is plausible only if every element could still fit: each takes
 * at least min bytes. This keeps a forged count from driving allocation. */
static int count_ok(const struct hvd_rbuf *r, uint32_t n, size_t min)
{
    return r->err == 0 && n <= (r->len - r->off) / min;
}

static int get_vec(struct hvd_rbuf *r, struct hvd_strvec *sv)
{
    uint32_t n = hvd_rbuf_u32(r);
    if (!count_ok(r, n, 4))
        return r->err ? r->err : HVD_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        char *s = hvd_rbuf_strdup(r);
        if (s == NULL)
            return r->err;
        int err = hvd_strvec_push(sv, s);
        free(s);
        if (err)
            return err;
    }
    return 0;
}

/* The reading side of put_ranks: appends the ranks to js. Each takes at
 * least 12 bytes (rank, local rank, an empty env's count). */
static int get_ranks(struct hvd_rbuf *r, struct hvd_jobspec *js)
{
    uint32_t n = hvd_rbuf_u32(r);
    if (!count_ok(r, n, 12))
        return r->err ? r->err : HVD_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t rank = hvd_rbuf_u32(r);
        uint32_t local_rank = hvd_rbuf_u32(r);
        struct hvd_jobrank *jr = hvd_jobspec_add_rank(js, rank, local_rank);
        if (jr == NULL)
            return HVD_ENOMEM;
        int err = get_vec(r, &jr->env);
        if (err)
            return err;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Ranks must be unique; the agent keys everything by rank. */
static int ranks_unique(const struct hvd_jobspec *js)
{
    uint32_t n = js->nranks;
    uint32_t *sorted = malloc(n * sizeof(*sorted));
    if (sorted == NULL)
        return HVD_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        sorted[i] = js->ranks[i].rank;
    qsort(sorted, n, sizeof(*sorted), cmp_u32);
    int err = 0;
    for (uint32_t i = 1; i < n && err == 0; i++)
        if (sorted[i] == sorted[i - 1])
            err = HVD_EPROTO;
    free(sorted);
    return err;
}

int hvd_jobspec_decode(struct hvd_jobspec *js, const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    int err;

    hvd_rbuf_init(&r, p, len);
    js->cwd = hvd_rbuf_strdup(&r);
    if (js->cwd == NULL)
        return r.err;
    if ((err = get_vec(&r, &js->argv)) || (err = get_vec(&r, &js->env)))
        return err;
    js->kill_grace_ms = hvd_rbuf_u32(&r);
    js->gpu_pinning = hvd_rbuf_u8(&r);
    js->bind = hvd_rbuf_u8(&r);
    js->carry_rdv = hvd_rbuf_u8(&r);
    if ((err = get_ranks(&r, js)) || (err = hvd_rbuf_done(&r)))
        return err;
    if (js->argv.n == 0 || js->nranks == 0 || js->argv.v[0][0] == '\0' ||
        js->carry_rdv > 1)
        return HVD_EPROTO;
    return ranks_unique(js);
}

int hvd_jobspec_decode_more(struct hvd_jobspec *js, const uint8_t *p,
                            size_t len)
{
    struct hvd_rbuf r;
    uint32_t old = js->nranks;
    int err;

    hvd_rbuf_init(&r, p, len);
    if ((err = get_ranks(&r, js)) == 0 && (err = hvd_rbuf_done(&r)) == 0)
        err = js->nranks == old ? HVD_EPROTO : ranks_unique(js);
    if (err) {
        /* The agent goes on with the ranks it had: drop the new ones. */
        for (uint32_t i = old; i < js->nranks; i++)
            hvd_strvec_close(&js->ranks[i].env);
        js->nranks = old;
    }
    return err;
}

int hvd_hello_decode(struct hvd_hello *h, const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    int err;

    memset(h, 0, sizeof(*h));
    hvd_rbuf_init(&r, p, len);
    h->version = hvd_rbuf_u32(&r);
    if ((err = r.err) != 0)
        goto out;
    if (h->version != HVD_PROTO_VERSION) {
        err = HVD_ENOTSUP;
        goto out;
    }
    h->host = hvd_rbuf_strdup(&r);
    h->gpus = hvd_rbuf_i32(&r);
    h->port = hvd_rbuf_i32(&r);
    err = hvd_rbuf_done(&r);
out:
    if (err != 0) {
        free(h->host);
        h->host = NULL;
    }
    return err;
}

void hvd_hello_close(struct hvd_hello *h)
{
    if (h == NULL)
        return;
    free(h->host);
    h->host = NULL;
}

int hvd_connect_proof(const uint8_t token[HVD_CONNECT_TOKEN_LEN],
                      const char *challenge_hex, const char *host,
                      uint8_t mac[HVD_MAC_LEN])
{
    const struct hvd_mac_part parts[] = {
        {"hvd-connect", 11},
        {challenge_hex, HVD_CONNECT_CHALLENGE_HEX},
        {host, strlen(host)},
    };
    return hvd_hmac(token, HVD_CONNECT_TOKEN_LEN, parts, 3, mac);
}
