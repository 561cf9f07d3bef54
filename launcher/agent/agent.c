/* hvd-agent: reads the job from its launcher, runs and reports its ranks. */
#include "launcher/agent/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "launcher/lib/env.h"
#include "common/envc.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "common/wire.h"
#include "hvd_version.h"
#include "launcher/lib/loop.h"
#include "launcher/lib/net.h"

struct send_req {
    uv_write_t req;
    uint8_t *frame;
    size_t len;
};

/* Backpressure: the ranks' output, what the agents it started send, and
 * the rendezvous it carries. */
static void pause_all(struct agent *ag, int pause)
{
    agent_ranks_pause(ag, pause);
    agent_relay_pause(ag, pause);
    agent_carry_pause(ag, pause);
}

static void on_sent(uv_write_t *req, int status)
{
    struct send_req *sr = (struct send_req *)req;
    struct agent *ag = req->data;
    (void)status; /* a dead launcher is noticed on ctl_in */
    ag->outq -= sr->len;
    free(sr->frame);
    free(sr);
    if (ag->paused && ag->outq < AGENT_OUTQ_LOW)
        pause_all(ag, 0);
    if (ag->finished && ag->outq == 0)
        uv_stop(ag->loop);
}

/* Queues frames on ctl_out (takes ownership of buf). */
static void write_out(struct agent *ag, uint8_t *buf, size_t len)
{
    struct send_req *sr = malloc(sizeof(*sr));
    if (sr == NULL) {
        free(buf);
        return;
    }
    sr->frame = buf;
    sr->len = len;
    sr->req.data = ag;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    ag->outq += len;
    if (uv_write(&sr->req, (uv_stream_t *)&ag->ctl_out, &b, 1, on_sent) != 0) {
        ag->outq -= len;
        free(buf);
        free(sr);
        return;
    }
    if (!ag->paused && ag->outq > AGENT_OUTQ_HIGH)
        pause_all(ag, 1);
}

void agent_flush(struct agent *ag)
{
    if (ag->batch_len == 0)
        return;
    uint8_t *buf = ag->batch;
    size_t len = ag->batch_len;
    ag->batch = NULL;
    ag->batch_len = ag->batch_cap = 0;
    write_out(ag, buf, len);
}

/* Room for n more bytes in the batch, or NULL when out of memory. */
static uint8_t *batch_reserve(struct agent *ag, size_t n)
{
    if (ag->batch_cap - ag->batch_len < n) {
        size_t cap = ag->batch_len + n;
        if (cap < AGENT_BATCH + 4096)
            cap = AGENT_BATCH + 4096;
        uint8_t *p = realloc(ag->batch, cap);
        if (p == NULL)
            return NULL;
        ag->batch = p;
        ag->batch_cap = cap;
    }
    uint8_t *p = ag->batch + ag->batch_len;
    ag->batch_len += n;
    return p;
}

void agent_send(struct agent *ag, uint8_t *frame, size_t len)
{
    /* Control frames are few: the gathered lines go first, then the
     * frame on its own; uv_write keeps the order, so a rank's EXIT always
     * follows its last line. */
    agent_flush(ag);
    write_out(ag, frame, len);
}

void agent_send_line(struct agent *ag, uint32_t rank, uint8_t stream,
                     uint8_t term, const char *text, size_t len)
{
    /* HVD_MSG_LINE: u32 rank, u8 stream, u8 term, text. */
    uint8_t *p = batch_reserve(ag, HVD_FRAME_HDR + 6 + len);
    if (p == NULL)
        return;
    hvd_frame_header(p, HVD_MSG_LINE, (uint32_t)(6 + len));
    p += HVD_FRAME_HDR;
    p[0] = (uint8_t)(rank >> 24);
    p[1] = (uint8_t)(rank >> 16);
    p[2] = (uint8_t)(rank >> 8);
    p[3] = (uint8_t)rank;
    p[4] = stream;
    p[5] = term;
    memcpy(p + 6, text, len);
    if (ag->batch_len >= AGENT_BATCH)
        agent_flush(ag);
}

void agent_note(struct agent *ag, int level, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);

    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    hvd_wbuf_u8(&w, (uint8_t)level);
    hvd_wbuf_str(&w, text);
    if (hvd_wbuf_finish(&w, HVD_MSG_NOTE, &f, &len) == 0)
        agent_send(ag, f, len);
}

