/* The tree launch's link: the agent of a host that another agent (its
 * parent) started. Frames to it travel wrapped in TO through the parent's
 * own link; its bytes come back wrapped in FROM, and its end in GONE
 * (relayproto.h), which the owner hands to hr_relay_bytes and
 * hr_relay_gone. */
#ifndef HR_RELAY_H
#define HR_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/link/ssh.h"

struct hr_agent;
struct hr_relay;

/* Reached through hr_relay_new's parent. */
extern const struct hr_link_ops hr_link_relay;

/* State for agent a, started by parent's agent over SSH with cfg, as a
 * job step through srun (its path), or through the --rsh-agent command
 * rsh, running cfg's agent path (srun and rsh NULL: SSH; the strings
 * must outlive it); known to the parent as id. NULL when out of
 * memory. */
struct hr_relay *hr_relay_new(struct hr_agent *a, struct hr_agent *parent,
                              uint32_t id, const struct hr_ssh_cfg *cfg,
                              const char *srun, const char *rsh);
void hr_relay_free(struct hr_relay *r);
/* The agent whose agent starts a's (NULL: horovodrun's own link). */
struct hr_agent *hr_relay_parent(const struct hr_agent *a);
/* 1 once a's SPAWN went to its parent: from then on the parent reports
 * a's end, and why it failed, in GONE. */
int hr_relay_spawned(const struct hr_agent *a);
/* The parent is ready (HELLO): sends the SPAWN of a when start asked. */
void hr_relay_parent_ready(struct hr_agent *a);
/* Bytes of a's stream, unwrapped from its parent's FROM. */
void hr_relay_bytes(struct hr_agent *a, const uint8_t *p, size_t n);
/* a's agent ended (its parent's GONE, or the parent itself ended: why
 * then says so). Calls a->cb->ended. */
void hr_relay_gone(struct hr_agent *a, int status, int signal, const char *why);

#endif
