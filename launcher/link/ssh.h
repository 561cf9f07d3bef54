/* The link to a remote host's agent: one libssh2 session driven by the
 * libuv loop (no thread or process per host). */
#ifndef HR_SSH_H
#define HR_SSH_H

#include <stddef.h>
#include <stdint.h>

struct hr_agent;
struct hr_ssh;

/* What the SSH link needs from the command line. */
struct hr_ssh_cfg {
    int port;                  /* 0: 22 */
    const char *identity_file; /* tried after ssh-agent, or NULL */
    const char *agent_path;    /* hvd-agent there; NULL: the path here */
    int accept_new;            /* add unknown host keys to known_hosts */
    /* Seconds to keep trying a host whose name does not resolve or whose
     * sshd does not answer yet (--start-timeout). */
    double retry_s;
};

/* State for the agent's host (its link is hr_link_ssh, in link.h); NULL
 * when out of memory. The strings of cfg must outlive it. */
struct hr_ssh *hr_ssh_new(struct hr_agent *a, const struct hr_ssh_cfg *cfg);
void hr_ssh_free(struct hr_ssh *s);
/* This machine's address (local 1) or the host's (0) on the connection,
 * as text. 0, or -1 when not connected. */
int hr_ssh_addr(const struct hr_ssh *s, int local, char *out, size_t len);

#endif
