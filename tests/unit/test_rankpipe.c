/* Unit tests for launcher/lib/rankpipe.c: a rank's output pipe in lines. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/lib/proto.h"
#include "launcher/lib/rankpipe.h"

/* What the pipes told their owner, one log per stream: "<term>text|" per
 * line, "END" when ended; flushes and lines not yet flushed counted. */
struct owner {
    char log[3][512];
    int ended[3];
    int flushes;
    int unflushed;
};

static void on_line(void *ctx, int which, const char *text, size_t len,
                    enum hvd_line_term term)
{
    struct owner *o = ctx;
    char *l = o->log[which];
    cr_assert(which == HVD_STREAM_STDOUT || which == HVD_STREAM_STDERR);
    cr_assert_eq(o->ended[which], 0, "a line after the end");
    snprintf(l + strlen(l), sizeof(o->log[0]) - strlen(l), "%d%.*s|", (int)term,
             (int)len, text);
    o->unflushed++;
}

static void on_flush(void *ctx)
{
    struct owner *o = ctx;
    o->flushes++;
    o->unflushed = 0;
}

static void on_ended(void *ctx, int which)
{
    struct owner *o = ctx;
    o->ended[which]++;
    strcat(o->log[which], "END");
}

static char readbuf[64];

static struct hr_rankpipe_cfg cfg(size_t line_max, size_t buflen)
{
    return (struct hr_rankpipe_cfg){
        .line = on_line,
        .flush = on_flush,
        .ended = on_ended,
        .buf = readbuf,
        .buflen = buflen,
        .line_max = line_max,
    };
}

/* A pipe pair whose read end p reads; returns the write end. */
static int open_pair(struct hr_rankpipe *p, uv_loop_t *loop,
                     const struct hr_rankpipe_cfg *c, struct owner *o)
{
    int fds[2];
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    cr_assert_eq(hr_rankpipe_init(p, loop, c, o, HVD_STREAM_STDOUT), 0);
    cr_assert_eq(hr_rankpipe_open(p, fds[0]), 0);
    return fds[1];
}

static void put(int fd, const char *s)
{
    cr_assert_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Writes all of text, closes, and reads the pipe to its end. */
static void run_text(struct owner *o, size_t line_max, const char *text)
{
    uv_loop_t loop;
    struct hr_rankpipe p;
    struct hr_rankpipe_cfg c = cfg(line_max, sizeof(readbuf));
    cr_assert_eq(uv_loop_init(&loop), 0);
    int wfd = open_pair(&p, &loop, &c, o);
    put(wfd, text);
    close(wfd);
    hr_rankpipe_start(&p);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(p.open, 0);
    hr_rankpipe_close(&p);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(rankpipe, lines_and_partial_last_line)
{
    struct owner o = {0};
    run_text(&o, 8, "one\ntwo\r\nbar\rthree");
    /* "three" follows a \r: previewed after the read, then ended by EOF. */
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT],
                     "1one|2two|3|2bar|4three|0three|END");
    cr_expect_eq(o.ended[HVD_STREAM_STDOUT], 1);
    cr_expect_gt(o.flushes, 0);
    cr_expect_eq(o.unflushed, 0, "lines left unflushed after a read");
}

/* Only a partial line after a \r is a progress bar's state so far. */
Test(rankpipe, preview_only_after_cr)
{
    struct owner o = {0};
    run_text(&o, 64, "\rbar 1\rbar 2\nlog\npartial");
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT],
                     "2|2bar 1|1bar 2|1log|0partial|END");
}

Test(rankpipe, overlong_lines_in_pieces)
{
    struct owner o = {0};
    /* A line of exactly the limit goes whole; a longer one in pieces. */
    run_text(&o, 4, "abcd\nabcdefghij\nxy");
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1abcd|0abcd|0efgh|1ij|0xy|END");
}

Test(rankpipe, empty_stream_only_ends)
{
    struct owner o = {0};
    run_text(&o, 8, "");
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "END");
    cr_expect_eq(o.ended[HVD_STREAM_STDOUT], 1);
}

