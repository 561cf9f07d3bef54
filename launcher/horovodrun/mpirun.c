/* horovodrun --mpi: runs mpirun and turns its output into ours. */
#include "launcher/horovodrun/mpirun.h"

#include "launcher/horovodrun/detach.h"
#include "launcher/horovodrun/serve.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/agent/agent.h"
#include "common/envc.h"
#include "launcher/horovodrun/detach.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"
#include "hvd_build.h"
#include "launcher/horovodrun/job.h"
#include "launcher/link/link.h"
#include "launcher/lib/loop.h"
#include "launcher/horovodrun/mpicmd.h"
#include "launcher/lib/mpiwire.h"
#include "launcher/lib/net.h"
#include "launcher/horovodrun/output.h"
#include "launcher/horovodrun/serve.h"
#include "launcher/lib/spawn.h"
#include "launcher/horovodrun/stdin_reader.h"

extern char **environ;

/* mpirun's own stderr kept for a failure that no rank explains. */
#define HELD_MAX (64u * 1024)
/* How long mpirun gets to stop the ranks after a signal was forwarded,
 * beyond its SIGCONT, SIGTERM, SIGKILL steps, before it is killed. */
#define STOP_SLACK_MS 10000

struct mpijob;

/* mpirun's stdout (records) or stderr (raw lines). */
struct mpistream {
    struct mpijob *job;
    int stream; /* HVD_STREAM_STDOUT or HVD_STREAM_STDERR */
    uv_pipe_t pipe;
    int open;
    struct hr_mpitag tag;
    /* Unfinished lines: one per rank, then mpirun's own. */
    struct hr_mpibuf *lines;
};

struct mpijob {
    uv_loop_t *loop;
    const struct hr_opts *opts;
    const struct hvd_hostlist *hosts;
    const struct hvd_plan *plan;
    struct hr_output out;
    uv_process_t proc;
    int running;
    int64_t status;
    int term_signal;
    struct mpistream s[2];
    uv_pipe_t in; /* mpirun's stdin, which it hands to rank 0 */
    int in_open;
    struct hr_stdin stdin_reader;
    uv_write_t stdin_write;
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t stop_timer;
    int signals_seen;
    int interrupt_sig;
    struct hr_rank_state *ranks;
    int *local_rank; /* as the rank's hello said */
    char **host;     /* as the rank's hello said; NULL: the plan's */
    int hellos;
    int failed_rank;
    uint64_t failed_at;
    struct hr_mpibuf held; /* mpirun's own stderr */
    int held_cut;
    struct hr_detach *detach; /* --detach: the job's folder, or NULL */
    struct hr_serve *serve;   /* its control socket */
};

static void on_stdin(struct hr_stdin *in, const char *buf, size_t n);

static void maybe_end(struct mpijob *job)
{
    if (job->running || job->s[0].open || job->s[1].open)
        return;
    hr_output_end(&job->out);
    if (hr_output_pending(&job->out) == 0)
        uv_stop(job->loop);
}

static void rank_done(struct mpijob *job, int rank, int kind, int32_t code)
{
    struct hr_rank_state *rs = &job->ranks[rank];
    if (rs->done)
        return;
    rs->done = 1;
    rs->kind = (uint8_t)kind;
    rs->code = code;
    if (kind == HVD_EXIT_CODE && code == 0)
        return;
    /* mpirun stops the other ranks with SIGTERM and SIGKILL after a
     * failure or a signal of ours: those deaths are not failures. */
    int stopped = kind == HVD_EXIT_SIGNAL &&
                  (code == SIGTERM || code == SIGKILL) &&
                  (job->failed_rank >= 0 || job->interrupt_sig);
    /* A rank killed by a signal soon after a rank exited with an error
     * code is named instead (the exit is usually its echo): job.c's rule. */
    int cause = kind == HVD_EXIT_SIGNAL && code != SIGTERM &&
                hr_summary_is_cause(job->ranks, job->failed_rank,
                                    job->failed_at, job->interrupt_sig,
                                    uv_now(job->loop), job->opts->kill_grace);
    if (!stopped && (job->failed_rank < 0 || cause)) {
        job->failed_rank = rank;
        job->failed_at = uv_now(job->loop);
    }
}

static void hold(struct mpijob *job, const char *text, size_t len)
{
    if (job->held.len + len + 1 > HELD_MAX) {
        job->held_cut = 1;
        return;
    }
    if (hr_mpibuf_reserve(&job->held, len + 1) != 0)
        return;
    memcpy(job->held.p + job->held.len, text, len);
    job->held.len += len;
    job->held.p[job->held.len++] = '\n';
}

