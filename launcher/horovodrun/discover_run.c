/* Runs an elastic job's host discovery script on the loop: a middleman
 * process per run, its output through pipes, the result to a callback. */
#include "launcher/horovodrun/discover_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "launcher/lib/discovery.h"
#include "launcher/lib/errmsg.h"

extern char **environ;

/* More stdout than this fails the run: a host list is a few KiB, and a
 * script stuck printing must not grow horovodrun without bound. */
#define OUT_MAX (1u << 20)
/* Of stderr, only this much is kept: enough for its first line. */
#define ERR_KEEP 4096
/* Descriptors the middleman closes when close_range is missing. */
#define FD_FALLBACK 65536

enum { S_OUT, S_ERR };
enum { H_NONE, H_OPEN, H_CLOSING };

struct hr_discover {
    uv_loop_t *loop;
    hr_discover_cb cb;
    void *arg;
    char *script;
    char *argv[4];                /* /bin/sh -c script */
    char name[HVD_QUOTE_MAX + 1]; /* the script, quoted for messages */
    uint64_t interval_ms;
    uint64_t timeout_ms; /* 0: none */
    double timeout_s;
    int default_slots;
    long fd_max; /* for the middleman's fallback close loop */

    /* Idle: the pause before the next run. Running: the timeout. One
     * timer, since the two never overlap. */
    uv_timer_t timer;
    /* Started from before a fork until its middleman is reaped. */
    uv_signal_t sigchld;
    uv_poll_t poll[2]; /* stdout and stderr, during a run */
    int poll_state[2];
    int fd[2];     /* their read ends, or -1 */
    int status_fd; /* the middleman's report of the shell's end, or -1 */
    int handles;   /* initialized and not yet closed */
    int closing;
    int in_run; /* from a run's start until the next one is scheduled */
    int again;  /* hr_discover_now during a run */
    unsigned long results;

    pid_t pid; /* the middleman, leader of the run's group; 0 if none */
    char *out;
    size_t out_len, out_cap;
    char err[ERR_KEEP];
    size_t err_len;
    char fail[384]; /* why the run failed before it ended, or "" */
    struct hr_discover_logcap cap;
};

/* ---- the children: async-signal-safe calls only ---- */

/* What the middleman and the shell need, made before the fork: the child
 * of a process with threads may make async-signal-safe calls only. */
struct kid {
    char *const *argv;
    char *const *envp;
    int in, out, err, status; /* become 0, 1, 2 and 3; all >= 4 */
    pid_t parent;
    long fd_max;
};

static void say(const char *msg)
{
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

/* The middleman's answer to horovodrun's death. */
static void kill_group(int sig)
{
    (void)sig;
    kill(0, SIGKILL);
}

static void close_from(int first, long fd_max)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0u, 0) == 0)
        return;
#endif
    for (long fd = first; fd < fd_max; fd++)
        close((int)fd);
}

/* The shell: dies with the middleman, gets the default signals back. */
static void shell(const struct kid *k, pid_t middleman)
{
    struct sigaction sa;
    sigset_t none;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &sa, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != middleman)
        _exit(127);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(k->argv[0], k->argv, k->envp);
    say("cannot execute /bin/sh\n");
    _exit(127);
}

/*
 * Leads the run's process group, kills it when horovodrun dies, and
 * writes the shell's wait status to fd 3. Starts with every signal
 * blocked (horovodrun blocked them around the fork, so that none of its
 * handlers runs here); only SIGTERM, the parent-death signal, is let in.
 */
