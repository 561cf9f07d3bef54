/* The tree launch's messages: horovodrun asks an agent to start the
 * agents of its subtree over SSH or through srun (SPAWN), and every frame
 * between horovodrun and such an agent travels wrapped, one wrapping a level:
 * TO (down, one whole frame), FROM (up, the agent's bytes as they came),
 * GONE (up: the agent ended, and why), DROP (down: end its session). An
 * id is horovodrun's number for the agent; the relaying agent only looks
 * it up among its own children. */
#ifndef HVD_RELAYPROTO_H
#define HVD_RELAYPROTO_H

#include <stddef.h>
#include <stdint.h>

/* SPAWN: how to reach the host, as horovodrun's own link would. */
struct hvd_spawn {
    uint32_t id;
    char *host;
    uint32_t port;      /* 0: 22 */
    char *identity;     /* "" for none */
    char *agent;        /* hvd-agent there; "": the relaying agent's path */
    uint8_t accept_new; /* add unknown host keys to known_hosts */
    uint32_t retry_ms;  /* keep trying a host not up yet this long */
    char *srun;         /* "": over SSH; else srun's path, a job step */
    char *rsh;          /* else, if not "": the --rsh-agent command */
};

int hvd_spawn_encode(const struct hvd_spawn *s, uint8_t **out, size_t *outlen);
/* HVD_EPROTO or HVD_ETRUNC for a damaged payload, an empty host, or
 * both srun and rsh. */
int hvd_spawn_decode(struct hvd_spawn *s, const uint8_t *p, size_t len);
void hvd_spawn_close(struct hvd_spawn *s);

/* TO, FROM and DROP: u32 id, then bytes (none for DROP). One frame,
 * header included (free() it). */
int hvd_relay_wrap(uint8_t type, uint32_t id, const void *p, size_t n,
                   uint8_t **out, size_t *outlen);
/* The id and the bytes after it (pointing into p). */
int hvd_relay_unwrap(const uint8_t *p, size_t len, uint32_t *id,
                     const uint8_t **rest, size_t *n);

/* GONE: the agent's exit status (or -1), the signal that ended it (or
 * 0), and why it failed ("" when it did not say). */
struct hvd_gone {
    uint32_t id;
    int32_t status, signal;
    char *why;
};

int hvd_gone_encode(const struct hvd_gone *g, uint8_t **out, size_t *outlen);
int hvd_gone_decode(struct hvd_gone *g, const uint8_t *p, size_t len);
void hvd_gone_close(struct hvd_gone *g);

#endif
