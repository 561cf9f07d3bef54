/* Messages between horovodrun and hvd-agent, carried in frames. */
#ifndef HVD_PROTO_H
#define HVD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "launcher/lib/strvec.h"

/* 2: the tree launch's SPAWN, TO, FROM, GONE and DROP. 3: JOB's
 * carry_rdv and the carried rendezvous (RDV_OPEN, RDV_DATA, RDV_CLOSE).
 * 4: STDIN_TAKEN. */
#define HVD_PROTO_VERSION 4u

/* hvd-agent --connect: the challenge horovodrun sends on the connection
 * (hex, then '\n'), and the line the agent prints on its stdout with that
 * challenge after it, before its first frame. */
#define HVD_CONNECT_CHALLENGE_HEX 64
#define HVD_CONNECT_GREETING "hvd-agent connected "
/* Or, where the command hands back no output (PBS's pbs_tmrsh), the agent
 * proves that it read the job's token file (--token-file: 64 hex digits)
 * with this line on the connection, then speaks both ways on it:
 * "hvd-agent proof HOST MAC\n", MAC in hex (hvd_connect_proof). */
#define HVD_CONNECT_PROOF "hvd-agent proof "
#define HVD_CONNECT_TOKEN_LEN 32

enum hvd_msg {
    HVD_MSG_HELLO = 1,  /* agent: u32 version, str host, i32 gpus, i32 port */
    HVD_MSG_JOB = 2,    /* launcher: a job spec, see below */
    HVD_MSG_STDIN = 3,  /* launcher: bytes for rank 0; empty means EOF */
    HVD_MSG_SIGNAL = 4, /* launcher: u32 signal number for every rank */
    HVD_MSG_STOP = 5,   /* launcher: u8 now (SIGKILL) or else TERM+grace */
    HVD_MSG_LINE = 6,   /* agent: u32 rank, u8 stream, u8 term, text */
    HVD_MSG_EXIT = 7,   /* agent: u32 rank, u8 kind, i32 code */
    HVD_MSG_NOTE = 8,   /* agent: u8 level, str text */
    HVD_MSG_PING = 9,   /* launcher: u32 ms; silence that long = lost */
    HVD_MSG_RANKS = 10, /* launcher: u32 n, n ranks as in JOB (elastic) */
    HVD_MSG_KILL = 11,  /* launcher: u32 rank, u8 now; TERM+grace or KILL */
    /* The tree launch (relayproto.h): an agent that starts others. */
    HVD_MSG_SPAWN = 12, /* launcher: start an agent over SSH */
    HVD_MSG_TO = 13,    /* launcher: u32 id, a frame for that agent */
    HVD_MSG_FROM = 14,  /* agent: u32 id, bytes from that agent */
    HVD_MSG_GONE = 15,  /* agent: u32 id, i32 status, i32 signal, str why */
    HVD_MSG_DROP = 16,  /* launcher: u32 id; end that agent's session */
    /* The rendezvous carried by the agents (JOB's carry_rdv): a rank's
     * connection to its agent is stream id there, and its bytes travel
     * as they came, both ways. Ids are never reused within a job. */
    HVD_MSG_RDV_OPEN = 17,  /* agent: u32 id; a connection came */
    HVD_MSG_RDV_DATA = 18,  /* both: u32 id, bytes */
    HVD_MSG_RDV_CLOSE = 19, /* both: u32 id; that side closed it */
    /* agent: a STDIN block went to rank 0 (or rank 0 was gone), one per
     * block. horovodrun keeps at most 16 blocks on their way, so stdin
     * that rank 0 does not read waits in horovodrun's own stdin. */
    HVD_MSG_STDIN_TAKEN = 20
};

/* Carried rendezvous streams open at once beyond one per rank: what
 * anyone else on an agent's host can make it and horovodrun hold. */
#define HVD_CARRY_EXTRA 64

enum hvd_stream { HVD_STREAM_STDOUT = 1, HVD_STREAM_STDERR = 2 };

enum hvd_exit_kind {
    HVD_EXIT_CODE = 0,   /* exited; code is the status */
    HVD_EXIT_SIGNAL = 1, /* killed; code is the signal */
    HVD_EXIT_SPAWN = 2,  /* could not be started; code is the errno */
    HVD_EXIT_NOCWD = 3   /* the working directory is missing; errno */
};

