/* A detached job's control socket: kept output, readers, stop requests. */
#include "launcher/horovodrun/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/wire.h"
#include "launcher/horovodrun/ctl.h"
#include "launcher/lib/errcode.h"
#include "launcher/horovodrun/jobdir.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"

/* How long the end waits for its readers to take it. */
#define END_WAIT_MS 2000

struct client {
    struct hr_serve *s;
    uv_pipe_t pipe;
    struct hvd_frame_reader reader;
    struct client *next;
    int follow;       /* takes new lines as they come */
    int rank;         /* only this rank's lines (and ours), or -1 */
    uint32_t skipped; /* lines it missed since it fell behind */
    int closing;      /* closed, or closed once its writes are done */
    int refused;      /* another user: what it sends is thrown away */
    uv_shutdown_t shut;
};

struct hr_serve {
    uv_loop_t *loop;
    uv_pipe_t server;
    char root[PATH_MAX], id[HR_JOB_ID_LEN + 1], sock[PATH_MAX];
    struct hr_keep keep;
    const struct hvd_plan *plan;
    struct client *clients;
    void (*on_stop)(void *arg, int now);
    void *arg;
    int log_fd;     /* root/id/horovodrun.log */
    char last[512]; /* horovodrun's last message */
    int ended;
    int code;
    char summary[512];
};

struct wreq {
    uv_write_t req;
    uint8_t *frame;
};

static void on_closed(uv_handle_t *h)
{
    struct client *c = h->data;
    struct hr_serve *s = c->s;
    for (struct client **p = &s->clients; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    hvd_frame_reader_close(&c->reader);
    free(c);
}

static void drop(struct client *c)
{
    c->closing = 1;
    if (!uv_is_closing((uv_handle_t *)&c->pipe))
        uv_close((uv_handle_t *)&c->pipe, on_closed);
}

static void on_shut(uv_shutdown_t *req, int status)
{
    struct client *c = req->data;
    (void)status;
    uv_close((uv_handle_t *)&c->pipe, on_closed);
}

/* Closes c once what was queued for it is written. */
static void finish(struct client *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_read_stop((uv_stream_t *)&c->pipe);
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->pipe, on_shut) != 0)
        uv_close((uv_handle_t *)&c->pipe, on_closed);
}

static int send_frame(struct client *c, struct hr_ctl_frame f);

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct client *c = req->data;
    free(w->frame);
    free(w);
    if (status != 0) {
        drop(c);
        return;
    }
    /* Caught up again: say what was missed. */
    if (c->skipped && !c->closing &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) <
            HR_SERVE_BACKLOG / 2) {
        struct hr_ctl_frame f = hr_ctl_u32(HR_CTL_SKIPPED, c->skipped);
        c->skipped = 0;
        send_frame(c, f);
    }
}

/* Queues frame (taking it) to c; 0, or -1 when c is gone or it failed. */
static int send_frame(struct client *c, struct hr_ctl_frame f)
{
    struct wreq *w = f.p && !c->closing ? malloc(sizeof(*w)) : NULL;
    if (w == NULL) {
        free(f.p);
        return -1;
    }
    w->frame = f.p;
    w->req.data = c;
    uv_buf_t b = uv_buf_init((char *)f.p, (unsigned)f.len);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written) != 0) {
        free(f.p);
        free(w);
        drop(c);
        return -1;
    }
    return 0;
}

static int send_line(void *arg, const struct hr_keep_line *l)
{
    return send_frame(arg, hr_ctl_line(l)) == 0 ? 0 : -1;
}

static int wants(const struct client *c, uint32_t rank)
{
    return c->rank < 0 || rank == HR_KEEP_SELF || rank == (uint32_t)c->rank;
}

static void add_line(struct hr_serve *s, const struct hr_keep_line *l)
{
    hr_keep_add(&s->keep, l);
    for (struct client *c = s->clients; c; c = c->next) {
        if (!c->follow || c->closing || !wants(c, l->rank))
            continue;
        if (c->skipped || uv_stream_get_write_queue_size(
                              (uv_stream_t *)&c->pipe) > HR_SERVE_BACKLOG) {
            c->skipped += l->term != HVD_TERM_PREVIEW;
            continue;
        }
        send_line(c, l);
    }
}

