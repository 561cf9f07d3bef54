/* hvd-agent as a node of the tree launch: it starts the agents horovodrun
 * asks it to over SSH (libssh2, as horovodrun itself would), as job steps
 * through srun or through the --rsh-agent command, carries frames down to
 * them and their bytes up, and reports their end. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/agent/agent.h"
#include "launcher/lib/log.h"
#include "launcher/lib/relayproto.h"
#include "launcher/link/link.h"
#include "launcher/link/rsh.h"
#include "launcher/link/srun.h"
#include "launcher/link/ssh.h"

/* One agent this one started: the link sees only a, its first member. */
struct agent_child {
    struct hr_agent a;
    struct agent *ag;
    struct hvd_spawn spawn; /* owns the strings cfg points to */
    struct hr_ssh_cfg cfg;
    int dropped; /* horovodrun ended it */
    struct agent_child *next;
};

static struct agent_child *child_of(struct hr_agent *a)
{
    return (struct agent_child *)a;
}

/* Its bytes go up as they came, wrapped; horovodrun reads the frames. */
static void child_bytes(struct hr_agent *a, const char *buf, size_t n)
{
    struct agent_child *c = child_of(a);
    uint8_t *f;
    size_t len;
    a->hello = 1; /* its stderr is worth showing from now on */
    if (hvd_relay_wrap(HVD_MSG_FROM, c->spawn.id, buf, n, &f, &len) == 0)
        agent_send(c->ag, f, len);
}

static void child_ended(struct hr_agent *a)
{
    struct agent_child *c = child_of(a);
    struct agent *ag = c->ag;
    struct hvd_gone g = {c->spawn.id, (int32_t)a->status, a->term_signal,
                         a->failure};
    uint8_t *f;
    size_t len;
    if (a->ended)
        return;
    a->ended = 1;
    a->running = a->reading = 0;
    a->link->release(a);
    /* Ended by horovodrun's start timeout: what it was doing is why, as
     * horovodrun says it of the hosts it reaches itself. */
    if (c->dropped && !a->hello && a->failure[0] == '\0')
        snprintf(a->failure, sizeof(a->failure),
                 "timed out after %g s while %s (--start-timeout)",
                 c->cfg.retry_s, a->stage ? a->stage : "starting hvd-agent");
    if (hvd_gone_encode(&g, &f, &len) == 0)
        agent_send(ag, f, len);
    if (--ag->children_live == 0 && ag->finishing)
        agent_finish(ag);
}

static const struct hr_link_cb child_cb = {
    .bytes = child_bytes,
    .ended = child_ended,
};

static struct agent_child *find(struct agent *ag, uint32_t id)
{
    struct agent_child *c = ag->children;
    while (c && c->spawn.id != id)
        c = c->next;
    return c;
}

static int start_ssh(struct agent_child *c)
{
    c->a.link = &hr_link_ssh;
    if ((c->a.ssh = hr_ssh_new(&c->a, &c->cfg)) != NULL)
        return 0;
    snprintf(c->a.failure, sizeof(c->a.failure), "out of memory");
    return -1;
}

/* A job step of the allocation this agent runs in, or the --rsh-agent
 * command, as horovodrun runs them: on the pipes link, running the same
 * hvd-agent. */
static int start_command(struct agent_child *c)
{
    char here[PATH_MAX], err[256] = "";
    const char *agent = c->spawn.agent;
    c->a.link = &hr_link_pipes;
    if (agent[0] == '\0' &&
        hr_link_sibling_path("hvd-agent", here, sizeof(here)) == 0)
        agent = here;
    if (agent[0] == '\0') {
        snprintf(c->a.failure, sizeof(c->a.failure),
                 "cannot find the path of hvd-agent");
        return -1;
    }
    if (c->spawn.srun[0]) {
        if (hr_srun_argv(&c->a.argv, c->spawn.srun, c->spawn.host, agent) == 0)
            return 0;
        snprintf(c->a.failure, sizeof(c->a.failure), "out of memory");
        return -1;
    }
    /* Its agent connects back here: one listener for all of them. */
    struct agent *ag = c->ag;
    if (ag->rsh == NULL &&
        (ag->rsh = hr_rsh_server_new(ag->loop, err, sizeof(err))) == NULL)
        snprintf(err, sizeof(err), "out of memory");
    if (err[0]) {
        snprintf(c->a.failure, sizeof(c->a.failure), "%s", err);
        return -1;
    }
    /* hr_rsh_new says why in a->failure. */
    c->a.rsh = hr_rsh_new(&c->a, ag->rsh, c->spawn.rsh, agent);
    return c->a.rsh ? 0 : -1;
}

