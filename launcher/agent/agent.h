/* hvd-agent internals: the per-host daemon that runs one host's ranks. */
#ifndef HVD_AGENT_H
#define HVD_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/frame.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/rankpipe.h"

/* Rank output is paused while this much is queued towards the launcher
 * (which then no longer reads us: its terminal is behind). */
#define AGENT_OUTQ_HIGH (4u * 1024 * 1024)
#define AGENT_OUTQ_LOW (1u * 1024 * 1024)
/* Frames are gathered up to this size and written with one write. */
#define AGENT_BATCH (64u * 1024)
/* Most bytes read at once from a dead rank's pipes (see drain_now). */
#define AGENT_DRAIN_MAX (1u * 1024 * 1024)

struct agent;
struct agent_carry;
struct agent_child;

/* One rank: its address is in its handles' data and its pipes' contexts,
 * so it is allocated on its own and never moves. */
struct agent_rank {
    struct agent *ag;
    uint32_t rank; /* in an elastic job, a process id never reused */
    uint32_t local_rank;
    pid_t pid;  /* also the process group */
    int reaped; /* exit status known */
    int done;   /* EXIT sent */
    uint8_t kind;
    int32_t code;
    struct hr_rankpipe out, err; /* ctx: this rank */
    uv_pipe_t in;                /* rank 0 only: forwarded stdin */
    int in_open;
    uv_timer_t drain; /* started when reaped with pipes still open */
    uv_timer_t grace; /* KILL's: SIGKILL to the group when it ends */
};

struct agent {
    uv_loop_t *loop;
    uv_pipe_t ctl_in;  /* frames from the launcher */
    uv_pipe_t ctl_out; /* frames to the launcher */
    struct hvd_frame_reader reader;
    struct hvd_jobspec job;
    struct agent_rank **ranks; /* JOB's, then those of each RANKS */
    uint32_t nranks;
    uint32_t live; /* ranks whose EXIT is not sent yet */
    uv_signal_t sigchld, sigterm, sigint, sighup;
    uv_timer_t grace;   /* the whole job's, once stopping */
    uv_timer_t silence; /* armed by PING: the launcher must be heard */
    uint32_t silence_ms;
    int gpus;
    int started;    /* JOB received */
    int stopping;   /* TERM sent to the ranks */
    int paused;     /* rank output paused for backpressure */
    int finished;   /* all ranks done, flushing */
    size_t outq;    /* bytes queued on ctl_out */
    uint8_t *batch; /* frames not yet handed to ctl_out */
    size_t batch_len, batch_cap;
    struct hr_rankpipe_cfg pipes; /* of every rank's out and err */
    /* The tree launch: the agents this one started (agent_relay.c). */
    struct agent_child *children;
    int children_live; /* not ended yet */
    /* Where those started through an rsh agent connect back, or NULL. */
    struct hr_rsh_server *rsh;
    int finishing; /* the ranks are done; waiting for the children */
    /* The carried rendezvous (agent_carry.c), or NULL. */
    struct agent_carry *carry;
    char readbuf[65536];
};

/* Sends one frame (header included, takes ownership) to the launcher,
 * after the lines gathered before it. */
void agent_send(struct agent *ag, uint8_t *frame, size_t len);
/* Gathers one LINE frame; written by agent_flush or once a batch is full. */
void agent_send_line(struct agent *ag, uint32_t rank, uint8_t stream,
                     uint8_t term, const char *text, size_t len);
/* Writes the gathered frames; called at the end of every callback that
 * gathers lines. */
void agent_flush(struct agent *ag);
/*
 * hvd-agent [--token-file PATH --host NAME] --connect PORT ADDR...:
 * connects to horovodrun at the first address that answers and answers its
 * challenge: with the job's token file readable here, with a proof on the
 * connection, which then becomes stdin and stdout; else with the greeting
 * on stdout, and the connection becomes stdin. 0, or -1 once it said why.
 */
int agent_connect(int argc, char **argv);
/* Sends a NOTE message. */
void agent_note(struct agent *ag, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Starts the job's ranks from ag->job.ranks[first] on: first 0 for JOB, the
 * count before a RANKS for its ranks. Failures, and every rank while the
 * agent stops, are reported as EXIT messages.
 */
void agent_ranks_start(struct agent *ag, uint32_t first);
/* KILL: SIGTERM to the rank's group and SIGKILL after the grace, or
 * SIGKILL now; a rank unknown or already reaped is left alone. */
void agent_rank_kill(struct agent *ag, uint32_t rank, int now);
/* Signals every rank's process group that is still running. */
void agent_ranks_signal(struct agent *ag, int sig);
/* SIGTERM now and SIGKILL after the grace, or SIGKILL at once. */
void agent_ranks_stop(struct agent *ag, int now);
/* Reaps exited children (on SIGCHLD). */
void agent_ranks_reap(struct agent *ag);
/* Forwards launcher stdin to rank 0; len 0 closes its stdin. */
void agent_ranks_stdin(struct agent *ag, const uint8_t *p, size_t len);
/* Pauses or resumes reading rank output (backpressure). */
void agent_ranks_pause(struct agent *ag, int pause);
/* Called when every rank is done; the agent exits once the agents it
 * started have ended too. */
void agent_finish(struct agent *ag);

/* agent_relay.c. A SPAWN, TO or DROP frame from horovodrun. 0, or an
 * error for a damaged frame or an unknown agent. */
int agent_relay_frame(struct agent *ag, const struct hvd_frame *f);
/* Stops (1) or resumes (0) reading the agents it started. */
void agent_relay_pause(struct agent *ag, int pause);
/* Ends the sessions of the agents it started: they stop their ranks. */
void agent_relay_drop(struct agent *ag);
/* Closes the connections of those started through an rsh agent, before
 * the loop's handles are closed. */
void agent_relay_close(struct agent *ag);
/* Frees them, once the loop's handles are closed. */
void agent_relay_free(struct agent *ag);
/* agent_carry.c. With JOB's carry_rdv, listens on loopback for the ranks'
 * rendezvous before they start; where it cannot, says so in a NOTE and
 * the ranks reach horovodrun directly. */
void agent_carry_start(struct agent *ag);
/* Points a rank's environment at the carried rendezvous, if any. 0 or
 * HVD_ENOMEM. */
int agent_carry_env(struct agent *ag, struct hvd_strvec *env);
/* An RDV_DATA or RDV_CLOSE frame from horovodrun. 0, or an error for a
 * damaged frame, an id never opened, or a job that carries nothing. */
int agent_carry_frame(struct agent *ag, const struct hvd_frame *f);
/* Stops (1) or resumes (0) reading the carried connections. */
void agent_carry_pause(struct agent *ag, int pause);
/* Frees its state, once the loop's handles are closed. */
void agent_carry_free(struct agent *ag);
/* Frees the rank table, once the loop's handles are closed. */
void agent_ranks_free(struct agent *ag);

#endif
