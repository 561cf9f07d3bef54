/* The agents launch: one hvd-agent per host, and what it needs to start. */
#ifndef HR_LAUNCH_AGENTS_H
#define HR_LAUNCH_AGENTS_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "common/secret.h"
#include "launcher/horovodrun/rdv.h"
#include "launcher/lib/env.h"
#include "launcher/lib/proto.h"
#include "launcher/link/link.h"
#include "launcher/link/ssh.h"

struct hr_gloo_store;
struct hr_rsh_server;
struct hr_elastic;
struct hr_job;
struct hr_opts;

/* srun and the hvd-agent that srun or the rsh agent starts, found once
 * for all the hosts. */
struct hr_srun_paths {
    int found;
    char srun[PATH_MAX];
    char here[PATH_MAX];
    const char *agent;
};

/* The agents launch's state (job->launch of hr_launch_agents). */
struct hr_agents {
    struct hr_agent **agents; /* each allocated on its own: links keep it */
    int nagents, cap;
    int agents_left; /* agents not ended */
    int remote;      /* some agents are remote */
    int started;     /* pre-flight passed, JOB sent */
    int preflight_failed;
    struct hr_rdv rdv;
    struct hr_gloo_store *gloo; /* Horovod's Gloo rendezvous, or NULL */
    int gloo_port;              /* its port; 0 with --no-gloo-rendezvous */
    char gloo_iface[64];        /* the rendezvous address's interface */
    uv_timer_t start_timer;
    uv_timer_t ping_timer;    /* keeps remote agents sure we are alive */
    uv_timer_t startup_timer; /* redraws the start-up progress line */
    int master_port;
    char cwd[4096]; /* where the ranks run, on every host */
    uint8_t secret[HVD_SECRET_LEN];
    char secret_hex[2 * HVD_SECRET_LEN + 1];
    int stdin_agent; /* agent that hosts rank 0, or -1 */
    /* STDIN blocks on their way to it (not TAKEN yet), and whether the
     * end of input went. */
    int stdin_out, stdin_eof;
    struct hr_srun_paths srun;
    struct hr_rsh_server *rsh; /* with --launcher rsh, once a host needs it */
    /* An elastic job's controller (elastic.h); NULL in a fixed job. In an
     * elastic job the "ranks" of the agent protocol and of job->plan are
     * processes, each with its own id. */
    struct hr_elastic *el;
};

/* Between launch_agents.c and launch_elastic.c. */
/* Adds the agent of host h (index in job->hosts) and says how it is
 * reached; its link's start starts it. 0, or horovodrun's exit code once
 * it said why. */
int hr_agents_add(struct hr_job *job, int h, struct hr_agent **out);
/* Sends a its JOB frame: its ranks (an elastic job's processes not sent
 * yet) with their contract. 0 or an error. */
int hr_agents_send_job(struct hr_job *job, struct hr_agent *a);
/* What every rank's contract names: the rendezvous, torch's master and
 * Gloo's store. */
struct hvd_endpoints hr_agents_endpoints(struct hr_job *job);
/* The address ranks reach the rendezvous server at. 0, or an error. */
int hr_agents_rdv_addr(struct hr_job *job, char *out, size_t len);
/* An elastic job's processes on a's host that a was not sent yet, into
 * js. 0 or an error. */
int hr_agents_new_procs(struct hr_job *job, struct hr_agent *a,
                        struct hvd_jobspec *js);
/* An elastic job's agent said HELLO: it gets its processes at once. */
void hr_agents_elastic_hello(struct hr_job *job, struct hr_agent *a);
/* An elastic job's agent ended: its processes that did not end died with
 * it. */
void hr_agents_elastic_lost(struct hr_job *job, struct hr_agent *a);

/*
 * Elastic jobs (elastic.c). Host h (index in job->hosts) runs the
 * processes job->plan places there: its agent is started unless it runs,
 * and the processes it has not been sent go with its JOB, or at once in a
 * RANKS message when it already has its job. A host that cannot take them
 * reports them failed (hr_job_rank_done).
 */
void hr_agents_run_host(struct hr_job *job, int h);

/* How SSH reaches a host, for horovodrun and for the agents it asks. */
struct hr_ssh_cfg hr_agents_ssh_cfg(const struct hr_opts *o);

/* launch_tree.c. Unless --tree-fanout is 0, the agents of other hosts
 * (reached over SSH, through another agent, or by a command: srun or an
 * rsh agent) carry their ranks' rendezvous: horovodrun's descriptors then
 * grow with the agents it started itself, not with the ranks. */
int hr_agents_carries(const struct hr_job *job, const struct hr_agent *a);
/* A fixed job's tree: of the agents reached over SSH, srun or (with
 * --rsh-tree) an rsh agent, horovodrun starts the first F itself, and
 * the agent of the k/F-th such host the k-th after them. 0, or
 * HVD_ENOMEM. */
int hr_agents_plant_tree(struct hr_job *job);
/* An elastic job's new agent a, reached that way: once horovodrun holds
 * --tree-fanout such links, the first agent that may start it and starts
 * fewer than that does so instead. 0, or HVD_ENOMEM. */
int hr_agents_place(struct hr_job *job, struct hr_agent *a);
/* The agents that a's agent started end with it (their sessions were its
 * own). Unless horovodrun was sending them home (lost 0), that is a
 * failure of each, and one line names them; in an elastic job their
 * processes are orphans, whose hosts are not blacklisted. */
void hr_agents_end_subtree(struct hr_job *job, struct hr_agent *a, int lost);
/* Starts the rendezvous server of an elastic job (once; it serves every
 * generation), on an address that the hosts known so far reach. 0, or
 * horovodrun's exit code once it said why. */
int hr_agents_rdv(struct hr_job *job);
/* Stops process id: SIGTERM and SIGKILL after the kill grace, or SIGKILL
 * now. */
void hr_agents_kill(struct hr_job *job, int id, int now);

#endif
