/* The job controller: agents, output, fail-fast, signals, the summary. */
#ifndef HR_JOB_H
#define HR_JOB_H

#include <stdint.h>
#include <uv.h>

#include "launcher/horovodrun/cli.h"
#include "common/frame.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"
#include "common/secret.h"
#include "launcher/lib/strvec.h"
#include "launcher/link/link.h"
#include "launcher/horovodrun/output.h"
#include "launcher/horovodrun/rdv.h"
#include "launcher/horovodrun/stdin_reader.h"
#include "launcher/horovodrun/summary.h"

struct hr_gloo_store;
struct hr_serve;
struct hr_detach;

struct hr_job {
    uv_loop_t *loop;
    const struct hr_opts *opts;
    const struct hvd_hostlist *hosts;
    const struct hvd_plan *plan;
    struct hr_agent *agents;
    int nagents;
    int agents_left; /* agents not ended */
    int remote;      /* some agents are remote */
    int started;     /* pre-flight passed, JOB sent */
    int preflight_failed;
    struct hr_rank_state *ranks;
    int ranks_done;
    struct hr_output out;
    struct hr_rdv rdv;
    struct hr_gloo_store *gloo; /* Horovod's Gloo rendezvous, or NULL */
    int gloo_port;              /* its port; 0 with --no-gloo-rendezvous */
    char gloo_iface[64];        /* the rendezvous address's interface */
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t start_timer, stop_timer;
    uv_timer_t ping_timer;    /* keeps remote agents sure we are alive */
    uv_timer_t startup_timer; /* redraws the start-up progress line */
    int signals_seen;
    int interrupt_sig;  /* the signal that interrupted the job, or 0 */
    int out_paused;     /* agents not read: the terminal is behind */
    uint64_t out_mark;  /* output written when the stop timer was armed */
    int stopping;       /* graceful stop sent to the agents */
    int killing;        /* SIGKILL sent to the agents */
    int failed_rank;    /* first failing rank, or -1 */
    uint64_t failed_at; /* when it failed (uv_now, ms) */
    int agent_failure;  /* an agent or horovodrun itself failed */
    char failure[512];  /* the summary when agent_failure */
    int master_port;
    char cwd[4096]; /* where the ranks run, on every host */
    uint8_t secret[HVD_SECRET_LEN];
    char secret_hex[2 * HVD_SECRET_LEN + 1];
    int stdin_agent;          /* agent that hosts rank 0, or -1 */
    struct hr_detach *detach; /* --detach: the job's folder, or NULL */
    struct hr_serve *serve;   /* its control socket */
    struct hr_stdin in;
};

/* Runs the job to completion; returns horovodrun's exit code. With d
 * (--detach), the job serves its control socket (serve.h). */
int hr_job_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
               const struct hvd_plan *plan, struct hr_detach *d);

#endif
