/* The job controller: signals, fail-fast, stdin, output, the summary. */
#ifndef HR_JOB_H
#define HR_JOB_H

#include <stdint.h>
#include <uv.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/horovodrun/launch.h"
#include "launcher/horovodrun/output.h"
#include "launcher/horovodrun/stdin_reader.h"
#include "launcher/horovodrun/summary.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"

struct hr_serve;
struct hr_detach;

/* One job, whichever launch (launch.h) starts its ranks. */
struct hr_job {
    uv_loop_t *loop;
    const struct hr_opts *opts;
    const struct hvd_hostlist *hosts;
    const struct hvd_plan *plan;
    const struct hr_launch_ops *ops;
    void *launch; /* the launch's own state */
    struct hr_rank_state *ranks;
    int ranks_done;
    struct hr_output out;
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t stop_timer;
    uint64_t stop_wait; /* ms the current stop step waits */
    int ended;          /* the launch reported its end */
    int signals_seen;
    int interrupt_sig;  /* the signal that interrupted the job, or 0 */
    int out_paused;     /* ranks' output not read: the terminal is behind */
    uint64_t out_mark;  /* output written when the stop timer was armed */
    int stopping;       /* the ranks are being stopped */
    int killing;        /* the ranks are being killed */
    int failed_rank;    /* first failing rank, or -1 */
    uint64_t failed_at; /* when it failed (uv_now, ms) */
    int launch_failure; /* the launch or horovodrun itself failed */
    char failure[512];  /* the summary when launch_failure */
    struct hr_detach *detach; /* --detach: the job's folder, or NULL */
    struct hr_serve *serve;   /* its control socket */
    struct hr_stdin in;
    int nranks; /* entries of ranks: plan->size, which an elastic job grows */
    /* The ranks as they are now, by rank: plan, or in an elastic job
     * (whose plan has one entry per process) its current assignment. */
    const struct hvd_plan *assignment;
    /* Set by a launch that decides itself what a rank's end means (an
     * elastic job): called after the end is recorded, instead of
     * fail-fast. */
    void (*rank_ended)(struct hr_job *job, uint32_t rank);
};

/* Runs the job to completion with ops starting its ranks; returns
 * horovodrun's exit code. With d (--detach), the job serves its control
 * socket (serve.h). */
int hr_job_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
               const struct hvd_plan *plan, const struct hr_launch_ops *ops,
               struct hr_detach *d);

/*
 * For the launch's start, before it starts anything that holds
 * horovodrun's stderr: the output, the detached job's socket, the ranks'
 * states and the signal handlers. 0, or horovodrun's exit code once it
 * said why.
 */
int hr_job_open(struct hr_job *job);
/* How rank ended (enum hvd_exit_kind, code); a failure stops the job. */
void hr_job_rank_done(struct hr_job *job, uint32_t rank, uint8_t kind,
                      int32_t code);
/* A failure of the launch or of horovodrun (the first one is named, as
 * long as no rank failure came first) ends the job. */
void hr_job_fail(struct hr_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Stops every rank (now: at once), then kills them, then gives up. */
void hr_job_stop(struct hr_job *job, int now);
/* The launch is over and every line of the ranks read: the job ends once
 * the output is written. */
void hr_job_ended(struct hr_job *job);
/* The plan grew (an elastic job started processes): the ranks' states and
 * the output follow. 0, or an error once said why. */
int hr_job_grow(struct hr_job *job);
/* Rank 0 may take the next block of horovodrun's stdin. */
void hr_job_read_stdin(struct hr_job *job);

#endif
