/* Fuzz target: rendezvous message decoders, behind and before the MAC. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/auth.h"
#include "common/frame.h"
#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "common/secret.h"

/*
 * Input layout: byte 0 picks the message (low three bits: 0 REGISTER,
 * 1 PEERS, 4 ASSIGN, 5 HOSTS, any other a note) and, with its high bit, whether
 * the harness seals the body: it appends the MAC that the job secret gives over
 * the rest of the input, so the parser behind the MAC check sees every body.
 * Without the bit the rest of the input is the whole payload, MAC included.
 */
#define SEAL 0x80

static const uint8_t secret[HVD_SECRET_LEN] = FUZZ_SECRET;
static const uint8_t nonce[HVD_NONCE_LEN] = FUZZ_NONCE;
static const uint8_t other_nonce[HVD_NONCE_LEN] = "another-nonce";

/* Returns a copy of body followed by MAC(secret, label, nonce, body). */
static uint8_t *seal(const char *label, const uint8_t *body, size_t len)
{
    uint8_t *p = malloc(len + HVD_MAC_LEN);
    struct hvd_mac_part parts[] = {
        {label, strlen(label)},
        {nonce, HVD_NONCE_LEN},
        {body, len},
    };

    FUZZ_CHECK(p != NULL);
    if (len > 0)
        memcpy(p, body, len);
    FUZZ_CHECK(hvd_hmac(secret, sizeof(secret), parts, 3, p + len) == 0);
    return p;
}

/* An encoded frame must hold exactly the payload that was decoded. */
static void check_same(const uint8_t *out, size_t outlen, uint8_t type,
                       const uint8_t *p, size_t len)
{
    FUZZ_CHECK(outlen == HVD_FRAME_HDR + len);
    FUZZ_CHECK(out[3] == type);
    FUZZ_CHECK(memcmp(out + HVD_FRAME_HDR, p, len) == 0);
}

static void fuzz_register(const uint8_t *p, size_t len, int sealed)
{
    struct hvd_rdv_register m = {0};
    uint8_t *out = NULL;
    size_t outlen = 0;

    int err =
        hvd_rdv_register_decode(&m, p, len, secret, sizeof(secret), nonce);
    FUZZ_CHECK(err == 0 || err == HVD_EAUTH || err == HVD_EPROTO ||
               err == HVD_ETRUNC);
    /* A sealed body always passes the MAC check. */
    FUZZ_CHECK(!sealed || err != HVD_EAUTH);
    if (err == 0) {
        FUZZ_CHECK(m.host != NULL && m.addr != NULL);
        FUZZ_CHECK(strlen(m.host) + strlen(m.addr) + 52 + HVD_MAC_LEN == len);
        FUZZ_CHECK(m.port >= 1 && m.port <= 65535);
        FUZZ_CHECK(hvd_rdv_register_encode(&m, secret, sizeof(secret), nonce,
                                           &out, &outlen) == 0);
        check_same(out, outlen, HVD_RDV_REGISTER, p, len);
        free(out);
    }
    hvd_rdv_register_close(&m);
    hvd_rdv_register_close(&m);
    /* The MAC binds the server's nonce: a replay to another fails. */
    if (err == 0) {
        err = hvd_rdv_register_decode(&m, p, len, secret, sizeof(secret),
                                      other_nonce);
        FUZZ_CHECK(err == HVD_EAUTH);
        hvd_rdv_register_close(&m);
    }
}

static void fuzz_peers(const uint8_t *p, size_t len, int sealed)
{
    struct hvd_rdv_peers pt = {0};
    uint8_t *out = NULL;
    size_t outlen = 0;

    int err = hvd_rdv_peers_decode(&pt, p, len, secret, sizeof(secret), nonce);
    FUZZ_CHECK(err == 0 || err == HVD_EAUTH || err == HVD_EPROTO ||
               err == HVD_ETRUNC);
    FUZZ_CHECK(!sealed || err != HVD_EAUTH);
    if (err == 0) {
        size_t body = len - HVD_MAC_LEN;
        int nhosts = 0;
        FUZZ_CHECK(pt.nruns >= 1 && pt.nruns <= body / 12);
        FUZZ_CHECK(pt.n >= 1 && pt.n <= body / 16);
        FUZZ_CHECK(hvd_rdv_runs_check(pt.size, pt.runs, pt.nruns, &nhosts) ==
                       0 &&
                   nhosts >= 1 && (uint32_t)nhosts <= pt.size);
        for (uint32_t i = 0; i < pt.n; i++) {
            FUZZ_CHECK(pt.peers[i].host != NULL && pt.peers[i].addr != NULL);
            FUZZ_CHECK(strlen(pt.peers[i].host) <= body &&
                       strlen(pt.peers[i].addr) <= body);
            FUZZ_CHECK(pt.peers[i].rank < pt.size &&
                       (i == 0 || pt.peers[i].rank > pt.peers[i - 1].rank));
            FUZZ_CHECK(hvd_rdv_peers_find(&pt, pt.peers[i].rank) ==
                       &pt.peers[i]);
        }
        FUZZ_CHECK(hvd_rdv_peers_encode(&pt, secret, sizeof(secret), nonce,
                                        &out, &outlen) == 0);
        check_same(out, outlen, HVD_RDV_PEERS, p, len);
        free(out);
    }
    hvd_rdv_peers_close(&pt);
    hvd_rdv_peers_close(&pt);
}

