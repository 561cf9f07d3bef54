/* A rank's stdout or stderr pipe, read and cut into lines for its owner. */
#include "launcher/lib/rankpipe.h"

#include <errno.h>
#include <unistd.h>

static void on_line(void *ctx, const char *line, size_t len,
                    enum hvd_line_term term)
{
    struct hr_rankpipe *p = ctx;
    p->cfg->line(p->ctx, p->which, line, len, term);
}

/* A progress bar drawn as "\r" + text has no end until the next one:
 * what came of it so far goes on for a terminal to show. */
static void preview(struct hr_rankpipe *p)
{
    const char *text;
    size_t len = p->open ? hvd_linesplit_preview(&p->split, &text) : 0;
    if (len > 0)
        p->cfg->line(p->ctx, p->which, text, len, HVD_TERM_PREVIEW);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct hr_rankpipe *p = h->data;
    (void)hint;
    *buf = uv_buf_init(p->cfg->buf, (unsigned)p->cfg->buflen);
}

/* A failed read or a splitter out of memory ends the pipe like EOF. */
static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
    struct hr_rankpipe *p = h->data;
    if (n < 0 || hvd_linesplit_feed(&p->split, buf->base,
                                    (size_t)(n > 0 ? n : 0), on_line, p) != 0)
        hr_rankpipe_end(p);
    preview(p);
    p->cfg->flush(p->ctx);
}

int hr_rankpipe_init(struct hr_rankpipe *p, uv_loop_t *loop,
                     const struct hr_rankpipe_cfg *cfg, void *ctx, int which)
{
    p->cfg = cfg;
    p->ctx = ctx;
    p->which = which;
    p->open = 0;
    hvd_linesplit_init(&p->split, cfg->line_max);
    int rc = uv_pipe_init(loop, &p->pipe, 0);
    if (rc != 0)
        return rc;
    p->pipe.data = p;
    p->open = 1;
    return 0;
}

int hr_rankpipe_open(struct hr_rankpipe *p, int fd)
{
    int rc = uv_pipe_open(&p->pipe, fd);
    if (rc != 0) {
        close(fd);
        hr_rankpipe_end(p);
    }
    return rc;
}

uv_stream_t *hr_rankpipe_stream(struct hr_rankpipe *p)
{
    return (uv_stream_t *)&p->pipe;
}

void hr_rankpipe_start(struct hr_rankpipe *p)
{
    if (p->open)
        uv_read_start((uv_stream_t *)&p->pipe, alloc_cb, on_read);
}

void hr_rankpipe_stop(struct hr_rankpipe *p)
{
    if (p->open)
        uv_read_stop((uv_stream_t *)&p->pipe);
}

/* Something that still writes to the pipe is read no further than max:
 * the rest comes through the normal reads, which backpressure can pause. */
void hr_rankpipe_drain(struct hr_rankpipe *p, size_t max)
{
    int fd;
    size_t total = 0;
    if (!p->open || uv_fileno((uv_handle_t *)&p->pipe, &fd) != 0)
        return;
    while (total < max) {
        ssize_t n = read(fd, p->cfg->buf, p->cfg->buflen);
        if (n > 0) {
            total += (size_t)n;
            if (hvd_linesplit_feed(&p->split, p->cfg->buf, (size_t)n, on_line,
                                   p))
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            hr_rankpipe_end(p);
        break;
    }
}

void hr_rankpipe_end(struct hr_rankpipe *p)
{
    if (!p->open)
        return;
    hvd_linesplit_finish(&p->split, on_line, p);
    p->open = 0;
    uv_close((uv_handle_t *)&p->pipe, NULL);
    p->cfg->ended(p->ctx, p->which);
}

void hr_rankpipe_close(struct hr_rankpipe *p)
{
    if (p != NULL)
        hvd_linesplit_close(&p->split);
}