static void send_hello(struct agent *ag)
{
    char host[256] = "";
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;

    gethostname(host, sizeof(host) - 1);
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, HVD_PROTO_VERSION);
    hvd_wbuf_str(&w, host);
    hvd_wbuf_i32(&w, ag->gpus);
    /* A port free here, for MASTER_PORT if rank 0 lands on this host. */
    hvd_wbuf_i32(&w, hr_free_port());
    if (hvd_wbuf_finish(&w, HVD_MSG_HELLO, &f, &len) == 0)
        agent_send(ag, f, len);
}

void agent_finish(struct agent *ag)
{
    agent_flush(ag);
    /* The agents it started talk through it until they end. */
    ag->finishing = 1;
    if (ag->children_live > 0)
        return;
    ag->finished = 1;
    uv_read_stop((uv_stream_t *)&ag->ctl_in);
    if (ag->outq == 0)
        uv_stop(ag->loop);
}

/* The launcher is gone or asked us to stop: end the job on this host. */
static void lose_launcher(struct agent *ag)
{
    uv_read_stop((uv_stream_t *)&ag->ctl_in);
    uv_timer_stop(&ag->silence);
    ag->silence_ms = 0;
    agent_relay_drop(ag);
    if (!ag->started || ag->live == 0) {
        agent_finish(ag);
        return;
    }
    agent_ranks_stop(ag, 0);
}

static int handle_frame(struct agent *ag, const struct hvd_frame *f)
{
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, f->payload, f->len);

    switch (f->type) {
    case HVD_MSG_JOB: {
        if (ag->started)
            return HVD_EPROTO;
        int err = hvd_jobspec_decode(&ag->job, f->payload, f->len);
        if (err)
            return err;
        ag->started = 1;
        agent_ranks_start(ag, 0);
        return 0;
    }
    case HVD_MSG_RANKS: {
        /* Elastic jobs: more ranks for the job this agent runs. */
        if (!ag->started)
            return HVD_EPROTO;
        uint32_t first = ag->job.nranks;
        int err = hvd_jobspec_decode_more(&ag->job, f->payload, f->len);
        if (err)
            return err;
        agent_ranks_start(ag, first);
        return 0;
    }
    case HVD_MSG_KILL: {
        uint32_t rank = hvd_rbuf_u32(&r);
        uint8_t now = hvd_rbuf_u8(&r);
        if (hvd_rbuf_done(&r))
            return HVD_EPROTO;
        agent_rank_kill(ag, rank, now);
        return 0;
    }
    case HVD_MSG_STDIN:
        agent_ranks_stdin(ag, f->payload, f->len);
        return 0;
    case HVD_MSG_SIGNAL: {
        uint32_t sig = hvd_rbuf_u32(&r);
        if (hvd_rbuf_done(&r) || sig == 0 || sig >= NSIG)
            return HVD_EPROTO;
        agent_ranks_signal(ag, (int)sig);
        return 0;
    }
    case HVD_MSG_PING: {
        /* Over SSH a vanished network closes nothing: the launcher's
         * regular pings are what proves it is still there. */
        uint32_t ms = hvd_rbuf_u32(&r);
        if (hvd_rbuf_done(&r) || ms == 0)
            return HVD_EPROTO;
        ag->silence_ms = ms;
        return 0;
    }
    case HVD_MSG_STOP: {
        uint8_t now = hvd_rbuf_u8(&r);
        if (hvd_rbuf_done(&r))
            return HVD_EPROTO;
        if (!ag->started)
            agent_finish(ag);
        else
            agent_ranks_stop(ag, now);
        return 0;
    }
    case HVD_MSG_SPAWN:
    case HVD_MSG_TO:
    case HVD_MSG_DROP:
        return agent_relay_frame(ag, f);
    case HVD_MSG_RDV_DATA:
    case HVD_MSG_RDV_CLOSE:
        return agent_carry_frame(ag, f);
    default:
        return HVD_EPROTO;
    }
}

static void on_silence(uv_timer_t *t)
{
    struct agent *ag = t->data;
    hvd_log_error("nothing heard from horovodrun for %u ms; stopping the "
                  "ranks",
                  ag->silence_ms);
    lose_launcher(ag);
}

static void alloc_ctl(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct agent *ag = h->data;
    (void)hint;
    *buf = uv_buf_init(ag->readbuf, sizeof(ag->readbuf));
}

