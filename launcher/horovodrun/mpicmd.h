/* The mpirun command line that horovodrun --mpi runs. */
#ifndef HR_MPICMD_H
#define HR_MPICMD_H

#include <limits.h>
#include <stddef.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"
#include "launcher/lib/strvec.h"

/*
 * Splits s into words as a POSIX shell splits a command line: blanks
 * separate words; '...' keeps everything literally; "..." keeps
 * everything but \" \\ \$ \` (a backslash before any other character
 * stays); a backslash outside quotes keeps the next character. Nothing
 * is expanded ($VAR, ~ and * stay as they are). Appends the words to out.
 * 0, HVD_ENOMEM, or HVD_EPARSE with a message in err for an unclosed
 * quote or a trailing backslash.
 */
int hr_shell_split(const char *s, struct hvd_strvec *out, char *err,
                   size_t errlen);

/* The words joined by blanks, each quoted where a shell would need it,
 * in a string to free; NULL without memory. */
char *hr_shell_join(char *const *words);

struct hr_mpicmd {
    struct hvd_strvec argv;  /* mpirun's, NULL-terminated */
    char hostfile[PATH_MAX]; /* our temporary hostfile, or "" */
};

/*
 * Builds the command: mpirun (the path given) with the ranks, hosts, ssh
 * settings, exported variables (-x NAME for the variables of this
 * process's environment that the ranks need; values never appear on the
 * command line) and --mpi-args, running every rank through wrapper
 * (hvd-mpi-rank). With --hostfile, writes the hosts that get ranks to a
 * temporary hostfile that hr_mpicmd_close removes. Returns 0, or
 * HVD_EPARSE (bad --mpi-args or ssh settings), HVD_EIO or HVD_ENOMEM
 * with a message in err.
 */
int hr_mpicmd_build(struct hr_mpicmd *c, const char *mpirun,
                    const char *wrapper, const struct hr_opts *o,
                    const struct hvd_hostlist *hl, const struct hvd_plan *p,
                    char *err, size_t errlen);
void hr_mpicmd_close(struct hr_mpicmd *c);

/* Seconds mpirun sleeps between its stop signals: --kill-grace rounded
 * up when given, else Open MPI's default of 1. */
int hr_mpicmd_stop_step(const struct hr_opts *o);

#endif