static void middleman(const struct kid *k)
{
    struct sigaction sa;
    sigset_t mask;
    pid_t self = getpid();
    pid_t sh;
    int st;

    /* Outside a group of its own, kill(0) would hit horovodrun's. */
    if (setpgid(0, 0) != 0)
        _exit(126);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &sa, NULL);
    /* dup3 keeps fd 3 close-on-exec: the shell must not hold it. */
    if (dup2(k->in, 0) < 0 || dup2(k->out, 1) < 0 || dup2(k->err, 2) < 0 ||
        dup3(k->status, 3, O_CLOEXEC) < 0)
        _exit(126);
    /* Nothing of horovodrun's stays open here (sockets, agents' pipes),
     * or a slow script would keep them from closing. */
    close_from(4, k->fd_max);
    sa.sa_handler = kill_group;
    sigfillset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != k->parent)
        kill(0, SIGKILL);
    sh = fork();
    if (sh == 0)
        shell(k, self);
    if (sh < 0) {
        say("cannot fork the shell\n");
        _exit(126);
    }
    sigfillset(&mask);
    sigdelset(&mask, SIGTERM);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    while (waitpid(sh, &st, 0) < 0) {
        if (errno != EINTR)
            _exit(126);
    }
    while (write(3, &st, sizeof(st)) < 0 && errno == EINTR)
        ;
    _exit(0);
}

/* ---- horovodrun's side ---- */

static uint64_t to_ms(double s)
{
    if (!(s > 0))
        return 0;
    if (s > 1e9)
        return (uint64_t)1e12;
    return (uint64_t)(s * 1000.0 + 0.5);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Moves *fd to 4 or above, so that the middleman's dup2s onto 0 to 3
 * cannot overwrite one source with another. 0 or an errno. */
static int lift(int *fd)
{
    if (*fd >= 4)
        return 0;
    int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 4);
    if (nfd < 0)
        return errno;
    close(*fd);
    *fd = nfd;
    return 0;
}

static void kill_run(struct hr_discover *d)
{
    /* The middleman is reaped only after this, so its pid still names
     * the group and cannot have been reused. */
    if (d->pid > 0)
        kill(-d->pid, SIGKILL);
}

static void maybe_free(struct hr_discover *d)
{
    if (!d->closing || d->handles > 0 || d->pid > 0)
        return;
    free(d->out);
    free(d->script);
    free(d);
}

static void on_handle_close(uv_handle_t *h)
{
    struct hr_discover *d = h->data;
    d->handles--;
    maybe_free(d);
}

static void on_timer(uv_timer_t *t);

/* Starts the pause before the next run, once the last one is over. */
static void schedule(struct hr_discover *d)
{
    if (d->closing || d->pid > 0 || d->poll_state[S_OUT] != H_NONE ||
        d->poll_state[S_ERR] != H_NONE)
        return;
    uv_timer_start(&d->timer, on_timer, d->again ? 0 : d->interval_ms, 0);
    d->again = 0;
    d->in_run = 0;
}

static void on_poll_close(uv_handle_t *h)
{
    struct hr_discover *d = h->data;
    int i = (uv_poll_t *)h == &d->poll[S_OUT] ? S_OUT : S_ERR;

    close_fd(&d->fd[i]);
    d->poll_state[i] = H_NONE;
    d->handles--;
    if (d->closing)
        maybe_free(d);
    else
        schedule(d);
}

static void close_polls(struct hr_discover *d)
{
    for (int i = 0; i < 2; i++) {
        if (d->poll_state[i] != H_OPEN)
            continue;
        d->poll_state[i] = H_CLOSING;
        uv_close((uv_handle_t *)&d->poll[i], on_poll_close);
    }
}

static void stop_polls(struct hr_discover *d)
{
    for (int i = 0; i < 2; i++) {
        if (d->poll_state[i] == H_OPEN)
            uv_poll_stop(&d->poll[i]);
    }
}

static void deliver(struct hr_discover *d, const struct hvd_hostlist *hosts,
                    const char *err)
{
    int first = d->results++ == 0;
    d->cb(d->arg, hosts, err, first);
}

/* Fails the run now: nothing more is read, and the group dies. */
static void fail_run(struct hr_discover *d, const char *why)
{
    if (d->fail[0] == '\0')
        snprintf(d->fail, sizeof(d->fail), "host discovery script '%s' %s",
                 d->name, why);
    stop_polls(d);
    kill_run(d);
}

