/* Remote-exec agents (kubexec.sh, blaunch, rsh, ssh): a command that runs
 * hvd-agent on a host and hands back its output but perhaps not its input,
 * as Kubernetes' `kubectl exec` without -i does. The agent's
 * stdout comes back over the command's pipe, as with srun; frames to the
 * agent travel over a TCP connection that it makes back to horovodrun. A
 * challenge that horovodrun sends on that connection must come back on the
 * agent's stdout, so only the process that the command started can take
 * the host's frames. The agent's ranks die when the connection closes. */
#ifndef HR_RSH_H
#define HR_RSH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct hr_agent;
struct hr_rsh;
struct hr_rsh_server;

/* Listens for agents on every address of this host. NULL, with why in err,
 * when it cannot. */
struct hr_rsh_server *hr_rsh_server_new(uv_loop_t *loop, char *err,
                                        size_t errlen);
/* Closes the listener and the connections not bound to a host. */
void hr_rsh_server_close(struct hr_rsh_server *s);
/* Frees it once the loop ran the closes. NULL is fine. */
void hr_rsh_server_free(struct hr_rsh_server *s);

/*
 * State for the agent of a host reached through cmd (words split at
 * spaces; the first a program). Fills a->argv with `cmd... HOST AGENT
 * --connect PORT ADDR...`, the addresses of this host that the agent tries
 * in turn. NULL, with why in a->failure, when out of memory or when agent
 * has characters that a remote shell would split.
 */
struct hr_rsh *hr_rsh_new(struct hr_agent *a, struct hr_rsh_server *s,
                          const char *cmd, const char *agent);
void hr_rsh_free(struct hr_rsh *r);

/*
 * Reads what the agent wrote before its frames. Returns how many bytes of
 * buf to skip (all of them until the greeting line has passed), or -1 once
 * it failed the host, with why in a->failure.
 */
ssize_t hr_rsh_preamble(struct hr_agent *a, const char *buf, size_t n);
/* 1 once the agent's connection is bound to the host. */
int hr_rsh_bound(const struct hr_rsh *r);
/* 1 when the agent proved the job's token and its frames come on the
 * connection (the command hands back no output). NULL is fine. */
int hr_rsh_duplex(const struct hr_rsh *r);
/* 1 while such a connection is not at its end. NULL is fine. */
int hr_rsh_reading(const struct hr_rsh *r);
/* Stops (1) or resumes (0) reading such a connection. NULL is fine. */
void hr_rsh_pause(struct hr_rsh *r, int pause);
/* Queues a frame to the agent (ownership passes), written once bound. */
void hr_rsh_send(struct hr_agent *a, uint8_t *frame, size_t len);
/* Closes the connection: the agent there stops its ranks. */
void hr_rsh_hangup(struct hr_rsh *r);
/* This host's address (local 1) or the agent's (0) on the agent's
 * connection, as text. 0, or -1 if it is not bound. */
int hr_rsh_addr(const struct hr_rsh *r, int local, char *out, size_t len);

#endif
