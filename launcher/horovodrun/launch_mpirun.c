/* The mpirun launch (--mpi): Open MPI's mpirun, its output made ours. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/envc.h"
#include "hvd_build.h"
#include "launcher/horovodrun/job.h"
#include "launcher/horovodrun/mpicmd.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/mpiwire.h"
#include "launcher/lib/net.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/rankpipe.h"
#include "launcher/lib/spawn.h"
#include "launcher/lib/strvec.h"
#include "launcher/link/link.h"

extern char **environ;

/* mpirun's own stderr kept for a failure that no rank explains. */
#define HELD_MAX (64u * 1024)
/* How long mpirun gets to stop the ranks, beyond its SIGCONT, SIGTERM,
 * SIGKILL steps, before it is killed; and to end once killed. */
#define STOP_SLACK_MS 10000

struct mpirun;

/* mpirun's stdout (records) or stderr (raw lines). */
struct mpistream {
    struct mpirun *m;
    int stream; /* HVD_STREAM_STDOUT or HVD_STREAM_STDERR */
    uv_pipe_t pipe;
    int open;
    struct hr_mpitag tag;
    /* Unfinished lines: one per rank, then mpirun's own. */
    struct hr_mpibuf *lines;
};

/* The mpirun launch's state (job->launch). */
struct mpirun {
    struct hr_job *job;
    struct hr_mpicmd cmd;
    char wrapper[PATH_MAX]; /* hvd-mpi-rank, which also starts mpirun */
    uv_process_t proc;
    int running;
    int64_t status;
    int term_signal;
    struct mpistream s[2];
    uv_pipe_t in; /* mpirun's stdin, which it hands to rank 0 */
    int in_open;
    uv_write_t stdin_write;
    int *local_rank; /* as the rank's hello said */
    char **host;     /* as the rank's hello said; NULL: the plan's */
    int hellos;
    struct hr_mpibuf held; /* mpirun's own stderr */
    int held_cut;
};

static void maybe_end(struct mpirun *m)
{
    if (!m->running && !m->s[0].open && !m->s[1].open)
        hr_job_ended(m->job);
}

static void hold(struct mpirun *m, const char *text, size_t len)
{
    if (m->held.len + len + 1 > HELD_MAX) {
        m->held_cut = 1;
        return;
    }
    if (hr_mpibuf_reserve(&m->held, len + 1) != 0)
        return;
    memcpy(m->held.p + m->held.len, text, len);
    m->held.len += len;
    m->held.p[m->held.len++] = '\n';
}

/* One record of rank's hvd-mpi-rank. */
static void handle_record(struct mpirun *m, int rank, char *text, size_t len)
{
    struct hr_output *out = &m->job->out;
    struct hr_mpirec rec;
    if (hr_mpiwire_parse(text, len, &rec) != 0) {
        /* Not from hvd-mpi-rank (another program in --mpi-args?): shown
         * as the rank's output. */
        hr_output_line(out, (uint32_t)rank, HVD_STREAM_STDOUT, HVD_TERM_LF,
                       text, len);
        return;
    }
    switch (rec.type) {
    case 'h':
        m->hellos++;
        m->local_rank[rank] = rec.local_rank;
        hr_output_relabel(out, (uint32_t)rank, rec.local_rank);
        free(m->host[rank]);
        m->host[rank] = strndup(rec.text, rec.len);
        break;
    case 'o':
    case 'e':
        hr_output_line(out, (uint32_t)rank, rec.stream, rec.term, rec.text,
                       rec.len);
        break;
    case 'x':
        hr_job_rank_done(m->job, (uint32_t)rank, (uint8_t)rec.kind, rec.code);
        break;
    }
}

/* One whole line of mpirun's output: a record (stdout), a line that a
 * rank's hvd-mpi-rank wrote to stderr, or mpirun's own. */