/* One record of rank's hvd-mpi-rank. */
static void handle_record(struct mpijob *job, int rank, char *text, size_t len)
{
    struct hr_mpirec rec;
    if (hr_mpiwire_parse(text, len, &rec) != 0) {
        /* Not from hvd-mpi-rank (another program in --mpi-args?): shown
         * as the rank's output. */
        hr_output_line(&job->out, (uint32_t)rank, HVD_STREAM_STDOUT,
                       HVD_TERM_LF, text, len);
        return;
    }
    switch (rec.type) {
    case 'h':
        job->hellos++;
        job->local_rank[rank] = rec.local_rank;
        hr_output_relabel(&job->out, (uint32_t)rank, rec.local_rank);
        free(job->host[rank]);
        job->host[rank] = strndup(rec.text, rec.len);
        break;
    case 'o':
    case 'e':
        hr_output_line(&job->out, (uint32_t)rank, rec.stream, rec.term,
                       rec.text, rec.len);
        break;
    case 'x':
        rank_done(job, rank, rec.kind, rec.code);
        break;
    }
}

/* One whole line of mpirun's output: a record (stdout), a line that a
 * rank's hvd-mpi-rank wrote to stderr, or mpirun's own. */
static void handle_line(struct mpistream *s, int idx, char *text, size_t len,
                        int term)
{
    struct mpijob *job = s->job;
    if (idx == job->plan->size) {
        if (s->stream == HVD_STREAM_STDOUT || hvd_log_verbose())
            hr_output_raw(&job->out, s->stream, text, len);
        else
            hold(job, text, len);
    } else if (s->stream == HVD_STREAM_STDOUT && term == HVD_TERM_LF) {
        handle_record(job, idx, text, len);
    } else {
        hr_output_line(&job->out, (uint32_t)idx, s->stream, term, text, len);
    }
}

static void on_piece(void *ctx, int rank, const char *data, size_t len, int eol)
{
    struct mpistream *s = ctx;
    int size = s->job->plan->size;
    int idx = rank >= 0 && rank < size ? rank : size;
    struct hr_mpibuf *b = &s->lines[idx];
    /* A record holds a line of at most AGENT_LINE_MAX bytes, each byte
     * escaped to at most three. */
    size_t max = s->stream == HVD_STREAM_STDOUT && idx < size
                     ? 3 * (size_t)AGENT_LINE_MAX + 16
                     : AGENT_LINE_MAX;
    while (len > 0 || eol) {
        size_t take = len < max - b->len ? len : max - b->len;
        if (hr_mpibuf_reserve(b, take) != 0)
            return; /* out of memory: the piece is lost */
        if (take > 0)
            memcpy(b->p + b->len, data, take);
        b->len += take;
        data += take;
        len -= take;
        if (b->len == max && len > 0) {
            /* Longer than any line we make: shown in pieces. */
            handle_line(s, idx, b->p, b->len, HVD_TERM_NONE);
            b->len = 0;
            continue;
        }
        if (eol) {
            handle_line(s, idx, b->p ? b->p : "", b->len, HVD_TERM_LF);
            b->len = 0;
            if (b->cap > 1024 * 1024)
                hr_mpibuf_close(b); /* a long line's buffer goes back */
        }
        break;
    }
}

static void close_stream(struct mpistream *s)
{
    if (!s->open)
        return;
    s->open = 0;
    hr_mpitag_finish(&s->tag, on_piece, s);
    /* What was cut off by mpirun's end. */
    for (int i = 0; i <= s->job->plan->size; i++)
        if (s->lines[i].len > 0) {
            handle_line(s, i, s->lines[i].p, s->lines[i].len, HVD_TERM_NONE);
            s->lines[i].len = 0;
        }
    uv_close((uv_handle_t *)&s->pipe, NULL);
    hr_output_flush(&s->job->out);
    maybe_end(s->job);
}

static char readbuf[65536];

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h, (void)hint;
    *buf = uv_buf_init(readbuf, sizeof(readbuf));
}

static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
    struct mpistream *s = h->data;
    if (n < 0) {
        close_stream(s);
        return;
    }
    hr_mpitag_feed(&s->tag, buf->base, (size_t)n, on_piece, s);
    hr_output_flush(&s->job->out);
}

