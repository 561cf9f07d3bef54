/* The link to a remote host's agent: one libssh2 session driven by the
 * libuv loop (no thread or process per host). */
#ifndef HR_SSH_H
#define HR_SSH_H

#include <stddef.h>
#include <stdint.h>

struct hr_agent;
struct hr_ssh;

/* State for the agent's host; NULL when out of memory. */
struct hr_ssh *hr_ssh_new(struct hr_agent *a);
void hr_ssh_free(struct hr_ssh *s);
/* This machine's address on the connection to the host. */
int hr_ssh_local_addr(struct hr_ssh *s, char *out, size_t len);

/* The link operations (see link.h). */
int hr_ssh_link_start(struct hr_agent *a);
void hr_ssh_link_send(struct hr_agent *a, uint8_t *frame, size_t len,
                      int notify);
void hr_ssh_link_pause(struct hr_agent *a, int pause);
void hr_ssh_link_kill(struct hr_agent *a);
void hr_ssh_link_release(struct hr_agent *a);

#endif