static void on_exit_cb(uv_process_t *proc, int64_t status, int sig)
{
    cr_expect_eq(status, 0);
    cr_expect_eq(sig, 0);
    uv_close((uv_handle_t *)proc, NULL);
}

/* The rank started by libuv with both pipes, as hvd-mpi-rank does. */
Test(rankpipe, spawned_process_stdout_and_stderr)
{
    uv_loop_t loop;
    uv_process_t proc;
    struct hr_rankpipe out, err;
    struct owner o = {0};
    struct hr_rankpipe_cfg c = cfg(64, sizeof(readbuf));
    char *args[] = {"/bin/sh", "-c",
                    "printf 'out1\\nout2'; printf 'err1\\n' >&2", NULL};
    uv_stdio_container_t stdio[3];

    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(hr_rankpipe_init(&out, &loop, &c, &o, HVD_STREAM_STDOUT), 0);
    cr_assert_eq(hr_rankpipe_init(&err, &loop, &c, &o, HVD_STREAM_STDERR), 0);
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = hr_rankpipe_stream(&out);
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = hr_rankpipe_stream(&err);
    uv_process_options_t po = {
        .exit_cb = on_exit_cb,
        .file = args[0],
        .args = args,
        .stdio_count = 3,
        .stdio = stdio,
    };
    cr_assert_eq(uv_spawn(&loop, &proc, &po), 0);
    hr_rankpipe_start(&out);
    hr_rankpipe_start(&err);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1out1|0out2|END");
    cr_expect_str_eq(o.log[HVD_STREAM_STDERR], "1err1|END");
    hr_rankpipe_close(&out);
    hr_rankpipe_close(&err);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Draining reads without the loop, up to about max bytes, and ends at
 * EOF; the loop's reads take the rest. */
Test(rankpipe, drain_bounded_then_loop)
{
    uv_loop_t loop;
    struct hr_rankpipe p;
    struct owner o = {0};
    struct hr_rankpipe_cfg c = cfg(64, 4);

    cr_assert_eq(uv_loop_init(&loop), 0);
    int wfd = open_pair(&p, &loop, &c, &o);
    put(wfd, "ab\ncd\nef");
    close(wfd);
    hr_rankpipe_drain(&p, 4); /* one read of 4 bytes: "ab\nc" */
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1ab|");
    cr_expect_eq(o.flushes, 0, "drain flushed");
    hr_rankpipe_drain(&p, 1024);
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1ab|1cd|0ef|END");
    cr_expect_eq(p.open, 0);
    /* Ended: nothing more to read, drain or end. */
    hr_rankpipe_drain(&p, 1024);
    hr_rankpipe_end(&p);
    hr_rankpipe_start(&p);
    cr_expect_eq(o.ended[HVD_STREAM_STDOUT], 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    hr_rankpipe_close(&p);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A stopped pipe is not read (backpressure) until started again. */
Test(rankpipe, stop_and_start)
{
    uv_loop_t loop;
    struct hr_rankpipe p;
    struct owner o = {0};
    struct hr_rankpipe_cfg c = cfg(64, sizeof(readbuf));

    cr_assert_eq(uv_loop_init(&loop), 0);
    int wfd = open_pair(&p, &loop, &c, &o);
    hr_rankpipe_start(&p);
    hr_rankpipe_stop(&p);
    put(wfd, "held\n");
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "");
    hr_rankpipe_start(&p);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1held|");
    close(wfd);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_str_eq(o.log[HVD_STREAM_STDOUT], "1held|END");
    hr_rankpipe_close(&p);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

/* A read end that cannot be opened ends the pipe at once. */
Test(rankpipe, open_failure_ends)
{
    uv_loop_t loop;
    struct hr_rankpipe p;
    struct owner o = {0};
    struct hr_rankpipe_cfg c = cfg(64, sizeof(readbuf));

    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(hr_rankpipe_init(&p, &loop, &c, &o, HVD_STREAM_STDERR), 0);
    cr_expect_neq(hr_rankpipe_open(&p, -1), 0);
    cr_expect_str_eq(o.log[HVD_STREAM_STDERR], "END");
    cr_expect_eq(p.open, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    hr_rankpipe_close(&p);
    hr_rankpipe_close(NULL);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
