/* Encoding, decoding and MAC checks of rendezvous messages. */
#include "common/rdvproto.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "common/wire.h"

/* Appends MAC(secret, label, nonce, body) to the body in w and finishes
 * the frame. */
static int seal(struct hvd_wbuf *w, uint8_t type, const char *label,
                const uint8_t *secret, size_t secretlen, const uint8_t *nonce,
                uint8_t **out, size_t *outlen)
{
    uint8_t mac[HVD_MAC_LEN];
    if (w->err)
        return w->err;
    struct hvd_mac_part parts[] = {
        {label, strlen(label)},
        {nonce, HVD_NONCE_LEN},
        {w->data + HVD_FRAME_HDR, w->len - HVD_FRAME_HDR},
    };
    int err = hvd_hmac(secret, secretlen, parts, 3, mac);
    if (err)
        return err;
    hvd_wbuf_raw(w, mac, sizeof(mac));
    return hvd_wbuf_finish(w, type, out, outlen);
}

/* Checks the trailing MAC; on success *bodylen excludes it. */
static int unseal(const uint8_t *p, size_t len, const char *label,
                  const uint8_t *secret, size_t secretlen, const uint8_t *nonce,
                  size_t *bodylen)
{
    uint8_t mac[HVD_MAC_LEN];
    if (len < HVD_MAC_LEN)
        return HVD_ETRUNC;
    *bodylen = len - HVD_MAC_LEN;
    struct hvd_mac_part parts[] = {
        {label, strlen(label)},
        {nonce, HVD_NONCE_LEN},
        {p, *bodylen},
    };
    int err = hvd_hmac(secret, secretlen, parts, 3, mac);
    if (err)
        return err;
    return hvd_mac_equal(mac, p + *bodylen) ? 0 : HVD_EAUTH;
}

