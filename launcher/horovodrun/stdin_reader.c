/* horovodrun's stdin, read in the thread pool (see stdin_reader.h). */
#include "launcher/horovodrun/stdin_reader.h"

#include <unistd.h>

void hr_stdin_init(struct hr_stdin *in, uv_loop_t *loop, hr_stdin_cb cb,
                   void *data)
{
    in->loop = loop;
    in->cb = cb;
    in->data = data;
    in->busy = 0;
}

static void on_read(uv_fs_t *req)
{
    struct hr_stdin *in = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    in->busy = 0;
    in->cb(in, in->buf, n > 0 ? (size_t)n : 0);
}

void hr_stdin_read(struct hr_stdin *in)
{
    if (in->busy)
        return;
    if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != getpgrp()) {
        in->cb(in, in->buf, 0);
        return;
    }
    in->req.data = in;
    uv_buf_t b = uv_buf_init(in->buf, sizeof(in->buf));
    if (uv_fs_read(in->loop, &in->req, STDIN_FILENO, &b, 1, -1, on_read) == 0)
        in->busy = 1;
    else
        in->cb(in, in->buf, 0);
}
