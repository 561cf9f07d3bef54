/* hvd-mpi-rank: runs one rank of horovodrun --mpi under mpirun. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/lib/env.h"
#include "common/envc.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/loop.h"
#include "launcher/lib/mpiwire.h"
#include "launcher/lib/rankpipe.h"

#define PROG "hvd-mpi-rank"
#define USAGE                                                                  \
    "usage: " PROG " [--plan host:n,...] [--no-gpu-pinning] -- command "       \
    "[args...], or " PROG " --tied PID -- mpirun [args...]"

/* The signals mpirun sends to the rank's process group, which the rank
 * gets directly: this process only has to outlive the rank to report it
 * (SIGTERM also arrives when mpirun dies, see main). */
static const int caught[] = {SIGTERM, SIGINT,  SIGHUP, SIGUSR1,
                             SIGUSR2, SIGALRM, SIGABRT};
#define NCAUGHT ((int)(sizeof(caught) / sizeof(caught[0])))

struct wrapper {
    uv_loop_t *loop;
    uv_process_t proc;
    struct hr_rankpipe out, err; /* ctx: this wrapper */
    struct hr_rankpipe_cfg pipes;
    uv_signal_t sigs[NCAUGHT];
    uv_timer_t drain;
    pid_t parent;
    int reaped;
    int done; /* the exit record was written */
    int kind;
    int32_t code;
    struct hr_mpibuf buf; /* records not yet written */
    char readbuf[65536];
};

/* Ends the rank and all it started: mpirun, the only reader of our
 * records and the one who would stop them, is gone. */
static void orphaned(void)
{
    if (getpgrp() == getpid())
        kill(0, SIGKILL);
    _exit(1);
}

/* Writes the records gathered so far; blocking is the backpressure that
 * slows the rank down when mpirun's reader is behind. */
static void flush(struct wrapper *w)
{
    size_t off = 0;
    while (off < w->buf.len) {
        ssize_t n = write(STDOUT_FILENO, w->buf.p + off, w->buf.len - off);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = STDOUT_FILENO, .events = POLLOUT};
            poll(&pfd, 1, -1);
        } else if (n < 0 && errno != EINTR) {
            orphaned();
        }
    }
    w->buf.len = 0;
}

static void on_line(void *ctx, int which, const char *line, size_t len,
                    enum hvd_line_term term)
{
    struct wrapper *w = ctx;
    if (hr_mpiwire_line(&w->buf, which, (int)term, line, len) != 0) {
        /* Out of memory: what was gathered goes first, then the line. */
        flush(w);
        hr_mpiwire_line(&w->buf, which, (int)term, line, len);
    }
}

/* After every read, so that a full stdout slows the rank down. */
static void on_read_done(void *ctx)
{
    flush(ctx);
}

static void finish(struct wrapper *w)
{
    if (w->done)
        return;
    w->done = 1;
    hr_mpiwire_exit(&w->buf, w->kind, w->code);
    flush(w);
    uv_stop(w->loop);
}

static void on_drain(uv_timer_t *t);

/* The rank is done once it was reaped and both pipes reached EOF, so that
 * its exit record follows its last line. */
static void maybe_done(struct wrapper *w)
{
    if (!w->reaped)
        return;
    if (w->out.open || w->err.open) {
        if (!uv_is_active((uv_handle_t *)&w->drain))
            uv_timer_start(&w->drain, on_drain, HR_RANKPIPE_DRAIN_MS, 0);
        return;
    }
    uv_timer_stop(&w->drain);
    finish(w);
}

static void on_ended(void *ctx, int which)
{
    (void)which;
    maybe_done(ctx);
}

/* Ends with SIGKILL everything in our process group but this process, as
 * hvd-agent ends a rank's group: the rank shares our group (mpirun
 * signals it), so the group cannot be killed at once. A few passes catch
 * what forked meanwhile. */
static void kill_group_but_me(void)
{
    pid_t me = getpid();
    if (getpgrp() != me)
        return;
    for (int pass = 0, found = 1; pass < 4 && found; pass++) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        found = 0;
        while (d && (e = readdir(d)) != NULL) {
            pid_t pid = (pid_t)atoi(e->d_name);
            if (pid > 0 && pid != me && getpgid(pid) == me) {
                kill(pid, SIGKILL);
                found = 1;
            }
        }
        if (d)
            closedir(d);
    }
}