void hr_serve_line(void *serve, uint32_t rank, int stream, int term,
                   const char *text, size_t len)
{
    struct hr_serve *s = serve;
    const struct hr_keep_line l = {rank, (uint8_t)stream, (uint8_t)term, text,
                                   len};
    /* An elastic job's ranks grow beyond the first assignment's. */
    if (rank >= s->keep.size && rank != HR_KEEP_SELF)
        hr_keep_grow(&s->keep,
                     rank + 1 > 2 * s->keep.size ? rank + 1 : 2 * s->keep.size);
    add_line(s, &l);
}

/* horovodrun's own messages: to its log file and its readers. */
static void on_log(void *arg, const char *line, size_t len)
{
    struct hr_serve *s = arg;
    const struct iovec v[2] = {{(void *)line, len}, {"\n", 1}};
    if (s->log_fd >= 0 && writev(s->log_fd, v, 2) < 0)
        (void)0; /* nowhere left to say it */
    snprintf(s->last, sizeof(s->last), "%.*s", (int)len, line);
    const struct hr_keep_line l = {HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF,
                                   line, len};
    add_line(s, &l);
}

static struct hr_ctl_frame hello(struct hr_serve *s)
{
    int n = s->plan->size;
    int *lr = malloc((n > 0 ? (size_t)n : 1) * sizeof(*lr));
    struct hr_ctl_frame f = {NULL, 0};
    if (lr == NULL)
        return f;
    for (int r = 0; r < n; r++)
        lr[r] = s->plan->ranks[r].local_rank;
    f = hr_ctl_hello(s->id, (uint32_t)n, lr);
    free(lr);
    return f;
}

static void on_logs(struct client *c, struct hvd_rbuf *rb)
{
    struct hr_serve *s = c->s;
    int follow = hvd_rbuf_u8(rb);
    int rank = hvd_rbuf_i32(rb);
    long tail = hvd_rbuf_i32(rb);
    if (hvd_rbuf_done(rb) != 0 || rank < -1 ||
        (rank >= s->plan->size && rank >= (int)s->keep.size)) {
        drop(c);
        return;
    }
    c->rank = rank;
    if (send_frame(c, hello(s)) != 0 ||
        hr_keep_each(&s->keep, rank, tail, send_line, c) != 0)
        return;
    if (follow && !s->ended) {
        c->follow = 1;
        return;
    }
    if (s->ended)
        send_frame(c, hr_ctl_end(s->code, s->summary));
    finish(c);
}