/* Room for more stdout: 0, or -1 after failing the run. */
static int out_room(struct hr_discover *d)
{
    if (d->out_len < d->out_cap)
        return 0;
    if (d->out_cap == OUT_MAX + 1) {
        fail_run(d, "printed more than 1 MiB");
        return -1;
    }
    size_t cap = d->out_cap ? d->out_cap * 2 : 4096;
    if (cap > OUT_MAX + 1)
        cap = OUT_MAX + 1;
    char *p = realloc(d->out, cap);
    if (p == NULL) {
        fail_run(d, "failed: out of memory for its output");
        return -1;
    }
    d->out = p;
    d->out_cap = cap;
    return 0;
}

/* Reads stream i until it would block. 1 at its end (or on an error, or
 * once the run failed), else 0. */
static int pump(struct hr_discover *d, int i)
{
    char scratch[4096];

    for (;;) {
        char *dst = scratch;
        size_t room = sizeof(scratch);
        if (d->fail[0])
            return 1;
        if (i == S_OUT) {
            if (out_room(d) != 0)
                return 1;
            dst = d->out + d->out_len;
            room = d->out_cap - d->out_len;
        }
        ssize_t n = read(d->fd[i], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return 1;
        if (i == S_OUT) {
            d->out_len += (size_t)n;
            if (d->out_len > OUT_MAX) {
                fail_run(d, "printed more than 1 MiB");
                return 1;
            }
        } else if (d->err_len < sizeof(d->err)) {
            size_t k = sizeof(d->err) - d->err_len;
            if (k > (size_t)n)
                k = (size_t)n;
            memcpy(d->err + d->err_len, scratch, k);
            d->err_len += k;
        }
    }
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    struct hr_discover *d = p->data;
    int i = p == &d->poll[S_OUT] ? S_OUT : S_ERR;

    (void)events;
    if (status < 0 || pump(d, i))
        uv_poll_stop(p);
}

/* The first non-blank line of stderr, quoted, into dst (HVD_QUOTE_MAX + 1
 * bytes); "" if there is none. */
static void first_line(const struct hr_discover *d, char *dst)
{
    const char *s = d->err;
    size_t len = d->err_len;

    dst[0] = '\0';
    while (len > 0) {
        const char *nl = memchr(s, '\n', len);
        size_t n = nl ? (size_t)(nl - s) : len;
        const char *a = s;
        const char *b = s + n;
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\r'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
            b--;
        if (b > a) {
            hvd_quote(dst, a, (size_t)(b - a));
            return;
        }
        s += nl ? n + 1 : n;
        len -= nl ? n + 1 : n;
    }
}

/* Ends the run: the result of the shell's wait status st. */
static void finish(struct hr_discover *d, int st)
{
    struct hvd_hostlist hl;
    const struct hvd_hostlist *hosts = NULL;
    char msg[640];
    char perr[256];
    char line[HVD_QUOTE_MAX + 1];

    uv_timer_stop(&d->timer);
    close_fd(&d->status_fd);
    close_polls(d);
    hvd_hostlist_init(&hl);
    first_line(d, line);
    if (d->fail[0]) {
        snprintf(msg, sizeof(msg), "%s", d->fail);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        if (hr_discovery_parse(&hl, d->out ? d->out : "", d->out_len,
                               d->default_slots, perr, sizeof(perr)) == 0)
            hosts = &hl;
        else
            snprintf(msg, sizeof(msg), "host discovery script '%s': %s",
                     d->name, perr);
    } else if (WIFEXITED(st)) {
        snprintf(msg, sizeof(msg),
                 "host discovery script '%s' exited with status %d%s%s",
                 d->name, WEXITSTATUS(st), line[0] ? ": " : "", line);
    } else {
        int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        const char *abbrev = sigabbrev_np(sig);
        snprintf(msg, sizeof(msg),
                 "host discovery script '%s' was killed by signal %d "
                 "(SIG%s)%s%s",
                 d->name, sig, abbrev ? abbrev : "?", line[0] ? ": " : "",
                 line);
    }
    deliver(d, hosts, hosts ? NULL : msg);
    hvd_hostlist_close(&hl);
    schedule(d);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    struct hr_discover *d = h->data;
    siginfo_t si;
    int mst = 0;
    int st;

    (void)signum;
    if (d->pid <= 0)
        return;
    /* Only looks: the group must stay reserved until it is killed. */
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)d->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        si.si_pid != d->pid)
        return;
    if (!d->closing && !d->fail[0]) {
        /* Everything the shell wrote is in the pipes by now. */
        for (int i = 0; i < 2; i++) {
            if (d->poll_state[i] == H_OPEN && pump(d, i))
                uv_poll_stop(&d->poll[i]);
        }
    }
    /* What the script left running in the background goes too. */
    kill_run(d);
    while (waitpid(d->pid, &mst, 0) < 0 && errno == EINTR)
        ;
    d->pid = 0;
    if (d->closing) {
        uv_close((uv_handle_t *)&d->sigchld, on_handle_close);
        return;
    }
    uv_signal_stop(&d->sigchld);
    /* No status: the middleman itself died (a kill of the group). */
    if (d->status_fd < 0 || read(d->status_fd, &st, sizeof(st)) != sizeof(st))
        st = mst;
    finish(d, st);
}