static void on_drain(uv_timer_t *t)
{
    struct wrapper *w = t->data;
    /* Something the rank started still holds its pipes: it is ended, and
     * the rank reported without waiting for it. */
    kill_group_but_me();
    hr_rankpipe_end(&w->out);
    hr_rankpipe_end(&w->err);
    flush(w);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct wrapper *w = p->data;
    w->reaped = 1;
    w->kind = sig ? HVD_EXIT_SIGNAL : HVD_EXIT_CODE;
    w->code = sig ? sig : (int32_t)status;
    uv_close((uv_handle_t *)p, NULL);
    maybe_done(w);
}

static void on_signal(uv_signal_t *h, int sig)
{
    struct wrapper *w = h->data;
    (void)sig;
    if (getppid() != w->parent)
        orphaned();
}

static int env_int(const char *name, int lo, int hi, int *out)
{
    const char *v = getenv(name);
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || v[0] == '\0' || *end != '\0' || n < lo || n > hi)
        return -1;
    *out = (int)n;
    return 0;
}

/*
 * Gives the rank the env contract of horovodrun: its place from mpirun,
 * its host name and cross rank from horovodrun's plan (which mpirun
 * followed unless --mpi-args changed the mapping; then the host is this
 * machine's name and the cross rank is left out). Writes the hello
 * record. Returns 0, or -1 after an error message.
 */
static int set_contract(struct wrapper *w, const char *spec, int pin)
{
    int rank, size, lrank = 0, lsize = 1, rc = -1;
    struct hvd_hostlist hl;
    struct hvd_plan plan = {0};
    char host[256] = "", err[256];
    const char *name = host;
    const struct hvd_slot *s = NULL;

    if (env_int(HVD_ENV_OMPI_SIZE, 1, 1 << 24, &size) != 0 ||
        env_int(HVD_ENV_OMPI_RANK, 0, size - 1, &rank) != 0) {
        fprintf(stderr,
                PROG ": error: %s and %s are missing or bad; " PROG
                     " runs the ranks of horovodrun --mpi under Open MPI's "
                     "mpirun\n",
                HVD_ENV_OMPI_RANK, HVD_ENV_OMPI_SIZE);
        return -1;
    }
    hvd_hostlist_init(&hl);
    if (spec && hvd_hostlist_parse_spec(&hl, spec, err, sizeof(err)) == 0 &&
        hvd_plan_build(&plan, &hl, size) == 0)
        s = &plan.ranks[rank];
    if (env_int(HVD_ENV_OMPI_LOCAL_SIZE, 1, size, &lsize) != 0 ||
        env_int(HVD_ENV_OMPI_LOCAL_RANK, 0, lsize - 1, &lrank) != 0) {
        lrank = s ? s->local_rank : 0;
        lsize = s ? s->local_size : 1;
    }
    if (s && (s->local_rank != lrank || s->local_size != lsize))
        s = NULL;
    gethostname(host, sizeof(host) - 1);
    if (s)
        name = hl.hosts[s->host].name;

    const struct hvd_env_place pl = {
        .rank = rank,
        .size = size,
        .local_rank = lrank,
        .local_size = lsize,
        .cross_rank = s ? s->cross_rank : -1,
        .cross_size = s ? s->cross_size : 0,
        .host = name,
    };
    if (hvd_env_place_put(&pl, hvd_env_put_process, NULL) != 0) {
        fprintf(stderr, PROG ": error: out of memory for the rank's "
                             "environment\n");
        goto out;
    }
    /* No rendezvous under mpirun: whatever the environment held of one
     * (an outer job's) must not reach the rank. */
    unsetenv(HVD_ENV_RDV_ADDR);
    unsetenv(HVD_ENV_RDV_PORT);
    unsetenv(HVD_ENV_SECRET);
    char dev[64];
    if (pin && hvd_gpu_pick(getenv(HVD_ENV_CUDA_VISIBLE), hvd_gpu_count(),
                            lrank, dev, sizeof(dev)))
        setenv(HVD_ENV_CUDA_VISIBLE, dev, 1);
    hr_mpiwire_hello(&w->buf, lrank, name);
    rc = 0;
out:
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
    return rc;
}

/* Starts the rank; a rank that cannot be started is reported like one
 * that ran. */