enum hvd_note_level {
    HVD_NOTE_INFO = 0,
    HVD_NOTE_WARN = 1,
    HVD_NOTE_ERROR = 2
};

struct hvd_jobrank {
    uint32_t rank;
    uint32_t local_rank;
    struct hvd_strvec env; /* contract variables, override the base env */
};

/* What one agent needs to run its ranks. */
struct hvd_jobspec {
    char *cwd;
    struct hvd_strvec argv;
    struct hvd_strvec env; /* base environment shared by all ranks */
    uint32_t kill_grace_ms;
    uint8_t gpu_pinning;
    uint8_t bind; /* enum hr_bind: how ranks are bound to CPUs */
    /* 1: the agent listens on loopback for its ranks' rendezvous and
     * carries it to horovodrun (RDV_OPEN, RDV_DATA, RDV_CLOSE). */
    uint8_t carry_rdv;
    uint32_t nranks;
    struct hvd_jobrank *ranks;
};

void hvd_jobspec_init(struct hvd_jobspec *js);
void hvd_jobspec_close(struct hvd_jobspec *js);
/* Adds an (empty-env) rank entry; returns it or NULL on allocation
 * failure. */
struct hvd_jobrank *hvd_jobspec_add_rank(struct hvd_jobspec *js, uint32_t rank,
                                         uint32_t local_rank);
/* Encodes as one HVD_MSG_JOB frame (header included, free() it). */
int hvd_jobspec_encode(const struct hvd_jobspec *js, uint8_t **out,
                       size_t *outlen);
/*
 * Decodes a JOB payload into an initialized spec. Rejects truncated or
 * trailing bytes, an empty argv, no ranks, duplicate ranks and counts that
 * the payload cannot hold, with HVD_EPROTO or HVD_ETRUNC.
 */
int hvd_jobspec_decode(struct hvd_jobspec *js, const uint8_t *p, size_t len);

/*
 * Elastic jobs: more ranks for a running job. The rank numbers are then
 * process ids that horovodrun never reuses. Encodes n ranks as one
 * HVD_MSG_RANKS frame (header included, free() it); each rank is laid out
 * as in JOB.
 */
int hvd_ranks_encode(const struct hvd_jobrank *ranks, uint32_t n, uint8_t **out,
                     size_t *outlen);
/*
 * Decodes a RANKS payload, appending its ranks to js. Rejects truncated or
 * trailing bytes, a count of 0 or one the payload cannot hold, and a rank
 * already in js or twice in the payload, with HVD_EPROTO or HVD_ETRUNC;
 * js is then as it was.
 */
int hvd_jobspec_decode_more(struct hvd_jobspec *js, const uint8_t *p,
                            size_t len);
/* Encodes one HVD_MSG_KILL frame: stop that rank, at once when now is 1. */
int hvd_kill_encode(uint32_t rank, uint8_t now, uint8_t **out, size_t *outlen);

/* What an agent says first: who it is and what it found on its host. */
struct hvd_hello {
    uint32_t version; /* 0 when the payload is too short to hold one */
    char *host;       /* the agent's host name (free()), or NULL */
    int32_t gpus;
    int32_t port; /* a free TCP port there, for MASTER_PORT */
};

/*
 * Decodes a HELLO payload. The version comes first so that it can be told
 * apart from damage: another version is HVD_ENOTSUP (the rest, whose
 * layout that version may have changed, is not read), a payload too short
 * is HVD_ETRUNC, trailing bytes or a host name with a NUL are HVD_EPROTO,
 * and HVD_ENOMEM is HVD_ENOMEM. h->version is set whenever the payload
 * holds one; h->host is set only on success. The values are not checked.
 */
int hvd_hello_decode(struct hvd_hello *h, const uint8_t *p, size_t len);
/* Frees h->host; NULL is a no-op. */
void hvd_hello_close(struct hvd_hello *h);

/* The MAC of an agent's proof: HMAC-SHA256(token, "hvd-connect" ||
 * challenge hex || host). 0 or HVD_ESYS. */
int hvd_connect_proof(const uint8_t token[HVD_CONNECT_TOKEN_LEN],
                      const char *challenge_hex, const char *host,
                      uint8_t mac[HVD_MAC_LEN]);

#endif
