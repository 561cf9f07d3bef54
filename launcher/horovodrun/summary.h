/* The failure summary: the line naming the failed rank, the exit code. */
#ifndef HR_SUMMARY_H
#define HR_SUMMARY_H

#include <stdint.h>

/* horovodrun's own exit codes; a failed rank's code is passed through. */
enum hr_exit {
    HR_EXIT_OK = 0,
    HR_EXIT_INTERNAL = 1,   /* horovodrun or an agent failed */
    HR_EXIT_USAGE = 2,      /* bad command line or host list */
    HR_EXIT_NOEXEC = 126,   /* the command is not executable */
    HR_EXIT_NOTFOUND = 127, /* the command was not found */
    HR_EXIT_PREFLIGHT = 255 /* a host could not be reached or set up */
};

/* How a rank ended, as its agent (or hvd-mpi-rank) reported it. */
struct hr_rank_state {
    int done;
    uint8_t kind;
    int32_t code;
};

/* "SIGKILL" for 9; "SIG?" for numbers without a name. */
const char *hr_summary_signame(int sig);

/*
 * Whether a failure reported at now (uv_now, ms) should be named instead
 * of the rank failure recorded first (failed_rank, at failed_at): that one
 * exited with a code (the echo), this one came soon after, before any
 * signal of ours could have caused it (the stop's SIGTERM is excluded by
 * the caller; its SIGKILL comes only after kill_grace seconds).
 */
int hr_summary_is_cause(const struct hr_rank_state *ranks, int failed_rank,
                        uint64_t failed_at, int interrupt_sig, uint64_t now,
                        double kill_grace);

/*
 * Prints the summary line for failed rank r (why is "" or "interrupted by
 * SIGINT: ") and returns horovodrun's exit code for it; cmd is the
 * command, named when it could not be executed.
 */
int hr_summary_rank(const char *why, int r, const char *host, int local_rank,
                    uint8_t kind, int32_t code, const char *cmd);

#endif