static void on_output_pause(void *arg, int pause)
{
    struct mpijob *job = arg;
    for (int k = 0; k < 2; k++) {
        if (!job->s[k].open)
            continue;
        if (pause)
            uv_read_stop((uv_stream_t *)&job->s[k].pipe);
        else
            uv_read_start((uv_stream_t *)&job->s[k].pipe, alloc_cb, on_read);
    }
}

static void on_output_idle(void *arg)
{
    maybe_end(arg);
}

static void close_stdin(struct mpijob *job)
{
    if (!job->in_open)
        return;
    job->in_open = 0;
    uv_close((uv_handle_t *)&job->in, NULL);
}

static void on_stdin_written(uv_write_t *req, int status)
{
    struct mpijob *job = req->data;
    if (status != 0)
        close_stdin(job); /* rank 0 or mpirun no longer reads it */
    else if (job->in_open)
        hr_stdin_read(&job->stdin_reader);
}

/* As job.c: horovodrun's stdin goes to rank 0, here through mpirun; the
 * next read starts once mpirun has taken the block. */
static void on_stdin(struct hr_stdin *in, const char *buf, size_t n)
{
    struct mpijob *job = in->data;
    if (!job->in_open)
        return;
    if (n == 0) {
        close_stdin(job);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)n);
    job->stdin_write.data = job;
    if (uv_write(&job->stdin_write, (uv_stream_t *)&job->in, &b, 1,
                 on_stdin_written) != 0)
        close_stdin(job);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct mpijob *job = p->data;
    job->running = 0;
    job->status = status;
    job->term_signal = sig;
    uv_timer_stop(&job->stop_timer);
    uv_close((uv_handle_t *)p, NULL);
    close_stdin(job);
    maybe_end(job);
}

static void on_stop_timeout(uv_timer_t *t)
{
    struct mpijob *job = t->data;
    if (!job->running)
        return;
    hvd_log_warn("mpirun did not stop the job in time: killing it");
    uv_process_kill(&job->proc, SIGKILL);
}

/* A signal, or a stop request through a detached job's socket (how says
 * which): forwarded to mpirun; a second one kills it and the ranks. */
static void interrupt(struct mpijob *job, int sig, const char *how)
{
    if (!job->running)
        return;
    if (++job->signals_seen > 1) {
        /* Its ranks die with it: hvd-mpi-rank ends them (on this host)
         * and Open MPI's daemons theirs (on the others). */
        hvd_log_warn("%s again: killing mpirun and every rank now", how);
        uv_process_kill(&job->proc, SIGKILL);
        return;
    }
    job->interrupt_sig = sig;
    hvd_log_warn("%s; forwarding it to mpirun, which stops every rank "
                 "(again to kill them at once)",
                 how);
    uv_process_kill(&job->proc, sig);
    uint64_t ms =
        2 * 1000 * (uint64_t)hr_mpicmd_stop_step(job->opts) + STOP_SLACK_MS;
    uv_timer_start(&job->stop_timer, on_stop_timeout, ms, 0);
}

static void on_signal(uv_signal_t *h, int sig)
{
    char how[64];
    snprintf(how, sizeof(how), "received %s", hr_summary_signame(sig));
    interrupt(h->data, sig, how);
}

/* horovodrun stop JOB, or Ctrl-C in horovodrun attach. */
static void on_stop_request(void *arg, int now)
{
    struct mpijob *job = arg;
    if (now && job->running) {
        hvd_log_warn("stop --now requested: killing mpirun and every rank "
                     "now");
        job->signals_seen = 2;
        if (job->interrupt_sig == 0)
            job->interrupt_sig = SIGTERM;
        uv_process_kill(&job->proc, SIGKILL);
        return;
    }
    interrupt(job, SIGTERM, "stop requested (SIGTERM)");
}

static void print_held(struct mpijob *job)
{
    if (job->held.len == 0)
        return;
    fflush(stdout);
    fwrite(job->held.p, 1, job->held.len, stderr);
    if (job->held_cut)
        fprintf(stderr, "[... more output of mpirun was cut ...]\n");
    fflush(stderr);
}

