/* horovodrun logs, attach and stop: a reader of a detached job. */
#include "launcher/horovodrun/client.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/horovodrun/cli.h"
#include "common/frame.h"
#include "common/wire.h"
#include "launcher/horovodrun/ctl.h"
#include "launcher/lib/errcode.h"
#include "launcher/horovodrun/jobdir.h"
#include "launcher/horovodrun/keep.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/log.h"
#include "launcher/lib/loop.h"
#include "launcher/horovodrun/output.h"
#include "launcher/lib/proto.h"
#include "launcher/horovodrun/summary.h"
#include "launcher/horovodrun/tty.h"

enum mode { LOGS, ATTACH, STOP };

struct reader {
    enum mode mode;
    int follow, rank;
    long tail;
    int now; /* stop: SIGKILL at once */
    struct hr_opts opts;
    char root[PATH_MAX], id[HR_JOB_ID_LEN + 1];
    uv_loop_t *loop;
    uv_pipe_t pipe;
    uv_connect_t conn;
    uv_signal_t sigint;
    int sigs;
    struct hvd_frame_reader frames;
    struct hvd_plan plan;
    struct hr_output out;
    int out_ready;
    int ended, code; /* the job's end was seen, and its exit code */
    int failed;      /* refused, or the controller went away */
    char summary[512];
    struct hr_keep file; /* an ended job's kept lines, filtered here */
    int from_file;
};

static const char *usage[] = {
    [LOGS] = "usage: horovodrun logs [-f] [--rank R] [--tail N] "
             "[--color WHEN] [--no-tty-status] JOB",
    [ATTACH] = "usage: horovodrun attach [--rank R] [--tail N] "
               "[--color WHEN] [--no-tty-status] JOB",
    [STOP] = "usage: horovodrun stop [--now] JOB",
};

int hr_client_is_command(const char *word)
{
    static const char *const cmds[] = {"ps", "logs", "attach", "stop"};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(word, cmds[i]) == 0)
            return 1;
    return 0;
}

static void on_idle(void *arg)
{
    struct reader *r = arg;
    if (r->ended || r->failed)
        uv_stop(r->loop);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b);

/* The terminal is behind: stop reading the job, which skips lines for
 * this reader if it must instead of waiting for it. */
static void on_pause(void *arg, int pause)
{
    struct reader *r = arg;
    if (r->from_file)
        return;
    if (pause)
        uv_read_stop((uv_stream_t *)&r->pipe);
    else
        uv_read_start((uv_stream_t *)&r->pipe, on_alloc, on_read);
}

/* The job's layout: ranks and their local ranks, for the prefixes. */
static int on_hello(struct reader *r, struct hvd_rbuf *rb)
{
    char *id = hvd_rbuf_strdup(rb);
    uint32_t size = hvd_rbuf_u32(rb);
    free(id);
    if (r->out_ready || rb->err || size == 0 || size > (1u << 20) ||
        (size_t)size * 4 > rb->len - rb->off)
        return -1;
    r->plan.ranks = calloc(size, sizeof(*r->plan.ranks));
    if (r->plan.ranks == NULL)
        return -1;
    r->plan.size = (int)size;
    for (uint32_t i = 0; i < size; i++) {
        r->plan.ranks[i].rank = (int)i;
        r->plan.ranks[i].local_rank = hvd_rbuf_i32(rb);
    }
    char err[256];
    if (hr_output_init(&r->out, r->loop, &r->plan, &r->opts, err,
                       sizeof(err)) != 0) {
        hvd_log_error("%s", err);
        return -1;
    }
    r->out.on_idle = on_idle;
    r->out.on_pause = on_pause;
    r->out.arg = r;
    r->out_ready = 1;
    hr_output_take_log(&r->out, 1);
    return 0;
}

static int show_line(void *arg, const struct hr_keep_line *l)
{
    struct reader *r = arg;
    if (r->mode == STOP)
        return 0;
    if (l->rank == HR_KEEP_SELF)
        hr_output_raw(&r->out, HVD_STREAM_STDERR, l->text, l->len);
    else
        hr_output_line(&r->out, l->rank, l->stream, l->term, l->text, l->len);
    return 0;
}

