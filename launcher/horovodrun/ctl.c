/* The control socket's messages: encoders (decoding is hvd_rbuf's). */
#include "launcher/horovodrun/ctl.h"

#include <stdlib.h>

#include "common/wire.h"

static struct hr_ctl_frame finish(struct hvd_wbuf *w, int type)
{
    struct hr_ctl_frame f = {NULL, 0};
    if (hvd_wbuf_finish(w, (uint8_t)type, &f.p, &f.len) != 0)
        f.p = NULL;
    return f;
}

struct hr_ctl_frame hr_ctl_logs(int follow, int rank, long tail)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u8(&w, (uint8_t)(follow != 0));
    hvd_wbuf_i32(&w, rank);
    hvd_wbuf_i32(&w, tail > INT32_MAX ? INT32_MAX : (int32_t)tail);
    return finish(&w, HR_CTL_LOGS);
}

struct hr_ctl_frame hr_ctl_stop(int now)
{
    return hr_ctl_u32(HR_CTL_STOP, (uint32_t)(now != 0));
}

struct hr_ctl_frame hr_ctl_hello(const char *id, uint32_t size,
                                 const int *local_ranks)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_str(&w, id);
    hvd_wbuf_u32(&w, size);
    for (uint32_t r = 0; r < size; r++)
        hvd_wbuf_i32(&w, local_ranks[r]);
    return finish(&w, HR_CTL_HELLO);
}

struct hr_ctl_frame hr_ctl_line(const struct hr_keep_line *l)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, l->rank);
    hvd_wbuf_u8(&w, l->stream);
    hvd_wbuf_u8(&w, l->term);
    hvd_wbuf_raw(&w, l->text, l->len);
    return finish(&w, HR_CTL_LINE);
}

struct hr_ctl_frame hr_ctl_u32(int type, uint32_t v)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, v);
    return finish(&w, type);
}

struct hr_ctl_frame hr_ctl_end(int code, const char *summary)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_i32(&w, code);
    hvd_wbuf_str(&w, summary);
    return finish(&w, HR_CTL_END);
}

struct hr_ctl_frame hr_ctl_refused(const char *why)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_str(&w, why);
    return finish(&w, HR_CTL_REFUSED);
}