static void fuzz_assign(const uint8_t *p, size_t len, int sealed)
{
    struct hvd_rdv_assign a;
    uint8_t *out = NULL;
    size_t outlen = 0;

    int err = hvd_rdv_assign_decode(&a, p, len, secret, sizeof(secret), nonce);
    FUZZ_CHECK(err == 0 || err == HVD_EAUTH || err == HVD_EPROTO ||
               err == HVD_ETRUNC);
    FUZZ_CHECK(!sealed || err != HVD_EAUTH);
    if (err == 0) {
        FUZZ_CHECK(a.rank < a.size && a.local_rank < a.local_size &&
                   a.local_size <= a.size && a.cross_rank < a.cross_size &&
                   a.cross_size <= a.size);
        FUZZ_CHECK(hvd_rdv_assign_encode(&a, secret, sizeof(secret), nonce,
                                         &out, &outlen) == 0);
        check_same(out, outlen, HVD_RDV_ASSIGN, p, len);
        free(out);
    }
}

/* HOSTS: u64 timestamp, u8 changes; no MAC. */
static void fuzz_hosts(const uint8_t *p, size_t len)
{
    uint64_t ts = 0;
    uint8_t changes = 0;
    uint8_t *out = NULL;
    size_t outlen = 0;

    int err = hvd_rdv_hosts_decode(p, len, &ts, &changes);
    FUZZ_CHECK(err == 0 || err == HVD_EPROTO || err == HVD_ETRUNC);
    if (err == 0) {
        FUZZ_CHECK(changes >= 1 && changes <= 3 && len == 9);
        FUZZ_CHECK(hvd_rdv_hosts_encode(ts, changes, &out, &outlen) == 0);
        check_same(out, outlen, HVD_RDV_HOSTS, p, len);
        free(out);
    }
}

/* FAIL, ABORT and REPORT: i32, str; no MAC. */
static void fuzz_note(const uint8_t *p, size_t len)
{
    int32_t rank = 0;
    char *msg = NULL;
    uint8_t *out = NULL;
    size_t outlen = 0;

    int err = hvd_rdv_note_decode(p, len, &rank, &msg);
    FUZZ_CHECK(err == 0 || err == HVD_EPROTO || err == HVD_ETRUNC);
    FUZZ_CHECK((err == 0) == (msg != NULL));
    if (err == 0) {
        FUZZ_CHECK(strlen(msg) + 8 == len);
        FUZZ_CHECK(
            hvd_rdv_note_encode(HVD_RDV_REPORT, rank, msg, &out, &outlen) == 0);
        check_same(out, outlen, HVD_RDV_REPORT, p, len);
        free(out);
    }
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int sealed = (data[0] & SEAL) != 0;
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    uint8_t *buf = NULL;

    int kind = data[0] & 7;
    static const char *const labels[] = {"hvd-register", "hvd-peers", NULL,
                                         NULL, "hvd-assign"};

    if (sealed && kind < 5 && labels[kind]) {
        buf = seal(labels[kind], p, len);
        p = buf;
        len += HVD_MAC_LEN;
    }
    switch (kind) {
    case 0:
        fuzz_register(p, len, sealed);
        break;
    case 1:
        fuzz_peers(p, len, sealed);
        break;
    case 4:
        fuzz_assign(p, len, sealed);
        break;
    case 5:
        fuzz_hosts(p, len);
        break;
    default:
        fuzz_note(p, len);
        break;
    }
    free(buf);
    return 0;
}