static void on_end(struct reader *r, struct hvd_rbuf *rb)
{
    r->code = hvd_rbuf_i32(rb);
    char *s = hvd_rbuf_strdup(rb);
    snprintf(r->summary, sizeof(r->summary), "%s", s ? s : "");
    free(s);
    if (r->from_file)
        hr_keep_each(&r->file, r->rank, r->tail, show_line, r);
    r->ended = 1;
    hr_output_end(&r->out);
}

/* One message from the job: 0, or -1 when it makes no sense. */
static int on_frame(struct reader *r, const struct hvd_frame *f)
{
    struct hvd_rbuf rb;
    hvd_rbuf_init(&rb, f->payload, f->len);
    if (f->type == HR_CTL_HELLO)
        return on_hello(r, &rb);
    if (f->type == HR_CTL_REFUSED) {
        char *why = hvd_rbuf_strdup(&rb);
        hvd_log_error("job %s refused this reader: %s", r->id, why ? why : "?");
        free(why);
        r->failed = 1;
        return 0;
    }
    if (!r->out_ready)
        return -1;
    if (f->type == HR_CTL_LINE) {
        struct hr_keep_line l;
        l.rank = hvd_rbuf_u32(&rb);
        l.stream = hvd_rbuf_u8(&rb);
        l.term = hvd_rbuf_u8(&rb);
        l.text = (const char *)hvd_rbuf_rest(&rb, &l.len);
        if (rb.err ||
            (l.stream != HVD_STREAM_STDOUT && l.stream != HVD_STREAM_STDERR) ||
            l.term > HVD_TERM_PREVIEW)
            return -1;
        if (r->from_file)
            return hr_keep_add(&r->file, &l);
        return show_line(r, &l);
    }
    if (f->type == HR_CTL_SKIPPED) {
        uint32_t n = hvd_rbuf_u32(&rb);
        hvd_log_warn("%u lines were skipped: this reader fell behind "
                     "(the job's files have every line)",
                     n);
        return 0;
    }
    if (f->type == HR_CTL_END) {
        on_end(r, &rb);
        return 0;
    }
    return -1;
}

/* Feeds bytes from the socket or the kept file: 0, or -1 on garbage. */
static int feed(struct reader *r, const char *buf, size_t n)
{
    struct hvd_frame f;
    int rc = hvd_frame_reader_push(&r->frames, buf, n);
    while (rc == 0 && !r->failed &&
           (rc = hvd_frame_reader_next(&r->frames, &f)) == 1)
        rc = on_frame(r, &f) == 0 ? 0 : -1;
    if (r->out_ready)
        hr_output_flush(&r->out);
    if (rc < 0) {
        hvd_log_error("job %s sent what this horovodrun cannot read; is it "
                      "another version?",
                      r->id);
        r->failed = 1;
    }
    return rc < 0 ? -1 : 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char buf[64 * 1024];
    (void)h;
    (void)suggested;
    *b = uv_buf_init(buf, sizeof(buf));
}

/* Ends the output (a progress block erased) and stops the loop once it
 * is written. */
static void leave(struct reader *r)
{
    if (r->out_ready) {
        hr_output_end(&r->out);
        hr_output_flush(&r->out);
    }
    if (!r->out_ready || hr_output_pending(&r->out) == 0)
        uv_stop(r->loop);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct reader *r = st->data;
    if (n > 0 && feed(r, b->base, (size_t)n) == 0)
        return;
    if (n == 0)
        return;
    uv_read_stop(st);
    if (n < 0 && !r->ended && !r->failed && r->follow) {
        hvd_log_error("job %s's controller went away before the job ended; "
                      "horovodrun ps says how it stands",
                      r->id);
        r->failed = 1;
    }
    r->ended = r->ended || !r->follow;
    leave(r);
}