static void on_ctl(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct agent *ag = s->data;
    struct hvd_frame f;
    int rc;

    if (n < 0) {
        lose_launcher(ag);
        return;
    }
    if (hvd_frame_reader_push(&ag->reader, buf->base, (size_t)n) != 0) {
        lose_launcher(ag);
        return;
    }
    while ((rc = hvd_frame_reader_next(&ag->reader, &f)) == 1) {
        rc = handle_frame(ag, &f);
        if (rc != 0)
            break;
    }
    if (ag->silence_ms && rc >= 0)
        uv_timer_start(&ag->silence, on_silence, ag->silence_ms, 0);
    if (rc < 0) {
        /* A corrupt channel cannot be trusted to say anything more. */
        hvd_log_error("bad message from the launcher: %s", hr_err_str(rc));
        lose_launcher(ag);
    }
}

static void on_signal(uv_signal_t *h, int sig)
{
    struct agent *ag = h->data;
    if (sig == SIGCHLD)
        agent_ranks_reap(ag);
    else
        lose_launcher(ag);
}

/* Returns 0 when stdin and stdout can be the channel from horovodrun:
 * pipes, or (srun --unbuffered) a pipe in and a pseudo-terminal out, which
 * is then made raw so that frames pass byte for byte. */
static int channel_check(void)
{
    struct termios t;

    if (uv_guess_handle(0) == UV_TTY)
        return -1;
    if (uv_guess_handle(1) != UV_TTY)
        return 0;
    if (getenv(HVD_ENV_SLURM_STEP_ID) == NULL || tcgetattr(1, &t) != 0)
        return -1;
    cfmakeraw(&t);
    return tcsetattr(1, TCSANOW, &t);
}

/* Whether args are [--token-file PATH --host NAME] --connect PORT ADDR.. */
static int connect_usage(int argc, char **argv)
{
    int i = 0;
    if (argc >= 4 && strcmp(argv[0], "--token-file") == 0 &&
        strcmp(argv[2], "--host") == 0)
        i = 4;
    return argc - i >= 3 && strcmp(argv[i], "--connect") == 0;
}

int main(int argc, char **argv)
{
    static struct agent ag;
    uv_loop_t *loop = uv_default_loop();

    hvd_log_init("hvd-agent", 0);
    if (argc > 1 &&
        (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0)) {
        printf("hvd-agent %s\n", HVD_VERSION);
        return 0;
    }
    if (argc > 1 && !connect_usage(argc - 1, argv + 1)) {
        fprintf(stderr, "usage: hvd-agent [--token-file PATH --host NAME] "
                        "[--connect PORT ADDR...] (started by horovodrun; "
                        "reads its job on stdin or from the connection, see "
                        "hvd-agent(8))\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && agent_connect(argc - 1, argv + 1) != 0)
        return 1;
    ag.loop = loop;
    ag.gpus = hvd_gpu_count();
    hvd_frame_reader_init(&ag.reader, HVD_FRAME_MAX);
    hvd_jobspec_init(&ag.job);
    if (channel_check() != 0 || uv_pipe_init(loop, &ag.ctl_in, 0) ||
        uv_pipe_open(&ag.ctl_in, 0) || uv_pipe_init(loop, &ag.ctl_out, 0) ||
        uv_pipe_open(&ag.ctl_out, 1)) {
        hvd_log_error("stdin and stdout must be the channel from horovodrun;"
                      " hvd-agent is started by horovodrun, not by hand");
        return 2;
    }
    ag.ctl_in.data = ag.ctl_out.data = &ag;
    uv_timer_init(loop, &ag.grace);
    uv_timer_init(loop, &ag.silence);
    ag.grace.data = ag.silence.data = &ag;
    uv_signal_t *const sigs[] = {&ag.sigchld, &ag.sigterm, &ag.sigint,
                                 &ag.sighup};
    static const int signums[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP};
    hr_loop_signals(loop, sigs, signums, 4, &ag, on_signal, 0);
    send_hello(&ag);
    uv_read_start((uv_stream_t *)&ag.ctl_in, alloc_ctl, on_ctl);
    uv_run(loop, UV_RUN_DEFAULT);

    /* Everything is reported; close what is left and free it. */
    agent_relay_close(&ag);
    hr_loop_close_all(loop, UV_RUN_DEFAULT);
    agent_ranks_free(&ag);
    agent_relay_free(&ag);
    agent_carry_free(&ag);
    free(ag.batch);
    hvd_jobspec_close(&ag.job);
    hvd_frame_reader_close(&ag.reader);
    uv_loop_close(loop);
    return 0;
}
