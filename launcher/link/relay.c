/* The agent of a host that another agent started (the tree launch). */
#include "launcher/link/relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"
#include "launcher/link/link.h"

struct hr_relay {
    struct hr_agent *parent;
    uint32_t id;
    struct hr_ssh_cfg cfg;
    const char *srun, *rsh;
    int asked;   /* start was called */
    int spawned; /* its SPAWN went to the parent */
    char stage[320];
};

struct hr_relay *hr_relay_new(struct hr_agent *a, struct hr_agent *parent,
                              uint32_t id, const struct hr_ssh_cfg *cfg,
                              const char *srun, const char *rsh)
{
    struct hr_relay *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->parent = parent;
    r->id = id;
    r->cfg = *cfg;
    r->srun = srun;
    r->rsh = rsh;
    a->relay = r;
    return r;
}

void hr_relay_free(struct hr_relay *r)
{
    free(r);
}

struct hr_agent *hr_relay_parent(const struct hr_agent *a)
{
    return a->relay ? a->relay->parent : NULL;
}

int hr_relay_spawned(const struct hr_agent *a)
{
    return a->relay && a->relay->spawned;
}

/* Sends through the parent's link, wrapped for a (ownership passes). */
static void to_parent(struct hr_agent *a, uint8_t type, const uint8_t *p,
                      size_t n)
{
    struct hr_agent *parent = a->relay->parent;
    uint8_t *f;
    size_t len;
    if (hvd_relay_wrap(type, a->relay->id, p, n, &f, &len) == 0)
        parent->link->send(parent, f, len);
}

void hr_relay_parent_ready(struct hr_agent *a)
{
    struct hr_relay *r = a->relay;
    struct hvd_spawn s = {
        .id = r->id,
        .host = (char *)a->name,
        .port = (uint32_t)r->cfg.port,
        .identity = (char *)r->cfg.identity_file,
        .agent = (char *)r->cfg.agent_path,
        .accept_new = (uint8_t)r->cfg.accept_new,
        .retry_ms = (uint32_t)(r->cfg.retry_s * 1000),
        .srun = (char *)r->srun,
        .rsh = (char *)r->rsh,
    };
    uint8_t *f;
    size_t len;
    if (!r->asked || r->spawned || !a->running ||
        hvd_spawn_encode(&s, &f, &len) != 0)
        return;
    r->spawned = 1;
    r->parent->link->send(r->parent, f, len);
    snprintf(r->stage, sizeof(r->stage), "being started by host %s",
             r->parent->name);
}

static int relay_start(struct hr_agent *a)
{
    struct hr_relay *r = a->relay;
    r->asked = 1;
    a->running = a->reading = 1;
    snprintf(r->stage, sizeof(r->stage), "waiting for host %s, which starts it",
             r->parent->name);
    a->stage = r->stage;
    if (r->parent->hello)
        hr_relay_parent_ready(a);
    return 0;
}

static void relay_send(struct hr_agent *a, uint8_t *frame, size_t len)
{
    if (a->running && a->relay->spawned)
        to_parent(a, HVD_MSG_TO, frame, len);
    free(frame);
}

/* The parent's own pause holds its whole subtree: the parent stops
 * reading what it relays once its queue to us is full. */
static void relay_pause(struct hr_agent *a, int pause)
{
    (void)a, (void)pause;
}

/* Its session ends; before SPAWN there is none, and the parent's end
 * (the only way a host is stopped before it spawned) ends it. */
static void relay_kill(struct hr_agent *a, int sig)
{
    (void)sig;
    if (!a->relay->spawned) {
        a->relay->asked = 0;
        return;
    }
    if (a->running && a->relay->parent->running)
        to_parent(a, HVD_MSG_DROP, NULL, 0);
}

static void relay_release(struct hr_agent *a)
{
    (void)a;
}

const struct hr_link_ops hr_link_relay = {
    .start = relay_start,
    .send = relay_send,
    .pause = relay_pause,
    .kill = relay_kill,
    .release = relay_release,
};

void hr_relay_bytes(struct hr_agent *a, const uint8_t *p, size_t n)
{
    if (a->running && n > 0)
        a->cb->bytes(a, (const char *)p, n);
}

void hr_relay_gone(struct hr_agent *a, int status, int signal, const char *why)
{
    if (!a->running)
        return;
    a->status = status;
    a->term_signal = signal;
    if (why && why[0] && a->failure[0] == '\0')
        snprintf(a->failure, sizeof(a->failure), "%s", why);
    a->running = a->reading = 0;
    a->cb->ended(a);
}