static void send_ctl(struct reader *r, struct hr_ctl_frame f)
{
    uv_buf_t b = uv_buf_init((char *)f.p, (unsigned)f.len);
    if (f.p == NULL ||
        uv_try_write((uv_stream_t *)&r->pipe, &b, 1) != (int)f.len)
        hvd_log_error("cannot send the request to job %s", r->id);
    free(f.p);
}

static void on_sigint(uv_signal_t *h, int sig)
{
    struct reader *r = h->data;
    (void)sig;
    if (r->mode != ATTACH) {
        /* logs -f: leave, with the block erased. */
        r->failed = 1;
        r->code = 130;
        uv_read_stop((uv_stream_t *)&r->pipe);
        leave(r);
        return;
    }
    r->sigs++;
    hvd_log_warn(r->sigs == 1 ? "stopping job %s (Ctrl-C again to kill its "
                                "ranks at once)"
                              : "killing the ranks of job %s",
                 r->id);
    send_ctl(r, hr_ctl_stop(r->sigs > 1));
}

static void on_connect(uv_connect_t *req, int status)
{
    struct reader *r = req->data;
    if (status != 0) {
        r->failed = -1; /* not running: read its kept file instead */
        uv_stop(r->loop);
        return;
    }
    send_ctl(r, hr_ctl_logs(r->follow, r->rank, r->tail));
    if (r->mode == STOP)
        send_ctl(r, hr_ctl_stop(r->now));
    uv_read_start((uv_stream_t *)&r->pipe, on_alloc, on_read);
}

/* An ended job: its kept file, filtered here as the controller would. */
static int read_kept(struct reader *r, const struct hr_jobinfo *ji)
{
    char path[PATH_MAX], buf[64 * 1024];
    size_t n;
    hr_jobdir_path(path, sizeof(path), r->root, r->id, "kept");
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (ji->ended)
            hvd_log_error("job %s ended with exit code %d, and its output "
                          "is in %s",
                          r->id, ji->code, ji->output);
        else
            hvd_log_error("job %s's controller is gone without a word "
                          "(killed?); its output is in %s",
                          r->id, ji->output);
        return -1;
    }
    r->from_file = 1;
    hr_keep_init(&r->file, (uint32_t)ji->ranks);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && !r->failed)
        if (feed(r, buf, n) != 0)
            break;
    fclose(f);
    if (!r->ended && !r->failed) {
        hvd_log_error("%s is cut short", path);
        r->failed = 1;
    }
    return r->failed ? -1 : 0;
}

static int parse(struct reader *r, int argc, char **argv)
{
    static const struct option longs[] = {
        {"follow", no_argument, NULL, 'f'},
        {"rank", required_argument, NULL, 'r'},
        {"tail", required_argument, NULL, 'n'},
        {"color", required_argument, NULL, 'c'},
        {"no-tty-status", no_argument, NULL, 's'},
        {"now", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    char *end, err[256];
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+fn:h", longs, NULL)) != -1) {
        if ((r->mode == STOP) != (c == 'k') && c != 'h' && c != '?') {
            c = '?';
            optopt = 0;
        }
        switch (c) {
        case 'f':
            r->follow = 1;
            break;
        case 'r':
            errno = 0;
            r->rank = (int)strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || r->rank < 0) {
                hvd_log_error("--rank %s: expected a rank number", optarg);
                return HR_EXIT_USAGE;
            }
            break;
        case 'n':
            errno = 0;
            r->tail = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || r->tail < 0) {
                hvd_log_error("--tail %s: expected a number of lines", optarg);
                return HR_EXIT_USAGE;
            }
            break;
        case 'c':
        case 's':
            if (hr_cli_apply(&r->opts, c == 'c' ? "color" : "no-tty-status",
                             c == 'c' ? optarg : NULL, err, sizeof(err)) != 0) {
                hvd_log_error("%s", err);
                return HR_EXIT_USAGE;
            }
            break;
        case 'k':
            r->now = 1;
            break;
        case 'h':
            printf("%s\n", usage[r->mode]);
            return 0;
        default:
            hvd_log_error("%s: unknown option for %s; %s", argv[optind - 1],
                          argv[0], usage[r->mode]);
            return HR_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        hvd_log_error("%s", usage[r->mode]);
        return HR_EXIT_USAGE;
    }
    return -1;
}