static int spawn(struct agent *ag, const uint8_t *p, size_t len)
{
    struct agent_child *c = calloc(1, sizeof(*c));
    int err = c ? hvd_spawn_decode(&c->spawn, p, len) : HVD_ENOMEM;
    if (err == 0 && find(ag, c->spawn.id))
        err = HVD_EPROTO;
    if (err) {
        if (c)
            hvd_spawn_close(&c->spawn);
        free(c);
        return err;
    }
    c->ag = ag;
    c->cfg = (struct hr_ssh_cfg){
        .port = (int)c->spawn.port,
        .identity_file = c->spawn.identity[0] ? c->spawn.identity : NULL,
        .agent_path = c->spawn.agent[0] ? c->spawn.agent : NULL,
        .accept_new = c->spawn.accept_new,
        .retry_s = c->spawn.retry_ms / 1000.0,
    };
    c->a.loop = ag->loop;
    c->a.cb = &child_cb;
    c->a.name = c->spawn.host;
    hvd_strvec_init(&c->a.argv);
    c->next = ag->children;
    ag->children = c;
    ag->children_live++;
    if (c->spawn.srun[0] || c->spawn.rsh[0] ? start_command(c) : start_ssh(c)) {
        child_ended(&c->a);
        return 0;
    }
    if (c->a.link->start(&c->a) != 0)
        child_ended(&c->a);
    else if (ag->paused)
        c->a.link->pause(&c->a, 1);
    return 0;
}

int agent_relay_frame(struct agent *ag, const struct hvd_frame *f)
{
    const uint8_t *p;
    size_t n;
    uint32_t id;

    /* A finishing agent still relays for its children, and in an elastic
     * job may be given one more: it ends after the last. */
    if (f->type == HVD_MSG_SPAWN)
        return spawn(ag, f->payload, f->len);
    int err = hvd_relay_unwrap(f->payload, f->len, &id, &p, &n);
    struct agent_child *c = err ? NULL : find(ag, id);
    if (c == NULL)
        return err ? err : HVD_EPROTO;
    if (c->a.ended)
        return 0; /* its GONE is on its way to horovodrun */
    if (f->type == HVD_MSG_DROP) {
        c->dropped = 1;
        c->a.link->kill(&c->a, SIGTERM);
        return 0;
    }
    uint8_t *copy = malloc(n ? n : 1);
    if (copy == NULL)
        return HVD_ENOMEM;
    memcpy(copy, p, n);
    c->a.link->send(&c->a, copy, n);
    return 0;
}

void agent_relay_pause(struct agent *ag, int pause)
{
    for (struct agent_child *c = ag->children; c; c = c->next)
        if (!c->a.ended)
            c->a.link->pause(&c->a, pause);
}

void agent_relay_drop(struct agent *ag)
{
    for (struct agent_child *c = ag->children; c; c = c->next)
        if (!c->a.ended)
            c->a.link->kill(&c->a, SIGTERM);
}

void agent_relay_close(struct agent *ag)
{
    for (struct agent_child *c = ag->children; c; c = c->next)
        hr_rsh_hangup(c->a.rsh);
    hr_rsh_server_close(ag->rsh);
}

void agent_relay_free(struct agent *ag)
{
    while (ag->children) {
        struct agent_child *c = ag->children;
        ag->children = c->next;
        hr_ssh_free(c->a.ssh);
        hr_rsh_free(c->a.rsh);
        hvd_strvec_close(&c->a.argv);
        hvd_spawn_close(&c->spawn);
        free(c);
    }
    hr_rsh_server_free(ag->rsh);
    ag->rsh = NULL;
}
