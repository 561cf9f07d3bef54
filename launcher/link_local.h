/* The link to this host's agent: a child process over pipes. */
#ifndef HR_LINK_LOCAL_H
#define HR_LINK_LOCAL_H

#include <stddef.h>
#include <stdint.h>

struct hr_agent;

int hr_local_link_start(struct hr_agent *a);
void hr_local_link_send(struct hr_agent *a, uint8_t *frame, size_t len,
                        int notify);
void hr_local_link_pause(struct hr_agent *a, int pause);
void hr_local_link_release(struct hr_agent *a);

#endif