static void handle_line(struct mpistream *s, int idx, char *text, size_t len,
                        int term)
{
    struct mpirun *m = s->m;
    if (idx == m->job->plan->size) {
        if (s->stream == HVD_STREAM_STDOUT || hvd_log_verbose())
            hr_output_raw(&m->job->out, s->stream, text, len);
        else
            hold(m, text, len);
    } else if (s->stream == HVD_STREAM_STDOUT && term == HVD_TERM_LF) {
        handle_record(m, idx, text, len);
    } else {
        hr_output_line(&m->job->out, (uint32_t)idx, s->stream, term, text, len);
    }
}

static void on_piece(void *ctx, int rank, const char *data, size_t len, int eol)
{
    struct mpistream *s = ctx;
    int size = s->m->job->plan->size;
    int idx = rank >= 0 && rank < size ? rank : size;
    struct hr_mpibuf *b = &s->lines[idx];
    /* A record holds a line of at most HR_RANKPIPE_LINE_MAX bytes, each
     * byte escaped to at most three. */
    size_t max = s->stream == HVD_STREAM_STDOUT && idx < size
                     ? 3 * (size_t)HR_RANKPIPE_LINE_MAX + 16
                     : HR_RANKPIPE_LINE_MAX;
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
    for (int i = 0; i <= s->m->job->plan->size; i++)
        if (s->lines[i].len > 0) {
            handle_line(s, i, s->lines[i].p, s->lines[i].len, HVD_TERM_NONE);
            s->lines[i].len = 0;
        }
    uv_close((uv_handle_t *)&s->pipe, NULL);
    hr_output_flush(&s->m->job->out);
    maybe_end(s->m);
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
    hr_output_flush(&s->m->job->out);
}

static void mpirun_pause(struct hr_job *job, int pause)
{
    struct mpirun *m = job->launch;
    for (int k = 0; k < 2; k++) {
        if (!m->s[k].open)
            continue;
        if (pause)
            uv_read_stop((uv_stream_t *)&m->s[k].pipe);
        else
            uv_read_start((uv_stream_t *)&m->s[k].pipe, alloc_cb, on_read);
    }
}

static void close_stdin(struct mpirun *m)
{
    if (!m->in_open)
        return;
    m->in_open = 0;
    uv_close((uv_handle_t *)&m->in, NULL);
}

static void on_stdin_written(uv_write_t *req, int status)
{
    struct mpirun *m = req->data;
    if (status != 0)
        close_stdin(m); /* rank 0 or mpirun no longer reads it */
    else if (m->in_open)
        hr_job_read_stdin(m->job);
}

/* mpirun hands its stdin to rank 0. */
static void mpirun_write_stdin(struct hr_job *job, const char *buf, size_t n)
{
    struct mpirun *m = job->launch;
    if (!m->in_open)
        return;
    if (n == 0) {
        close_stdin(m);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)n);
    m->stdin_write.data = m;
    if (uv_write(&m->stdin_write, (uv_stream_t *)&m->in, &b, 1,
                 on_stdin_written) != 0)
        close_stdin(m);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct mpirun *m = p->data;
    m->running = 0;
    m->status = status;
    m->term_signal = sig;
    uv_close((uv_handle_t *)p, NULL);
    close_stdin(m);
    maybe_end(m);
}

/* How long mpirun takes to stop the ranks: its steps, and the slack. */
static uint64_t stop_time(const struct hr_job *job)
{
    return 2 * 1000 * (uint64_t)hr_mpicmd_stop_step(job->opts) + STOP_SLACK_MS;
}

/* mpirun stops every rank on the signal (SIGCONT, SIGTERM, SIGKILL). */
static uint64_t mpirun_signal(struct hr_job *job, int sig)
{
    struct mpirun *m = job->launch;
    if (m->running)
        uv_process_kill(&m->proc, sig);
    return stop_time(job);
}

/* After a failure mpirun stops the other ranks itself. Killed, its ranks
 * die with it: hvd-mpi-rank ends them (on this host) and Open MPI's
 * daemons theirs (on the others). */
