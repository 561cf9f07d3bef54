/* horovodrun --detach: fork, a new session, and the word that it runs. */
#include "launcher/horovodrun/detach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/lib/log.h"
#include "launcher/horovodrun/serve.h"
#include "launcher/horovodrun/summary.h"

/* Copies the controller's messages to stderr until it is ready or gone;
 * returns horovodrun's exit code. */
static int wait_ready(pid_t pid, int errfd, int readyfd,
                      const struct hr_detach *d, const char *out)
{
    char buf[4096], ok = 0;
    ssize_t n;
    while ((n = read(errfd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
        if (n > 0 && write(STDERR_FILENO, buf, (size_t)n) < 0)
            break;
    while ((n = read(readyfd, &ok, 1)) < 0 && errno == EINTR)
        ;
    if (n == 1 && ok == 'R') {
        printf("%s\n", d->id);
        fflush(stdout);
        fprintf(stderr,
                "horovodrun: job %s runs detached; its output goes to %s "
                "(horovodrun logs -f %s, attach, stop, ps)\n",
                d->id, out, d->id);
        return 0;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    hr_jobdir_remove(d->root, d->id);
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return WEXITSTATUS(status);
    hvd_log_error("the detached job controller ended before the job ran");
    return HR_EXIT_INTERNAL;
}

/* stdin and stdout on /dev/null, stderr on fd. */
static int redirect(int fd)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return -1;
    int rc = dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
                     dup2(fd, STDERR_FILENO) < 0
                 ? -1
                 : 0;
    close(null);
    return rc;
}

int hr_detach_start(struct hr_opts *o, struct hr_detach *d)
{
    char err[512], cwd[PATH_MAX - 32];
    memset(d, 0, sizeof(*d));
    d->ready_fd = -1;
    if (hr_jobdir_root(d->root, sizeof(d->root), 1, err, sizeof(err)) != 0 ||
        hr_jobdir_new(d->root, d->id, err, sizeof(err)) != 0) {
        hvd_log_error("--detach: %s", err);
        return HR_EXIT_INTERNAL;
    }
    if (o->output_dir == NULL) {
        char dir[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            hvd_log_error("cannot get the working directory: %s",
                          strerror(errno));
            hr_jobdir_remove(d->root, d->id);
            return HR_EXIT_INTERNAL;
        }
        int n = snprintf(dir, sizeof(dir), "%s/horovodrun-%s", cwd, d->id);
        o->output_dir = hr_opts_keep(o, dir, (size_t)n);
    }
    int errp[2], readyp[2];
    if (pipe2(errp, O_CLOEXEC) != 0 || pipe2(readyp, O_CLOEXEC) != 0) {
        hvd_log_error("cannot detach: %s", strerror(errno));
        hr_jobdir_remove(d->root, d->id);
        return HR_EXIT_INTERNAL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hvd_log_error("cannot detach: fork: %s", strerror(errno));
        hr_jobdir_remove(d->root, d->id);
        return HR_EXIT_INTERNAL;
    }
    if (pid > 0) {
        close(errp[1]);
        close(readyp[1]);
        int rc = wait_ready(pid, errp[0], readyp[0], d, o->output_dir);
        close(errp[0]);
        close(readyp[0]);
        return rc;
    }
    close(errp[0]);
    close(readyp[0]);
    setsid();
    if (redirect(errp[1]) != 0)
        _exit(HR_EXIT_INTERNAL);
    close(errp[1]);
    d->ready_fd = readyp[1];
    return -1;
}

/* Records the job (np ranks) and lets the first process go; stderr
 * becomes the job's horovodrun.log. */
static void ready(struct hr_detach *d, const struct hr_opts *o, int np)
{
    struct hr_jobinfo ji = {0};
    char log[PATH_MAX];
    snprintf(ji.id, sizeof(ji.id), "%s", d->id);
    ji.pid = (long)getpid();
    ji.started = (long)time(NULL);
    ji.ranks = np;
    snprintf(ji.output, sizeof(ji.output), "%s", o->output_dir);
    size_t off = 0;
    for (int i = 0; i < o->cmdc && off + 1 < sizeof(ji.cmd); i++) {
        int n = snprintf(ji.cmd + off, sizeof(ji.cmd) - off, "%s%s",
                         i ? " " : "", o->cmd[i]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    if (hr_jobdir_write_info(d->root, &ji) != 0)
        hvd_log_warn("cannot write job %s's info in %s", d->id, d->root);
    int fd = -1;
    if (hr_jobdir_path(log, sizeof(log), d->root, d->id, "horovodrun.log") == 0)
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    if (write(d->ready_fd, "R", 1) != 1)
        hvd_log_warn("the first horovodrun went before the job ran");
    close(d->ready_fd);
    d->ready_fd = -1;
}

int hr_detach_serve(struct hr_detach *d, const struct hr_opts *o,
                    uv_loop_t *loop, const struct hvd_plan *plan,
                    struct hr_output *out, void (*on_stop)(void *arg, int now),
                    void *arg, struct hr_serve **serve)
{
    char err[512];
    if (hr_serve_start(serve, loop, d->root, d->id, plan, on_stop, arg, err,
                       sizeof(err)) != 0) {
        hvd_log_error("%s", err);
        return HR_EXIT_INTERNAL;
    }
    out->tap = hr_serve_line;
    out->tap_arg = *serve;
    /* No terminal: the socket's readers and the files get it all. */
    out->sinks[0].broken = out->sinks[1].broken = 1;
    /* An elastic job has no rank yet: it starts with -np. */
    ready(d, o, plan->size > 0 ? plan->size : o->np);
    return 0;
}
