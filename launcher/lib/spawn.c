/* fork/exec of rank processes with exec errors reported back by pipe. */
#include "launcher/lib/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* 0 if path is an executable regular file, else the errno to report. */
static int check_exec(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOTDIR ? ENOENT : errno;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    if (access(path, X_OK) != 0)
        return errno;
    return 0;
}

static const char *env_path(char *const *envp)
{
    for (; envp && *envp; envp++)
        if (strncmp(*envp, "PATH=", 5) == 0)
            return *envp + 5;
    return "/usr/local/bin:/usr/bin:/bin";
}

int hvd_spawn_resolve(const char *cmd, char *const *envp, char *out,
                      size_t outlen)
{
    if (cmd[0] == '\0')
        return ENOENT;
    if (strchr(cmd, '/') != NULL) {
        if (strlen(cmd) >= outlen)
            return ENAMETOOLONG;
        strcpy(out, cmd);
        return check_exec(cmd);
    }
    /* Like execvp: the first executable match wins; a match that exists
     * but cannot be executed is reported only if nothing else matches. */
    int found = ENOENT;
    const char *p = env_path(envp);
    while (1) {
        size_t dlen = strcspn(p, ":");
        char cand[PATH_MAX];
        int n = snprintf(cand, sizeof(cand), "%.*s%s%s", (int)dlen, p,
                         dlen ? "/" : "", cmd);
        if (n > 0 && (size_t)n < sizeof(cand)) {
            int e = check_exec(cand);
            if (e == 0) {
                if ((size_t)n >= outlen)
                    return ENAMETOOLONG;
                memcpy(out, cand, (size_t)n + 1);
                return 0;
            }
            if (e != ENOENT)
                found = e;
        }
        if (p[dlen] == '\0')
            break;
        p += dlen + 1;
    }
    return found;
}

/* Runs in the child between fork and exec: async-signal-safe calls only. */
static void child(const struct hvd_spawn_req *req, const char *path,
                  pid_t parent, int errfd)
{
    int e;
    sigset_t none;

    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        e = ESRCH;
        goto fail;
    }
    /* Undo what the agent changed: ignored SIGPIPE and blocked signals
     * would otherwise survive exec. */
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(req->stdin_fd, 0) < 0 || dup2(req->stdout_fd, 1) < 0 ||
        dup2(req->stderr_fd, 2) < 0) {
        e = errno;
        goto fail;
    }
    /* Before exec, so that every thread the rank starts inherits it. A
     * CPU that went offline meanwhile is no reason not to run. */
    if (req->cpu)
        sched_setaffinity(0, sizeof(*req->cpu), req->cpu);
    execve(path, req->argv, req->envp);
    e = errno;
fail:
    while (write(errfd, &e, sizeof(e)) < 0 && errno == EINTR)
        ;
    _exit(127);
}

int hvd_spawn(const struct hvd_spawn_req *req, pid_t *pid)
{
    char path[PATH_MAX];
    int ep[2];
    int err = hvd_spawn_resolve(req->argv[0], req->envp, path, sizeof(path));
    if (err)
        return err;
    if (pipe2(ep, O_CLOEXEC) != 0)
        return errno;
    pid_t parent = getpid();
    pid_t c = fork();
    if (c < 0) {
        err = errno;
        goto out;
    }
    if (c == 0)
        child(req, path, parent, ep[1]);
    close(ep[1]);
    ep[1] = -1;
    /* The pipe closes on a successful exec; otherwise it carries errno. */
    int e = 0;
    ssize_t n;
    while ((n = read(ep[0], &e, sizeof(e))) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof(e)) {
        err = e ? e : EIO;
        while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
            ;
        goto out;
    }
    *pid = c;
out:
    close(ep[0]);
    if (ep[1] >= 0)
        close(ep[1]);
    return err;
}