static uint64_t mpirun_stop(struct hr_job *job, int now)
{
    struct mpirun *m = job->launch;
    if (!now)
        return stop_time(job);
    if (m->running)
        uv_process_kill(&m->proc, SIGKILL);
    return STOP_SLACK_MS;
}

static void mpirun_place(const struct hr_job *job, int rank, const char **host,
                         int *local_rank)
{
    const struct mpirun *m = job->launch;
    if (m->host[rank])
        *host = m->host[rank];
    *local_rank = m->local_rank[rank];
}

static void print_held(struct mpirun *m)
{
    if (m->held.len == 0)
        return;
    fflush(stdout);
    fwrite(m->held.p, 1, m->held.len, stderr);
    if (m->held_cut)
        fprintf(stderr, "[... more output of mpirun was cut ...]\n");
    fflush(stderr);
}

/* mpirun failed though no rank did and no signal of ours stopped it: its
 * own messages, then what it did. */
static int mpirun_failure(struct hr_job *job)
{
    struct mpirun *m = job->launch;
    if (job->failed_rank >= 0 || job->interrupt_sig ||
        (m->term_signal == 0 && m->status == 0))
        return -1;
    char how[64];
    if (m->term_signal)
        snprintf(how, sizeof(how), "was killed by signal %d (%s)",
                 m->term_signal, hr_summary_signame(m->term_signal));
    else
        snprintf(how, sizeof(how), "exited with status %lld",
                 (long long)m->status);
    print_held(m);
    if (m->hellos == 0) {
        hvd_log_error("mpirun %s before any rank started%s", how,
                      m->held.len ? "; its messages are above" : "");
        return HR_EXIT_PREFLIGHT;
    }
    hvd_log_error("mpirun %s though no rank failed%s", how,
                  m->held.len ? "; its messages are above" : "");
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

/* Starts mpirun through hvd-mpi-rank --tied, which ends it with SIGTERM
 * when horovodrun dies, even by SIGKILL. */
static int spawn_mpirun(struct mpirun *m, char *const *cmd)
{
    uv_loop_t *loop = m->job->loop;
    uv_stdio_container_t stdio[3];
    struct hvd_strvec argv;

    hvd_strvec_init(&argv);
    int e = hvd_strvec_push(&argv, m->wrapper) ||
            hvd_strvec_push(&argv, "--tied") ||
            hvd_strvec_pushf(&argv, "%ld", (long)getpid()) ||
            hvd_strvec_push(&argv, "--");
    for (size_t k = 0; cmd[k] && !e; k++)
        e = hvd_strvec_push(&argv, cmd[k]);
    if (e) {
        hvd_strvec_close(&argv);
        hvd_log_error("out of memory for the mpirun command");
        return HR_EXIT_INTERNAL;
    }
    uv_pipe_init(loop, &m->in, 0);
    m->in_open = 1;
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&m->in;
    for (int k = 0; k < 2; k++) {
        struct mpistream *s = &m->s[k];
        s->m = m;
        s->stream = k == 0 ? HVD_STREAM_STDOUT : HVD_STREAM_STDERR;
        hr_mpitag_init(&s->tag);
        uv_pipe_init(loop, &s->pipe, 0);
        s->pipe.data = s;
        s->open = 1;
        stdio[k + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        stdio[k + 1].data.stream = (uv_stream_t *)&s->pipe;
    }
    /* Detached: a Ctrl-C at the terminal reaches horovodrun only, which
     * forwards it once. */
    uv_process_options_t po = {
        .exit_cb = on_exit_cb,
        .file = argv.v[0],
        .args = argv.v,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    m->proc.data = m;
    e = uv_spawn(loop, &m->proc, &po);
    hvd_strvec_close(&argv);
    if (e != 0) {
        hvd_log_error("cannot start %s: %s", cmd[0], uv_strerror(e));
        uv_close((uv_handle_t *)&m->proc, NULL);
        return HR_EXIT_INTERNAL;
    }
    m->running = 1;
    hvd_log_info("mpirun started (pid %d) for %d ranks", m->proc.pid,
                 m->job->plan->size);
    for (int k = 0; k < 2; k++)
        uv_read_start((uv_stream_t *)&m->s[k].pipe, alloc_cb, on_read);
    if (m->in_open)
        hr_job_read_stdin(m->job);
    return 0;
}

/* Finds mpirun and hvd-mpi-rank and builds the command line, before
 * anything holds horovodrun's stderr; 0 or horovodrun's exit code. */
static int prepare(struct mpirun *m)
{
    const struct hr_job *job = m->job;
    const struct hr_opts *o = job->opts;
    char mpirun[PATH_MAX], err[512];

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
    if (hr_link_sibling_path("hvd-mpi-rank", m->wrapper, sizeof(m->wrapper)) !=
            0 ||
        access(m->wrapper, X_OK) != 0) {
        hvd_log_error("cannot find hvd-mpi-rank next to horovodrun; "
                      "reinstall horovodrun");
        return HR_EXIT_INTERNAL;
    }
    if (o->agent_path)
        hvd_log_warn("--agent-path does nothing under --mpi");
    if (o->rendezvous_addr)
        hvd_log_warn("--rendezvous-addr does nothing under --mpi");
    set_job_env(job->hosts, job->plan);
    int rc = hr_mpicmd_build(&m->cmd, mpirun, m->wrapper, o, job->hosts,
                             job->plan, err, sizeof(err));
    if (rc != 0) {
        hvd_log_error("%s", err);
        return rc == HVD_EPARSE ? HR_EXIT_USAGE : HR_EXIT_INTERNAL;
    }
    show_command(m->cmd.argv.v);
    return 0;
}

static int mpirun_start(struct hr_job *job)
{
    struct mpirun *m = job->launch;
    int rc;

    m->job = job;
    if ((rc = prepare(m)) != 0 || (rc = hr_job_open(job)) != 0)
        return rc;
    int n = job->plan->size;
    m->local_rank = calloc((size_t)n, sizeof(*m->local_rank));
    m->host = calloc((size_t)n, sizeof(*m->host));
    m->s[0].lines = calloc((size_t)n + 1, sizeof(struct hr_mpibuf));
    m->s[1].lines = calloc((size_t)n + 1, sizeof(struct hr_mpibuf));
    if (!m->local_rank || !m->host || !m->s[0].lines || !m->s[1].lines) {
        hvd_log_error("out of memory for %d ranks", n);
        return HR_EXIT_INTERNAL;
    }
    for (int r = 0; r < n; r++)
        m->local_rank[r] = job->plan->ranks[r].local_rank;
    return spawn_mpirun(m, m->cmd.argv.v);
}

static void mpirun_close(struct hr_job *job)
{
    struct mpirun *m = job->launch;
    hr_mpicmd_close(&m->cmd); /* removes our temporary hostfile */
}

static void mpirun_free(struct hr_job *job)
{
    struct mpirun *m = job->launch;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; m->s[k].lines && i <= job->plan->size; i++)
            hr_mpibuf_close(&m->s[k].lines[i]);
        free(m->s[k].lines);
    }
    for (int r = 0; m->host && r < job->plan->size; r++)
        free(m->host[r]);
    free(m->host);
    free(m->local_rank);
    hr_mpibuf_close(&m->held);
}

const struct hr_launch_ops hr_launch_mpirun = {
    .forward_to = "mpirun, which stops every rank",
    .kill_all = "mpirun and every rank",
    .all_stopped = "every rank was stopped",
    .stop_late = "mpirun did not stop the job in time: killing it",
    .no_answer = "mpirun did not end once killed",
    .stops_ranks = 1,
    .size = sizeof(struct mpirun),
    .start = mpirun_start,
    .signal = mpirun_signal,
    .stop = mpirun_stop,
    .write_stdin = mpirun_write_stdin,
    .pause = mpirun_pause,
    .place = mpirun_place,
    .failure = mpirun_failure,
    .close = mpirun_close,
    .free = mpirun_free,
};
