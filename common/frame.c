/* Frame reader and header writer; see frame.h for the layout. */
#include "common/frame.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"

void hvd_frame_reader_init(struct hvd_frame_reader *r, uint32_t max)
{
    memset(r, 0, sizeof(*r));
    r->max = max;
}

void hvd_frame_reader_close(struct hvd_frame_reader *r)
{
    if (r == NULL)
        return;
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

int hvd_frame_reader_push(struct hvd_frame_reader *r, const void *data,
                          size_t len)
{
    /* libuv reports reads of 0 bytes; with no buffer yet there is nothing
     * to append them to (r->buf + 0 on a NULL buffer is undefined). */
    if (len == 0)
        return 0;
    /* Drop consumed frames first so the buffer stays near one frame. */
    if (r->off > 0) {
        memmove(r->buf, r->buf + r->off, r->len - r->off);
        r->len -= r->off;
        r->off = 0;
    }
    if (len > r->cap - r->len) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap - r->len < len)
            cap *= 2;
        uint8_t *nb = realloc(r->buf, cap);
        if (nb == NULL)
            return HVD_ENOMEM;
        r->buf = nb;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, len);
    r->len += len;
    return 0;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

int hvd_frame_reader_next(struct hvd_frame_reader *r, struct hvd_frame *f)
{
    size_t avail = r->len - r->off;
    const uint8_t *h;

    /* Checked first: a reader that got no bytes yet has no buffer. */
    if (avail < HVD_FRAME_HDR)
        return 0;
    h = r->buf + r->off;
    if (((unsigned)h[0] << 8 | h[1]) != HVD_FRAME_MAGIC ||
        h[2] != HVD_FRAME_VERSION)
        return HVD_EPROTO;
    uint32_t len = get_be32(h + 4);
    if (len > r->max)
        return HVD_ETOOBIG;
    if (avail - HVD_FRAME_HDR < len)
        return 0;
    f->type = h[3];
    f->len = len;
    f->payload = h + HVD_FRAME_HDR;
    r->off += HVD_FRAME_HDR + len;
    return 1;
}

void hvd_frame_header(uint8_t hdr[HVD_FRAME_HDR], uint8_t type, uint32_t len)
{
    hdr[0] = HVD_FRAME_MAGIC >> 8;
    hdr[1] = HVD_FRAME_MAGIC & 0xff;
    hdr[2] = HVD_FRAME_VERSION;
    hdr[3] = type;
    hdr[4] = (uint8_t)(len >> 24);
    hdr[5] = (uint8_t)(len >> 16);
    hdr[6] = (uint8_t)(len >> 8);
    hdr[7] = (uint8_t)len;
}