static int run(struct reader *r, const char *job)
{
    char err[512], sock[PATH_MAX];
    struct hr_jobinfo ji;
    if (hr_jobdir_root(r->root, sizeof(r->root), 0, err, sizeof(err)) != 0 ||
        hr_jobdir_find(r->root, job, r->id, err, sizeof(err)) != 0) {
        hvd_log_error("%s", err);
        return HR_EXIT_USAGE;
    }
    if (hr_jobdir_read(r->root, r->id, &ji) != 0) {
        hvd_log_error("job %s has no info file in %s", r->id, r->root);
        return HR_EXIT_INTERNAL;
    }
    if (r->rank >= ji.ranks) {
        hvd_log_error("--rank %d: job %s has ranks 0 to %d", r->rank, r->id,
                      ji.ranks - 1);
        return HR_EXIT_USAGE;
    }
    hvd_frame_reader_init(&r->frames, HVD_FRAME_MAX);
    r->loop = uv_default_loop();
    uv_pipe_init(r->loop, &r->pipe, 0);
    r->pipe.data = r;
    r->conn.data = r;
    hr_jobdir_path(sock, sizeof(sock), r->root, r->id, "sock");
    uv_pipe_connect(&r->conn, &r->pipe, sock, on_connect);
    uv_signal_t *sigs[] = {&r->sigint};
    static const int signums[] = {SIGINT};
    if (r->follow)
        hr_loop_signals(r->loop, sigs, signums, 1, r, on_sigint, 0);
    uv_run(r->loop, UV_RUN_DEFAULT);
    int rc = 0;
    if (r->failed < 0) { /* not running */
        r->failed = 0;
        if (r->follow)
            uv_signal_stop(&r->sigint);
        if (r->mode == STOP) {
            if (ji.ended)
                fprintf(stderr,
                        "horovodrun: job %s had already ended (exit %d)\n",
                        r->id, ji.code);
            else
                hvd_log_error("job %s is not running", r->id);
            rc = ji.ended ? 0 : HR_EXIT_INTERNAL;
        } else if (read_kept(r, &ji) != 0) {
            rc = HR_EXIT_INTERNAL;
        }
        uv_run(r->loop, UV_RUN_DEFAULT);
    }
    if (r->out_ready)
        hr_output_take_log(&r->out, 0);
    if (rc == 0 && r->failed)
        rc = r->code ? r->code : HR_EXIT_INTERNAL;
    else if (rc == 0 && r->ended && r->mode == STOP)
        fprintf(stderr, "horovodrun: job %s ended with exit code %d%s%s\n",
                r->id, r->code, r->summary[0] ? ": " : "", r->summary);
    else if (rc == 0 && r->ended && r->follow)
        rc = r->code;
    hr_loop_close_all(r->loop, UV_RUN_DEFAULT);
    int stuck = r->out_ready && hr_output_busy(&r->out);
    if (r->out_ready)
        hr_output_close(&r->out);
    hr_keep_close(&r->file);
    hvd_frame_reader_close(&r->frames);
    free(r->plan.ranks);
    return hr_loop_finish(r->loop, stuck, rc);
}

int hr_client_main(int argc, char **argv)
{
    if (strcmp(argv[0], "ps") == 0)
        return hr_ps_main(argc, argv);
    struct reader r;
    memset(&r, 0, sizeof(r));
    r.mode = strcmp(argv[0], "logs") == 0     ? LOGS
             : strcmp(argv[0], "attach") == 0 ? ATTACH
                                              : STOP;
    r.rank = -1;
    r.tail = -1;
    int rc = parse(&r, argc, argv);
    if (rc >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    if (r.mode != LOGS)
        r.follow = 1;
    if (r.mode == STOP)
        r.tail = 0;
    return run(&r, argv[argc - 1]);
}
