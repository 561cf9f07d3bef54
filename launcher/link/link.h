/* Links: how horovodrun reaches the agent of a host, over pipes (this
 * host's hvd-agent, or srun starting one), over SSH, or through the agent
 * that started it (relay.h), each kind one table of operations; the owner
 * hears back through callbacks, frames only. */
#ifndef HR_LINK_H
#define HR_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/frame.h"
#include "launcher/lib/strvec.h"

struct hr_agent;
struct hr_job;
struct hr_relay;
struct hr_rsh;
struct hr_ssh;

/* What a link tells the agent's owner. */
struct hr_link_cb {
    /* Bytes from the agent, frames or pieces of them. */
    void (*bytes)(struct hr_agent *a, const char *buf, size_t n);
    /* The agent is gone and its output read to the end. */
    void (*ended)(struct hr_agent *a);
};

struct hr_link_ops {
    /*
     * Starts the agent. Returns 0, or -1 with a->failure describing why;
     * the agent then counts as ended (ended is not called).
     */
    int (*start)(struct hr_agent *a);
    /* Queues a frame (ownership passes). */
    void (*send)(struct hr_agent *a, uint8_t *frame, size_t len);
    /*
     * Stops (pause 1) or resumes (0) taking frames from the agent, when
     * the terminal falls behind. Only the agent-to-horovodrun direction
     * stops: frames to the agent (PING, STOP, SIGNAL, STDIN) still go out.
     */
    void (*pause)(struct hr_agent *a, int pause);
    /* Ends the agent without asking it: sig locally, a closed session
     * remotely (the agent sees its stdin close and stops its ranks). */
    void (*kill)(struct hr_agent *a, int sig);
    /* Frees what the link holds, once the agent ended. */
    void (*release)(struct hr_agent *a);
};

/* link_local.c: the agent as a child over pipes (argv, or the hvd-agent
 * next to horovodrun when argv is empty); with a->rsh, frames to it go
 * over the connection it makes back (rsh.h). */
extern const struct hr_link_ops hr_link_pipes;
/* ssh.c: the agent over a libssh2 session (a->ssh). */
extern const struct hr_link_ops hr_link_ssh;

/* One host's agent, as its link and its owner (the job controller) see
 * it. */
struct hr_agent {
    struct hr_job *job; /* the owner's; links never look inside */
    uv_loop_t *loop;
    const struct hr_link_ops *link; /* how this host's agent is reached */
    const struct hr_link_cb *cb;    /* what the link tells the owner */
    int host;                       /* index in the host list */
    const char *name;               /* as the user wrote it */
    uint32_t nranks; /* ranks placed on this host; elastic: also those sent */
    /* Pipes link. */
    uv_process_t proc;
    uv_pipe_t to;   /* frames to the agent (its stdin) */
    uv_pipe_t from; /* frames from the agent (its stdout) */
    int handles_open;
    /* The command that starts the agent: srun or an rsh agent for a remote
     * host; empty for the hvd-agent next to horovodrun. */
    struct hvd_strvec argv;
    struct hr_rsh *rsh; /* set when argv is an rsh agent's */
    /* Remote link; NULL for this host. */
    struct hr_ssh *ssh;
    /* Set when another host's agent starts this one (relay.h). */
    struct hr_relay *relay;
    /* horovodrun's: the rendezvous connections it carries (carry.h). */
    struct hr_carry *carry;
    const char *stage; /* what pre-flight is doing, for timeouts */
    /* Set while the link waits for the host to come up ("unresolved"),
     * for the start-up line. */
    const char *retrying;
    char failure[512]; /* why pre-flight failed on this host */

    struct hvd_frame_reader reader;
    int hello;      /* HELLO received */
    int running;    /* the agent (or its session) is alive */
    int reading;    /* its output is not at EOF yet */
    int ended;      /* the owner's ended callback ran */
    int64_t status; /* exit status of the agent */
    int term_signal;
    int free_port; /* a free TCP port on its host, from HELLO */
    int gpus;
    int has_job;      /* its JOB was sent */
    uint32_t sent_to; /* elastic: processes below this id were looked at */
    int orphaned;     /* it ended because the agent that started it did */
};

/* link_local.c: calls a->cb->ended once the agent's process exited and
 * everything it sent was read. */
void hr_link_check_end(struct hr_agent *a);
/* Writes a frame to the agent on stream to (ownership passes). */
void hr_link_write(uv_stream_t *to, uint8_t *frame, size_t len);

/* The absolute path of the program name next to this horovodrun (such as
 * "hvd-agent"). Returns 0, or -1 when it does not fit in len. */
int hr_link_sibling_path(const char *name, char *out, size_t len);

#endif