static int summarize(struct mpijob *job)
{
    char why[64] = "";
    if (job->interrupt_sig)
        snprintf(why, sizeof(why),
                 "interrupted by %s: ", hr_summary_signame(job->interrupt_sig));
    if (job->failed_rank >= 0) {
        int r = job->failed_rank;
        const struct hr_rank_state *rs = &job->ranks[r];
        const char *host =
            job->host[r] ? job->host[r]
                         : job->hosts->hosts[job->plan->ranks[r].host].name;
        return hr_summary_rank(why, r, host, job->local_rank[r], rs->kind,
                               rs->code, job->opts->cmd[0]);
    }
    if (job->interrupt_sig) {
        hvd_log_error("%severy rank was stopped", why);
        return 128 + job->interrupt_sig;
    }
    if (job->term_signal == 0 && job->status == 0)
        return HR_EXIT_OK;
    char how[64];
    if (job->term_signal)
        snprintf(how, sizeof(how), "was killed by signal %d (%s)",
                 job->term_signal, hr_summary_signame(job->term_signal));
    else
        snprintf(how, sizeof(how), "exited with status %lld",
                 (long long)job->status);
    print_held(job);
    if (job->hellos == 0) {
        hvd_log_error("mpirun %s before any rank started%s", how,
                      job->held.len ? "; its messages are above" : "");
        return HR_EXIT_PREFLIGHT;
    }
    hvd_log_error("mpirun %s though no rank failed%s", how,
                  job->held.len ? "; its messages are above" : "");
    return HR_EXIT_INTERNAL;
}

/* What the ranks get that is the same for all: set here, exported by
 * name with -x (see mpicmd.c). */
static void set_job_env(const struct hvd_hostlist *hl, const struct hvd_plan *p)
{
    char port[16];
    int free_port = hr_free_port();
    setenv(HVD_ENV_CONTROLLER, "mpi", 1);
    setenv(HVD_ENV_TORCH_MASTER_ADDR, hl->hosts[p->ranks[0].host].name, 1);
    if (free_port > 0) {
        snprintf(port, sizeof(port), "%d", free_port);
        setenv(HVD_ENV_TORCH_MASTER_PORT, port, 1);
    }
    setenv(HVD_ENV_PYTHONUNBUFFERED, "1", 1);
    /* No rendezvous, so no secret: an inherited one stays out of mpirun's
     * environment. */
    unsetenv(HVD_ENV_SECRET);
}

/* The command line, quoted, on stderr with --verbose. */
static void show_command(char *const *argv)
{
    if (!hvd_log_verbose())
        return;
    char *line = hr_shell_join(argv);
    if (line) {
        fprintf(stderr, "horovodrun: mpirun command: %s\n", line);
        fflush(stderr);
    }
    free(line);
}

