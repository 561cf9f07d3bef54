/* Rendezvous messages between libhvd and horovodrun's server. */
#ifndef HVD_RDVPROTO_H
#define HVD_RDVPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/rdvlayout.h"

/* 2: PEERS carries the layout and only the peers a rank needs. */
#define HVD_RDV_VERSION 2u

/*
 * server -> rank  CHALLENGE  u32 version, nonce (raw)
 * rank -> server  REGISTER   body, MAC(secret, "register", server nonce,
 *                            body); the MAC is the last 32 bytes
 * server -> rank  PEERS      body, MAC(secret, "peers", rank nonce, body):
 *                            u32 size, the layout's runs (which host
 *                            each rank is on), and the addresses of the
 *                            ranks this one needs (hvd_rdv_layout_wanted)
 * server -> rank  FAIL       i32 code, str message (hvd_init fails with
 *                            code: HVD_ETIMEDOUT, HVD_EAUTH, HVD_EPROTO)
 * server -> rank  ABORT      i32 rank, str message (a rank failed)
 * rank -> server  REPORT     i32 rank, str message (I saw it fail)
 * rank -> server  BYE        (clean shutdown; nothing to report)
 * server -> rank  ASSIGN     (elastic jobs, just before PEERS) the rank's
 *                            place in this generation, MAC(secret,
 *                            "assign", rank nonce, body)
 * server -> rank  HOSTS      (elastic jobs) u64 timestamp, u8 changes:
 *                            horovodrun's host discovery found hosts added
 *                            (2), removed (1) or both (3)
 *
 * In an elastic job a process keeps one id for its whole life, and its
 * rank may change at each reset: it registers with rank = its id and
 * size = 0, and learns its rank, size, local and cross values from ASSIGN.
 */
enum hvd_rdv_msg {
    HVD_RDV_CHALLENGE = 1,
    HVD_RDV_REGISTER = 2,
    HVD_RDV_PEERS = 3,
    HVD_RDV_FAIL = 4,
    HVD_RDV_ABORT = 5,
    HVD_RDV_REPORT = 6,
    HVD_RDV_BYE = 7,
    HVD_RDV_ASSIGN = 8,
    HVD_RDV_HOSTS = 9
};

/* Rendezvous frames are small: a few KiB unless the layout has a run
 * for every rank (hosts whose ranks are not together). */
#define HVD_RDV_FRAME_MAX (16u * 1024 * 1024)

struct hvd_rdv_register {
    uint32_t rank;
    uint32_t size;
    uint8_t nonce[HVD_NONCE_LEN]; /* the rank's challenge to the server */
    char *host;                   /* HOROVOD_HOSTNAME, for messages */
    char *addr;                   /* data-plane address */
    uint32_t port;
};

struct hvd_rdv_peer {
    uint32_t rank;
    char *host;
    char *addr;
    uint32_t port;
};

/* What PEERS tells one rank: the job's size and layout, and the peers it
 * needs, by ascending rank. */
struct hvd_rdv_peers {
    uint32_t size;
    uint32_t nruns;
    struct hvd_rdv_run *runs;
    uint32_t n;
    struct hvd_rdv_peer *peers;
};

int hvd_rdv_register_encode(const struct hvd_rdv_register *m,
                            const uint8_t *secret, size_t secretlen,
                            const uint8_t server_nonce[HVD_NONCE_LEN],
                            uint8_t **out, size_t *outlen);
/* Verifies the MAC first (HVD_EAUTH), then decodes into a zeroed m. */
int hvd_rdv_register_decode(struct hvd_rdv_register *m, const uint8_t *p,
                            size_t len, const uint8_t *secret, size_t secretlen,
                            const uint8_t server_nonce[HVD_NONCE_LEN]);
void hvd_rdv_register_close(struct hvd_rdv_register *m);

int hvd_rdv_peers_encode(const struct hvd_rdv_peers *pt, const uint8_t *secret,
                         size_t secretlen,
                         const uint8_t rank_nonce[HVD_NONCE_LEN], uint8_t **out,
                         size_t *outlen);
/* Verifies the MAC (HVD_EAUTH), then decodes; HVD_EPROTO unless the runs
 * describe size ranks and the peers' ranks ascend below size. */
int hvd_rdv_peers_decode(struct hvd_rdv_peers *pt, const uint8_t *p, size_t len,
                         const uint8_t *secret, size_t secretlen,
                         const uint8_t rank_nonce[HVD_NONCE_LEN]);
void hvd_rdv_peers_close(struct hvd_rdv_peers *pt);
/* Rank's entry, or NULL when the table has none. */
const struct hvd_rdv_peer *hvd_rdv_peers_find(const struct hvd_rdv_peers *pt,
                                              uint32_t rank);

/* A process's place in one generation of an elastic job. */
struct hvd_rdv_assign {
    uint32_t rank, size;
    uint32_t local_rank, local_size;
    uint32_t cross_rank, cross_size;
};

int hvd_rdv_assign_encode(const struct hvd_rdv_assign *a, const uint8_t *secret,
                          size_t secretlen,
                          const uint8_t rank_nonce[HVD_NONCE_LEN],
                          uint8_t **out, size_t *outlen);
/* Verifies the MAC (HVD_EAUTH), then decodes; HVD_EPROTO when a value is
 * out of its range (rank < size, local_rank < local_size <= size, ...). */
int hvd_rdv_assign_decode(struct hvd_rdv_assign *a, const uint8_t *p,
                          size_t len, const uint8_t *secret, size_t secretlen,
                          const uint8_t rank_nonce[HVD_NONCE_LEN]);

int hvd_rdv_hosts_encode(uint64_t timestamp, uint8_t changes, uint8_t **out,
                         size_t *outlen);
/* HVD_EPROTO when changes is not 1, 2 or 3. */
int hvd_rdv_hosts_decode(const uint8_t *p, size_t len, uint64_t *timestamp,
                         uint8_t *changes);

/* Frames of the form "i32 rank (or code), str message". */
int hvd_rdv_note_encode(uint8_t type, int32_t rank, const char *msg,
                        uint8_t **out, size_t *outlen);
/* *msg is a new string; free() it. */
int hvd_rdv_note_decode(const uint8_t *p, size_t len, int32_t *rank,
                        char **msg);

#endif
