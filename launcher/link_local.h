/* The link to an agent started here over pipes: this host's hvd-agent, or
 * srun starting one on a host of a Slurm allocation. */
#ifndef HR_LINK_LOCAL_H
#define HR_LINK_LOCAL_H

#include <stddef.h>
#include <stdint.h>

struct hr_agent;

/* Starts argv (argv[0] a path), or with NULL the hvd-agent next to
 * horovodrun, with its stdin and stdout as the link. */
int hr_local_link_start(struct hr_agent *a, char *const *argv);
void hr_local_link_send(struct hr_agent *a, uint8_t *frame, size_t len,
                        int notify);
void hr_local_link_pause(struct hr_agent *a, int pause);
void hr_local_link_release(struct hr_agent *a);

#endif
