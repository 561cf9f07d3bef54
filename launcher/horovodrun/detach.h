/* horovodrun --detach: the job controller goes on with no terminal. */
#ifndef HR_DETACH_H
#define HR_DETACH_H

#include <limits.h>

#include <uv.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/horovodrun/jobdir.h"
#include "launcher/horovodrun/output.h"
#include "launcher/lib/plan.h"

struct hr_serve;

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
/*
 * The controller's side, once out is set up and before anything it starts
 * holds its stderr: serves the job's control socket (serve.h) with out's
 * lines, which no longer go to the terminal, records the job and lets the
 * first process go; from then on stderr is the job's horovodrun.log.
 * on_stop(arg, now) is a stop request. 0, or horovodrun's exit code after
 * saying why.
 */
int hr_detach_serve(struct hr_detach *d, const struct hr_opts *o,
                    uv_loop_t *loop, const struct hvd_plan *plan,
                    struct hr_output *out, void (*on_stop)(void *arg, int now),
                    void *arg, struct hr_serve **serve);

#endif