/* Starts one run; on a failure to start, reports it and schedules the
 * next. */
static void start_run(struct hr_discover *d)
{
    int nul, po[2] = {-1, -1}, pe[2] = {-1, -1}, ps[2] = {-1, -1};
    sigset_t all, old;
    struct kid k;
    char why[160];
    int e = 0;

    d->in_run = 1;
    d->out_len = 0;
    d->err_len = 0;
    d->fail[0] = '\0';
    nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul < 0 || pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
        pipe2(ps, O_CLOEXEC) != 0)
        e = errno;
    if (!e)
        e = lift(&nul);
    if (!e)
        e = lift(&po[1]);
    if (!e)
        e = lift(&pe[1]);
    if (!e)
        e = lift(&ps[1]);
    for (int i = 0; !e && i < 3; i++) {
        int fd = i == 0 ? po[0] : i == 1 ? pe[0] : ps[0];
        if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
            e = errno;
    }
    if (!e) {
        k = (struct kid){.argv = d->argv,
                         .envp = environ,
                         .in = nul,
                         .out = po[1],
                         .err = pe[1],
                         .status = ps[1],
                         .parent = getpid(),
                         .fd_max = d->fd_max};
        /* Before the fork, so that no SIGCHLD is missed. */
        uv_signal_start(&d->sigchld, on_sigchld, SIGCHLD);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t pid = fork();
        if (pid == 0)
            middleman(&k);
        e = pid < 0 ? errno : 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid > 0) {
            /* Also here, so that a kill right away reaches the group. */
            setpgid(pid, pid);
            d->pid = pid;
        } else {
            uv_signal_stop(&d->sigchld);
        }
    }
    close_fd(&nul);
    close_fd(&po[1]);
    close_fd(&pe[1]);
    close_fd(&ps[1]);
    if (e) {
        close_fd(&po[0]);
        close_fd(&pe[0]);
        close_fd(&ps[0]);
        snprintf(why, sizeof(why), "could not start: %s", strerror(e));
        fail_run(d, why);
        deliver(d, NULL, d->fail);
        schedule(d);
        return;
    }
    d->fd[S_OUT] = po[0];
    d->fd[S_ERR] = pe[0];
    d->status_fd = ps[0];
    for (int i = 0; i < 2; i++) {
        int rc = uv_poll_init(d->loop, &d->poll[i], d->fd[i]);
        if (rc != 0) {
            /* The run goes on to its end, reported as failed. */
            snprintf(why, sizeof(why), "failed: cannot watch its output: %s",
                     uv_strerror(rc));
            fail_run(d, why);
            close_fd(&d->fd[i]);
            continue;
        }
        d->poll[i].data = d;
        d->poll_state[i] = H_OPEN;
        d->handles++;
        if (!d->fail[0])
            uv_poll_start(&d->poll[i], UV_READABLE, on_readable);
    }
    if (d->timeout_ms)
        uv_timer_start(&d->timer, on_timer, d->timeout_ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct hr_discover *d = t->data;
    char why[64];

    if (d->pid > 0) {
        snprintf(why, sizeof(why), "did not finish within %g s", d->timeout_s);
        fail_run(d, why);
        return;
    }
    start_run(d);
}

