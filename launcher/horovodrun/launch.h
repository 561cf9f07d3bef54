/* How the job controller starts its ranks: one table per way of launching. */
#ifndef HR_LAUNCH_H
#define HR_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

struct hr_job;

/*
 * One way of starting the job's ranks, as MPICH hydra's process manager
 * sees its bootstrap backends: the controller (job.h) owns the policy
 * (signals and their escalation, fail-fast, stdin, output backpressure,
 * detach serving, the summary) and reaches the ranks only through these
 * operations. A launch keeps its state in job->launch and reports back
 * with the hr_job_* functions of job.h.
 */
struct hr_launch_ops {
    /* Words for the controller's messages, which name what the launch
     * puts between horovodrun and the ranks: whom a forwarded signal
     * reaches, what a kill ends, how an interrupted job ended when no rank
     * failed, what is said before a late stop turns into a kill (NULL:
     * nothing) and what did not answer that kill. */
    const char *forward_to;
    const char *kill_all;
    const char *all_stopped;
    const char *stop_late;
    const char *no_answer;
    /* The launch stops every rank itself once one failed or a signal was
     * forwarded (mpirun does): deaths by SIGTERM or SIGKILL after that
     * are its doing, not failures. */
    int stops_ranks;
    /* The size of the launch's state, job->launch, which the controller
     * allocates zeroed before start and frees after free. */
    size_t size;

    /* Checks what the launch needs, calls hr_job_open before anything it
     * starts holds horovodrun's stderr, and starts the ranks. 0, or
     * horovodrun's exit code once it said why. */
    int (*start)(struct hr_job *job);
    /* Forwards the signal that interrupted the job. Returns how long (ms)
     * the ranks get to stop before they are killed, or 0 when the ranks
     * decide themselves whether the signal ends them. */
    uint64_t (*signal)(struct hr_job *job, int sig);
    /* Stops every rank: after a grace, or with now at once (SIGKILL).
     * Returns how long (ms) to wait for the ranks' ends before the next
     * step. */
    uint64_t (*stop)(struct hr_job *job, int now);
    /* A block of horovodrun's stdin for rank 0; n 0 ends its input. Once
     * the block is taken, the launch calls hr_job_read_stdin. */
    void (*write_stdin)(struct hr_job *job, const char *buf, size_t n);
    /* Stops (1) or resumes (0) reading the ranks' output: the terminal
     * fell behind or caught up. */
    void (*pause)(struct hr_job *job, int pause);
    /* Where rank ran, for the summary; NULL: where the plan put it. */
    void (*place)(const struct hr_job *job, int rank, const char **host,
                  int *local_rank);
    /* A failure of the launch itself that the summary names instead of
     * the ranks' fate: prints it and returns horovodrun's exit code, or
     * returns -1. */
    int (*failure)(struct hr_job *job);
    /* The job is over: closes what the launch serves (before the loop's
     * handles are closed). */
    void (*close)(struct hr_job *job);
    /* Frees what the launch's state holds once every handle is closed;
     * also after a start that failed part way. */
    void (*free)(struct hr_job *job);
};

/* launch_agents.c: one hvd-agent per host, over pipes, SSH or srun. */
extern const struct hr_launch_ops hr_launch_agents;
/* launch_mpirun.c: Open MPI's mpirun, each rank inside hvd-mpi-rank. */
extern const struct hr_launch_ops hr_launch_mpirun;

#endif