static void on_request(struct client *c, const struct hvd_frame *f)
{
    struct hvd_rbuf rb;
    hvd_rbuf_init(&rb, f->payload, f->len);
    if (f->type == HR_CTL_LOGS) {
        on_logs(c, &rb);
    } else if (f->type == HR_CTL_STOP) {
        uint32_t now = hvd_rbuf_u32(&rb);
        if (!c->s->ended)
            c->s->on_stop(c->s->arg, now != 0);
    } else {
        drop(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char buf[4096];
    (void)h;
    (void)suggested;
    *b = uv_buf_init(buf, sizeof(buf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct client *c = st->data;
    struct hvd_frame f;
    if (c->refused && n >= 0)
        return; /* read to its end: a close with bytes unread resets */
    if (n < 0 || hvd_frame_reader_push(&c->reader, b->base, (size_t)n) != 0) {
        drop(c);
        return;
    }
    int rc;
    while (!c->closing && (rc = hvd_frame_reader_next(&c->reader, &f)) == 1)
        on_request(c, &f);
    if (!c->closing && rc < 0)
        drop(c);
}

/* Only this user may talk to the job: the folder's mode says so, and the
 * peer's credentials make sure. */
static int same_user(uv_pipe_t *p, char *why, size_t len)
{
    uv_os_fd_t fd;
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    if (uv_fileno((uv_handle_t *)p, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0) {
        snprintf(why, len, "cannot tell who connected");
        return 0;
    }
    if (cr.uid == geteuid())
        return 1;
    snprintf(why, len,
             "this job belongs to uid %u; uid %u may not read or stop it",
             (unsigned)geteuid(), (unsigned)cr.uid);
    return 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct hr_serve *s = server->data;
    struct client *c = status == 0 ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL)
        return;
    c->s = s;
    c->rank = -1;
    hvd_frame_reader_init(&c->reader, HR_CTL_REQUEST_MAX);
    uv_pipe_init(s->loop, &c->pipe, 0);
    c->pipe.data = c;
    c->next = s->clients;
    s->clients = c;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        drop(c);
        return;
    }
    char why[160];
    if (!same_user(&c->pipe, why, sizeof(why))) {
        hvd_log_warn("refused a reader: %s", why);
        c->refused = 1;
        send_frame(c, hr_ctl_refused(why));
        c->shut.data = c;
        if (uv_shutdown(&c->shut, (uv_stream_t *)&c->pipe, NULL) != 0)
            drop(c);
    }
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

int hr_serve_start(struct hr_serve **out, uv_loop_t *loop, const char *root,
                   const char *id, const struct hvd_plan *plan,
                   void (*on_stop)(void *arg, int now), void *arg, char *err,
                   size_t errlen)
{
    struct hr_serve *s = calloc(1, sizeof(*s));
    char logp[PATH_MAX];
    if (s == NULL || hr_keep_init(&s->keep, (uint32_t)plan->size) != 0) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return HVD_ENOMEM;
    }
    s->loop = loop;
    s->plan = plan;
    s->on_stop = on_stop;
    s->arg = arg;
    snprintf(s->root, sizeof(s->root), "%s", root);
    snprintf(s->id, sizeof(s->id), "%s", id);
    hr_jobdir_path(s->sock, sizeof(s->sock), root, id, "sock");
    hr_jobdir_path(logp, sizeof(logp), root, id, "horovodrun.log");
    s->log_fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    uv_pipe_init(loop, &s->server, 0);
    s->server.data = s;
    mode_t old = umask(077);
    int rc = uv_pipe_bind(&s->server, s->sock);
    umask(old);
    if (rc == 0 && chmod(s->sock, 0600) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->server, 16, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", s->sock,
                 uv_strerror(rc));
        uv_close((uv_handle_t *)&s->server, NULL);
        hr_keep_close(&s->keep);
        if (s->log_fd >= 0)
            close(s->log_fd);
        free(s);
        return HVD_EIO;
    }
    hvd_log_redirect(on_log, s);
    *out = s;
    return 0;
}

/* Writes the kept file: what logs shows once the job has ended. */
/* Writes f (taking it) to fp: 0 or -1. */
static int put(FILE *fp, struct hr_ctl_frame f)
{
    int ok = f.p && fwrite(f.p, 1, f.len, fp) == f.len;
    free(f.p);
    return ok ? 0 : -1;
}

static int write_one(void *arg, const struct hr_keep_line *l)
{
    return put(arg, hr_ctl_line(l));
}

static int fill_kept(FILE *fp, void *arg)
{
    struct hr_serve *s = arg;
    if (put(fp, hello(s)) != 0 ||
        hr_keep_each(&s->keep, -1, -1, write_one, fp) != 0)
        return -1;
    return put(fp, hr_ctl_end(s->code, s->summary));
}

static void on_end_timer(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

void hr_serve_end(struct hr_serve *s, int code)
{
    hvd_log_redirect(NULL, NULL);
    s->ended = 1;
    s->code = code;
    snprintf(s->summary, sizeof(s->summary), "%s", code ? s->last : "");
    if (hr_jobdir_write_status(s->root, s->id, code, s->summary) != 0)
        hvd_log_warn("cannot write the status of job %s in %s", s->id, s->root);
    if (hr_jobdir_write(s->root, s->id, "kept", fill_kept, s) != 0)
        hvd_log_warn("cannot write the output of job %s in %s", s->id, s->root);
    uv_close((uv_handle_t *)&s->server, NULL);
    unlink(s->sock);
    for (struct client *c = s->clients; c; c = c->next) {
        if (c->follow)
            send_frame(c, hr_ctl_end(code, s->summary));
        finish(c);
    }
    /* Until the readers have it, or they are too slow. */
    int late = 0;
    uv_timer_t t;
    uv_timer_init(s->loop, &t);
    t.data = &late;
    uv_timer_start(&t, on_end_timer, END_WAIT_MS, 0);
    while (s->clients && !late)
        uv_run(s->loop, UV_RUN_ONCE);
    for (struct client *c = s->clients; c; c = c->next)
        if (!uv_is_closing((uv_handle_t *)&c->pipe))
            uv_close((uv_handle_t *)&c->pipe, on_closed);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(s->loop, UV_RUN_NOWAIT);
    hr_keep_close(&s->keep);
    if (s->log_fd >= 0)
        close(s->log_fd);
    free(s);
}