int hvd_rdv_register_encode(const struct hvd_rdv_register *m,
                            const uint8_t *secret, size_t secretlen,
                            const uint8_t server_nonce[HVD_NONCE_LEN],
                            uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, m->rank);
    hvd_wbuf_u32(&w, m->size);
    hvd_wbuf_raw(&w, m->nonce, HVD_NONCE_LEN);
    hvd_wbuf_str(&w, m->host);
    hvd_wbuf_str(&w, m->addr);
    hvd_wbuf_u32(&w, m->port);
    int err = seal(&w, HVD_RDV_REGISTER, "hvd-register", secret, secretlen,
                   server_nonce, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_rdv_register_decode(struct hvd_rdv_register *m, const uint8_t *p,
                            size_t len, const uint8_t *secret, size_t secretlen,
                            const uint8_t server_nonce[HVD_NONCE_LEN])
{
    struct hvd_rbuf r;
    size_t body, n;
    int err =
        unseal(p, len, "hvd-register", secret, secretlen, server_nonce, &body);
    if (err)
        return err;
    hvd_rbuf_init(&r, p, body);
    m->rank = hvd_rbuf_u32(&r);
    m->size = hvd_rbuf_u32(&r);
    const uint8_t *nonce = hvd_rbuf_rest(&r, &n);
    if (n < HVD_NONCE_LEN)
        return HVD_ETRUNC;
    memcpy(m->nonce, nonce, HVD_NONCE_LEN);
    hvd_rbuf_init(&r, nonce + HVD_NONCE_LEN, n - HVD_NONCE_LEN);
    m->host = hvd_rbuf_strdup(&r);
    m->addr = hvd_rbuf_strdup(&r);
    m->port = hvd_rbuf_u32(&r);
    if ((err = hvd_rbuf_done(&r)) == 0 && (m->port == 0 || m->port > 65535))
        err = HVD_EPROTO;
    return err;
}

void hvd_rdv_register_close(struct hvd_rdv_register *m)
{
    if (m == NULL)
        return;
    free(m->host);
    free(m->addr);
    m->host = m->addr = NULL;
}

int hvd_rdv_peers_encode(const struct hvd_rdv_peers *pt, const uint8_t *secret,
                         size_t secretlen,
                         const uint8_t rank_nonce[HVD_NONCE_LEN], uint8_t **out,
                         size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, pt->size);
    hvd_wbuf_u32(&w, pt->nruns);
    for (uint32_t i = 0; i < pt->nruns; i++) {
        hvd_wbuf_u32(&w, pt->runs[i].count);
        hvd_wbuf_u32(&w, pt->runs[i].repeat);
        hvd_wbuf_i32(&w, pt->runs[i].host);
    }
    hvd_wbuf_u32(&w, pt->n);
    for (uint32_t i = 0; i < pt->n; i++) {
        hvd_wbuf_u32(&w, pt->peers[i].rank);
        hvd_wbuf_str(&w, pt->peers[i].host);
        hvd_wbuf_str(&w, pt->peers[i].addr);
        hvd_wbuf_u32(&w, pt->peers[i].port);
    }
    int err = seal(&w, HVD_RDV_PEERS, "hvd-peers", secret, secretlen,
                   rank_nonce, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

/* The runs; each takes 12 bytes, so a forged count cannot make us
 * allocate more than the frame could describe. */
static int decode_runs(struct hvd_rdv_peers *pt, struct hvd_rbuf *r,
                       size_t body)
{
    uint32_t n = hvd_rbuf_u32(r);
    if (r->err || n == 0 || n > body / 12)
        return r->err ? r->err : HVD_EPROTO;
    pt->runs = calloc(n, sizeof(*pt->runs));
    if (pt->runs == NULL)
        return HVD_ENOMEM;
    pt->nruns = n;
    for (uint32_t i = 0; i < n; i++) {
        pt->runs[i].count = hvd_rbuf_u32(r);
        pt->runs[i].repeat = hvd_rbuf_u32(r);
        pt->runs[i].host = hvd_rbuf_i32(r);
    }
    int nhosts;
    return r->err ? r->err
                  : hvd_rdv_runs_check(pt->size, pt->runs, pt->nruns, &nhosts);
}

/* The peers; each takes at least 16 bytes. */
static int decode_peers(struct hvd_rdv_peers *pt, struct hvd_rbuf *r,
                        size_t body)
{
    uint32_t n = hvd_rbuf_u32(r);
    if (r->err || n == 0 || n > body / 16)
        return r->err ? r->err : HVD_EPROTO;
    pt->peers = calloc(n, sizeof(*pt->peers));
    if (pt->peers == NULL)
        return HVD_ENOMEM;
    pt->n = n;
    for (uint32_t i = 0; i < n; i++) {
        struct hvd_rdv_peer *e = &pt->peers[i];
        e->rank = hvd_rbuf_u32(r);
        e->host = hvd_rbuf_strdup(r);
        e->addr = hvd_rbuf_strdup(r);
        e->port = hvd_rbuf_u32(r);
        if (r->err)
            return r->err;
        if (e->rank >= pt->size || (i > 0 && e->rank <= e[-1].rank))
            return HVD_EPROTO;
    }
    return 0;
}

int hvd_rdv_peers_decode(struct hvd_rdv_peers *pt, const uint8_t *p, size_t len,
                         const uint8_t *secret, size_t secretlen,
                         const uint8_t rank_nonce[HVD_NONCE_LEN])
{
    struct hvd_rbuf r;
    size_t body;
    int err = unseal(p, len, "hvd-peers", secret, secretlen, rank_nonce, &body);
    if (err)
        return err;
    hvd_rbuf_init(&r, p, body);
    pt->size = hvd_rbuf_u32(&r);
    if ((err = decode_runs(pt, &r, body)) || (err = decode_peers(pt, &r, body)))
        return err;
    return hvd_rbuf_done(&r);
}

void hvd_rdv_peers_close(struct hvd_rdv_peers *pt)
{
    if (pt == NULL)
        return;
    for (uint32_t i = 0; pt->peers && i < pt->n; i++) {
        free(pt->peers[i].host);
        free(pt->peers[i].addr);
    }
    free(pt->peers);
    free(pt->runs);
    memset(pt, 0, sizeof(*pt));
}

const struct hvd_rdv_peer *hvd_rdv_peers_find(const struct hvd_rdv_peers *pt,
                                              uint32_t rank)
{
    uint32_t lo = 0, hi = pt->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pt->peers[mid].rank == rank)
            return &pt->peers[mid];
        if (pt->peers[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int hvd_rdv_note_encode(uint8_t type, int32_t rank, const char *msg,
                        uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_i32(&w, rank);
    hvd_wbuf_str(&w, msg);
    int err = hvd_wbuf_finish(&w, type, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_rdv_note_decode(const uint8_t *p, size_t len, int32_t *rank, char **msg)
{
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, p, len);
    *rank = hvd_rbuf_i32(&r);
    *msg = hvd_rbuf_strdup(&r);
    int err = hvd_rbuf_done(&r);
    if (err) {
        free(*msg);
        *msg = NULL;
    }
    return err;
}

int hvd_rdv_assign_encode(const struct hvd_rdv_assign *a, const uint8_t *secret,
                          size_t secretlen,
                          const uint8_t rank_nonce[HVD_NONCE_LEN],
                          uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, a->rank);
    hvd_wbuf_u32(&w, a->size);
    hvd_wbuf_u32(&w, a->local_rank);
    hvd_wbuf_u32(&w, a->local_size);
    hvd_wbuf_u32(&w, a->cross_rank);
    hvd_wbuf_u32(&w, a->cross_size);
    int err = seal(&w, HVD_RDV_ASSIGN, "hvd-assign", secret, secretlen,
                   rank_nonce, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_rdv_assign_decode(struct hvd_rdv_assign *a, const uint8_t *p,
                          size_t len, const uint8_t *secret, size_t secretlen,
                          const uint8_t rank_nonce[HVD_NONCE_LEN])
{
    struct hvd_rbuf r;
    size_t body;
    int err =
        unseal(p, len, "hvd-assign", secret, secretlen, rank_nonce, &body);
    if (err)
        return err;
    hvd_rbuf_init(&r, p, body);
    a->rank = hvd_rbuf_u32(&r);
    a->size = hvd_rbuf_u32(&r);
    a->local_rank = hvd_rbuf_u32(&r);
    a->local_size = hvd_rbuf_u32(&r);
    a->cross_rank = hvd_rbuf_u32(&r);
    a->cross_size = hvd_rbuf_u32(&r);
    if ((err = hvd_rbuf_done(&r)) != 0)
        return err;
    if (a->size == 0 || a->rank >= a->size || a->local_size == 0 ||
        a->local_size > a->size || a->local_rank >= a->local_size ||
        a->cross_size == 0 || a->cross_size > a->size ||
        a->cross_rank >= a->cross_size)
        return HVD_EPROTO;
    return 0;
}

int hvd_rdv_hosts_encode(uint64_t timestamp, uint8_t changes, uint8_t **out,
                         size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, (uint32_t)(timestamp >> 32));
    hvd_wbuf_u32(&w, (uint32_t)timestamp);
    hvd_wbuf_u8(&w, changes);
    int err = hvd_wbuf_finish(&w, HVD_RDV_HOSTS, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_rdv_hosts_decode(const uint8_t *p, size_t len, uint64_t *timestamp,
                         uint8_t *changes)
{
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, p, len);
    uint64_t hi = hvd_rbuf_u32(&r);
    *timestamp = hi << 32 | hvd_rbuf_u32(&r);
    *changes = hvd_rbuf_u8(&r);
    int err = hvd_rbuf_done(&r);
    if (err == 0 && (*changes < 1 || *changes > 3))
        err = HVD_EPROTO;
    return err;
}
