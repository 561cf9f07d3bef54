/* The job controller: agents, output, fail-fast, signals, the summary. */
#ifndef HR_JOB_H
#define HR_JOB_H

#include <stdint.h>
#include <uv.h>

#include "cli.h"
#include "common/frame.h"
#include "common/hostspec.h"
#include "common/plan.h"
#include "common/secret.h"
#include "common/strvec.h"
#include "link.h"
#include "output.h"
#include "rdv.h"
#include "stdin_reader.h"

/* horovodrun's own exit codes; a failed rank's code is passed through. */
enum hr_exit {
    HR_EXIT_OK = 0,
    HR_EXIT_INTERNAL = 1,   /* horovodrun or an agent failed */
    HR_EXIT_USAGE = 2,      /* bad command line or host list */
    HR_EXIT_NOEXEC = 126,   /* the command is not executable */
    HR_EXIT_NOTFOUND = 127, /* the command was not found */
    HR_EXIT_PREFLIGHT = 255 /* a host could not be reached or set up */
};

struct hr_gloo_store;

struct hr_rank_state {
    int done;
    uint8_t kind;
    int32_t code;
};

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
    uv_timer_t ping_timer; /* keeps remote agents sure we are alive */
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
    int stdin_agent; /* agent that hosts rank 0, or -1 */
    struct hr_stdin in;
};

/* "SIGKILL" for 9; "SIG?" for numbers without a name. */
const char *hr_sig_name(int sig);

/*
 * Whether a failure reported at now (uv_now, ms) should be named instead
 * of the rank failure recorded first (failed_rank, at failed_at): that one
 * exited with a code (the echo), this one came soon after, before any
 * signal of ours could have caused it (the stop's SIGTERM is excluded by
 * the caller; its SIGKILL comes only after kill_grace seconds).
 */
int hr_is_the_cause(const struct hr_rank_state *ranks, int failed_rank,
                    uint64_t failed_at, int interrupt_sig, uint64_t now,
                    double kill_grace);

/*
 * Prints the summary line for failed rank r (why is "" or "interrupted by
 * SIGINT: ") and returns horovodrun's exit code for it; cmd is the
 * command, named when it could not be executed.
 */
int hr_job_report_rank(const char *why, int r, const char *host, int local_rank,
                       uint8_t kind, int32_t code, const char *cmd);

/* Runs the job to completion; returns horovodrun's exit code. */
int hr_job_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
               const struct hvd_plan *plan);

#endif