static int start_mpirun(struct mpijob *job, char *const *argv)
{
    uv_stdio_container_t stdio[3];
    uv_pipe_init(job->loop, &job->in, 0);
    job->in_open = 1;
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&job->in;
    for (int k = 0; k < 2; k++) {
        struct mpistream *s = &job->s[k];
        s->job = job;
        s->stream = k == 0 ? HVD_STREAM_STDOUT : HVD_STREAM_STDERR;
        hr_mpitag_init(&s->tag);
        uv_pipe_init(job->loop, &s->pipe, 0);
        s->pipe.data = s;
        s->open = 1;
        stdio[k + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        stdio[k + 1].data.stream = (uv_stream_t *)&s->pipe;
    }
    /* Detached: a Ctrl-C at the terminal reaches horovodrun only, which
     * forwards it once. */
    uv_process_options_t po = {
        .exit_cb = on_exit_cb,
        .file = argv[0],
        .args = (char **)argv,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    job->proc.data = job;
    int e = uv_spawn(job->loop, &job->proc, &po);
    if (e != 0) {
        hvd_log_error("cannot start %s: %s", argv[0], uv_strerror(e));
        uv_close((uv_handle_t *)&job->proc, NULL);
        return HR_EXIT_INTERNAL;
    }
    job->running = 1;
    hvd_log_info("mpirun started (pid %d) for %d ranks", job->proc.pid,
                 job->plan->size);
    for (int k = 0; k < 2; k++)
        uv_read_start((uv_stream_t *)&job->s[k].pipe, alloc_cb, on_read);
    if (job->in_open)
        hr_stdin_read(&job->stdin_reader);
    return 0;
}

/* Everything before the loop; 0 or horovodrun's exit code. */
static int setup(struct mpijob *job, struct hr_mpicmd *cmd)
{
    const struct hr_opts *o = job->opts;
    char mpirun[PATH_MAX], wrapper[PATH_MAX], err[512];
    int rc;

    if (!HVD_HAVE_MPI) {
        hvd_log_error("--mpi needs a build with MPI, and this one has none; "
                      "rebuild with Open MPI (libopenmpi-dev) and "
                      "-Dmpi=enabled, or drop --mpi");
        return HR_EXIT_USAGE;
    }
    if (hvd_spawn_resolve("mpirun", environ, mpirun, sizeof(mpirun)) != 0) {
        hvd_log_error("--mpi needs Open MPI's mpirun, and there is none on "
                      "PATH; install Open MPI or drop --mpi");
        return HR_EXIT_USAGE;
    }
    if (hr_link_sibling_path("hvd-mpi-rank", wrapper, sizeof(wrapper)) != 0 ||
        access(wrapper, X_OK) != 0) {
        hvd_log_error("cannot find hvd-mpi-rank next to horovodrun; "
                      "reinstall horovodrun");
        return HR_EXIT_INTERNAL;
    }
    if (o->agent_path)
        hvd_log_warn("--agent-path does nothing under --mpi");
    if (o->rendezvous_addr)
        hvd_log_warn("--rendezvous-addr does nothing under --mpi");
    set_job_env(job->hosts, job->plan);
    rc = hr_mpicmd_build(cmd, mpirun, wrapper, o, job->hosts, job->plan, err,
                         sizeof(err));
    if (rc != 0) {
        hvd_log_error("%s", err);
        return rc == HVD_EPARSE ? HR_EXIT_USAGE : HR_EXIT_INTERNAL;
    }
    show_command(cmd->argv.v);
    rc = hr_output_init(&job->out, job->loop, job->plan, o, err, sizeof(err));
    if (rc != 0) {
        hvd_log_error("%s", rc == HVD_ENOMEM ? "out of memory" : err);
        return rc == HVD_ENOMEM ? HR_EXIT_INTERNAL : HR_EXIT_USAGE;
    }
    job->out.on_pause = on_output_pause;
    job->out.on_idle = on_output_idle;
    job->out.arg = job;
    /* Before mpirun holds horovodrun's stderr. */
    if (job->detach &&
        (rc = hr_detach_serve(job->detach, o, job->loop, job->plan, &job->out,
                              on_stop_request, job, &job->serve)) != 0)
        return rc;

    int n = job->plan->size;
    job->ranks = calloc((size_t)n, sizeof(*job->ranks));
    job->local_rank = calloc((size_t)n, sizeof(*job->local_rank));
    job->host = calloc((size_t)n, sizeof(*job->host));
    job->s[0].lines = calloc((size_t)n + 1, sizeof(struct hr_mpibuf));
    job->s[1].lines = calloc((size_t)n + 1, sizeof(struct hr_mpibuf));
    if (!job->ranks || !job->local_rank || !job->host || !job->s[0].lines ||
        !job->s[1].lines) {
        hvd_log_error("out of memory for %d ranks", n);
        return HR_EXIT_INTERNAL;
    }
    for (int r = 0; r < n; r++)
        job->local_rank[r] = job->plan->ranks[r].local_rank;

    uv_timer_init(job->loop, &job->stop_timer);
    job->stop_timer.data = job;
    uv_signal_t *const sigs[] = {&job->sigint, &job->sigterm, &job->sighup};
    static const int signums[] = {SIGINT, SIGTERM, SIGHUP};
    hr_loop_signals(job->loop, sigs, signums, 3, job, on_signal, 0);
    return start_mpirun(job, cmd->argv.v);
}

int hr_mpirun_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
                  const struct hvd_plan *plan, struct hr_detach *d)
{
    struct mpijob job = {0};
    struct hr_mpicmd cmd = {0};
    int rc;

    job.loop = uv_default_loop();
    hr_stdin_init(&job.stdin_reader, job.loop, on_stdin, &job);
    job.opts = o;
    job.hosts = hosts;
    job.plan = plan;
    job.failed_rank = -1;
    job.detach = d;
    signal(SIGPIPE, SIG_IGN);

    rc = setup(&job, &cmd);
    if (rc == 0) {
        hr_output_take_log(&job.out, 1);
        uv_run(job.loop, UV_RUN_DEFAULT);
        hr_output_take_log(&job.out, 0);
        rc = summarize(&job);
    }
    if (job.serve)
        hr_serve_end(job.serve, rc);
    hr_mpicmd_close(&cmd);
    hr_loop_close_all(job.loop, UV_RUN_NOWAIT);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; job.s[k].lines && i <= plan->size; i++)
            hr_mpibuf_close(&job.s[k].lines[i]);
        free(job.s[k].lines);
    }
    for (int r = 0; job.host && r < plan->size; r++)
        free(job.host[r]);
    free(job.host);
    free(job.local_rank);
    free(job.ranks);
    hr_mpibuf_close(&job.held);
    hr_output_close(&job.out);
    return hr_loop_finish(
        job.loop, job.stdin_reader.busy || hr_output_busy(&job.out), rc);
}
