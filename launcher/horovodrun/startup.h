/* horovodrun's start-up progress line: hosts ready, ranks connected. */
#ifndef HR_STARTUP_H
#define HR_STARTUP_H

#include <stddef.h>

struct hr_job;

/* Both for a job of the agents launch (launch_agents.h). */

/*
 * Writes to buf what the job waits for, "2/4 ranks connected; waiting for
 * node2 (ranks 2-3)", or "" once every rank is connected.
 */
void hr_startup_text(const struct hr_job *job, char *buf, size_t len);
/*
 * On a terminal that draws the status block, shows it as the block's first
 * row (hr_output_start_line) from half a second after the start, four
 * times a second, until the ranks' output begins or all are connected.
 */
void hr_startup_start(struct hr_job *job);

#endif