int hr_discover_start(struct hr_discover **out, uv_loop_t *loop,
                      const struct hr_discover_cfg *cfg, hr_discover_cb cb,
                      void *arg)
{
    struct hr_discover *d;
    struct rlimit rl;
    int rc;

    if (out == NULL)
        return HVD_EINVAL;
    *out = NULL;
    if (loop == NULL || cfg == NULL || cb == NULL || cfg->script == NULL ||
        cfg->script[0] == '\0' || !(cfg->interval_s >= 0))
        return HVD_EINVAL;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return HVD_ENOMEM;
    d->script = strdup(cfg->script);
    if (d->script == NULL) {
        free(d);
        return HVD_ENOMEM;
    }
    d->loop = loop;
    d->cb = cb;
    d->arg = arg;
    d->argv[0] = "/bin/sh";
    d->argv[1] = "-c";
    d->argv[2] = d->script;
    const char *name = cfg->name ? cfg->name : cfg->script;
    hvd_quote(d->name, name, strlen(name));
    d->interval_ms = to_ms(cfg->interval_s);
    d->timeout_ms = to_ms(cfg->timeout_s);
    d->timeout_s = cfg->timeout_s;
    d->default_slots = cfg->default_slots;
    d->fd_max = FD_FALLBACK;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < FD_FALLBACK)
        d->fd_max = (long)rl.rlim_cur;
    d->fd[S_OUT] = d->fd[S_ERR] = d->status_fd = -1;
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
    d->handles = 1;
    rc = uv_signal_init(loop, &d->sigchld);
    if (rc != 0) {
        /* Freed by the timer's close callback, once the loop runs. */
        d->closing = 1;
        uv_close((uv_handle_t *)&d->timer, on_handle_close);
        return HVD_ENOMEM;
    }
    d->sigchld.data = d;
    d->handles++;
    uv_timer_start(&d->timer, on_timer, 0, 0);
    *out = d;
    return 0;
}

void hr_discover_close(struct hr_discover *d)
{
    if (d == NULL || d->closing)
        return;
    d->closing = 1;
    uv_close((uv_handle_t *)&d->timer, on_handle_close);
    close_polls(d);
    close_fd(&d->status_fd);
    if (d->pid > 0) {
        kill_run(d);
        if (waitpid(d->pid, NULL, WNOHANG) == d->pid)
            d->pid = 0;
    }
    /* Otherwise on_sigchld reaps the killed middleman, then closes it. */
    if (d->pid == 0)
        uv_close((uv_handle_t *)&d->sigchld, on_handle_close);
}

void hr_discover_now(struct hr_discover *d)
{
    if (d == NULL || d->closing)
        return;
    if (d->in_run)
        d->again = 1;
    else
        uv_timer_start(&d->timer, on_timer, 0, 0);
}

int hr_discover_logcap(struct hr_discover_logcap *c, double now,
                       const char *err, char *line, size_t len)
{
    if (c->logged >= HR_DISCOVER_LOG_FIRST &&
        now - c->last < HR_DISCOVER_LOG_EVERY) {
        c->quiet++;
        return 0;
    }
    if (c->logged + 1 == HR_DISCOVER_LOG_FIRST)
        snprintf(line, len,
                 "%s; further failures are only counted, and logged once a "
                 "minute",
                 err);
    else if (c->quiet > 0)
        snprintf(line, len, "%s (%lu more failure%s since the last message)",
                 err, c->quiet, c->quiet == 1 ? "" : "s");
    else
        snprintf(line, len, "%s", err);
    c->logged++;
    c->quiet = 0;
    c->last = now;
    return 1;
}

int hr_discover_should_log(struct hr_discover *d, const char *err, char *line,
                           size_t len)
{
    if (d == NULL)
        return 0;
    return hr_discover_logcap(&d->cap, (double)uv_now(d->loop) / 1000.0, err,
                              line, len);
}
