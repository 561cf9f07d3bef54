/* Starting one rank process: PATH lookup, fork, exec, exec errors. */
#ifndef HVD_SPAWN_H
#define HVD_SPAWN_H

#include <sched.h>
#include <sys/types.h>

struct hvd_spawn_req {
    char *const *argv;
    char *const *envp;
    int stdin_fd;         /* dup'ed onto 0 in the child */
    int stdout_fd;        /* dup'ed onto 1 */
    int stderr_fd;        /* dup'ed onto 2 */
    const cpu_set_t *cpu; /* the CPUs the rank may run on, or NULL */
};

/*
 * Resolves argv[0] like execvp does, but with PATH taken from envp and
 * relative names taken from the current directory. Writes the path to use
 * into out. Returns 0 or a positive errno (ENOENT, EACCES, ENAMETOOLONG).
 */
int hvd_spawn_resolve(const char *cmd, char *const *envp, char *out,
                      size_t outlen);

/*
 * Forks a rank in its own process group that gets SIGKILL when this
 * process dies, and execs it. Returns 0 with *pid set once exec succeeded,
 * or the positive errno of the failed lookup, fork or exec (nothing is
 * left running then).
 */
int hvd_spawn(const struct hvd_spawn_req *req, pid_t *pid);

#endif