static int start(struct wrapper *w, char **cmd)
{
    uv_stdio_container_t stdio[3];
    w->pipes = (struct hr_rankpipe_cfg){
        .line = on_line,
        .flush = on_read_done,
        .ended = on_ended,
        .buf = w->readbuf,
        .buflen = sizeof(w->readbuf),
        .line_max = HR_RANKPIPE_LINE_MAX,
    };
    hr_rankpipe_init(&w->out, w->loop, &w->pipes, w, HVD_STREAM_STDOUT);
    hr_rankpipe_init(&w->err, w->loop, &w->pipes, w, HVD_STREAM_STDERR);
    /* mpirun hands its stdin to rank 0 and /dev/null to the others. */
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = STDIN_FILENO;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = hr_rankpipe_stream(&w->out);
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = hr_rankpipe_stream(&w->err);
    /* The rank stays in this process group, mpirun's unit of signals. */
    uv_process_options_t po = {
        .exit_cb = on_exit_cb,
        .file = cmd[0],
        .args = cmd,
        .stdio_count = 3,
        .stdio = stdio,
    };
    w->proc.data = w;
    int e = uv_spawn(w->loop, &w->proc, &po);
    if (e != 0) {
        uv_close((uv_handle_t *)&w->proc, NULL);
        w->kind = HVD_EXIT_SPAWN;
        w->code = -e;
        w->reaped = 1;
        hr_rankpipe_end(&w->out);
        hr_rankpipe_end(&w->err);
        return -1;
    }
    hr_rankpipe_start(&w->out);
    hr_rankpipe_start(&w->err);
    return 0;
}

/* Ends this process as the rank ended, so that mpirun sees the same. */
static int exit_like(const struct wrapper *w)
{
    switch (w->kind) {
    case HVD_EXIT_CODE:
        return w->code & 255;
    case HVD_EXIT_SIGNAL: {
        sigset_t set;
        signal(w->code, SIG_DFL);
        sigemptyset(&set);
        sigaddset(&set, w->code);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(w->code);
        return 128 + (w->code & 127);
    }
    default:
        return w->code == ENOENT ? 127 : 126;
    }
}

/*
 * horovodrun --mpi starts mpirun through this (--tied): mpirun notices
 * horovodrun's end only when it next writes to it, so a job whose ranks
 * print nothing outlived a SIGKILLed horovodrun. The parent-death signal
 * survives the exec, and mpirun ends its job on SIGTERM.
 */
static int exec_tied(pid_t parent, char **cmd)
{
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        return 1;
    execvp(cmd[0], cmd);
    fprintf(stderr, PROG ": error: cannot run %s: %s\n", cmd[0],
            strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
    static struct wrapper w;
    const char *spec = NULL;
    int pin = 1, i;
    pid_t tied = 0;

    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--plan") == 0 && i + 1 < argc) {
            spec = argv[++i];
        } else if (strcmp(argv[i], "--no-gpu-pinning") == 0) {
            pin = 0;
        } else if (strcmp(argv[i], "--tied") == 0 && i + 1 < argc) {
            tied = (pid_t)atoi(argv[++i]);
        } else {
            fprintf(stderr, PROG ": error: unknown option '%s'; " USAGE "\n",
                    argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, PROG ": error: no command; " USAGE "\n");
        return 2;
    }
    if (tied > 0)
        return exec_tied(tied, argv + i);
    signal(SIGPIPE, SIG_IGN);
    /* mpirun's death reaches us as SIGTERM; see on_signal. */
    w.parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != w.parent)
        return 1;
    if (set_contract(&w, spec, pin) != 0)
        return 2;
    flush(&w);

    w.loop = uv_default_loop();
    uv_timer_init(w.loop, &w.drain);
    w.drain.data = &w;
    /* Not a reason to keep the loop alive: weak. */
    uv_signal_t *sigs[NCAUGHT];
    for (int k = 0; k < NCAUGHT; k++)
        sigs[k] = &w.sigs[k];
    hr_loop_signals(w.loop, sigs, caught, NCAUGHT, &w, on_signal, 1);
    /* A rank that cannot start is reported at once, without a loop. */
    if (start(&w, argv + i) == 0)
        uv_run(w.loop, UV_RUN_DEFAULT);
    flush(&w);
    hr_loop_close_all(w.loop, UV_RUN_NOWAIT);
    hr_rankpipe_close(&w.out);
    hr_rankpipe_close(&w.err);
    hr_mpibuf_close(&w.buf);
    return exit_like(&w);
}
