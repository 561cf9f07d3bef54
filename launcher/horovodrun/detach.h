/* horovodrun --detach: the job controller goes on with no terminal. */
#ifndef HR_DETACH_H
#define HR_DETACH_H

#include <limits.h>

#include "cli.h"
#include "jobdir.h"

struct hr_detach {
    char root[PATH_MAX];
    char id[HR_JOB_ID_LEN + 1];
    int ready_fd; /* tells the first process the job runs */
};

/*
 * Makes the job's folder, gives the job its default output folder
 * (./horovodrun-ID, unless --output-filename says where) and forks. The
 * first process waits until the controller says the job is running,
 * prints its id and returns horovodrun's exit code (0, or the code the
 * controller failed with, after its messages). The controller, a new
 * session with stdin and stdout on /dev/null, returns -1 and runs the
 * job with d; its messages reach the first process until it is ready.
 */
int hr_detach_start(struct hr_opts *o, struct hr_detach *d);
/* The controller listens: records the job (np ranks) and lets the first
 * process go; from now on stderr is the job's horovodrun.log. */
void hr_detach_ready(struct hr_detach *d, const struct hr_opts *o, int np);

#endif
