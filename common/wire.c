/* Payload writer and reader for frames; see wire.h. */
#include "common/wire.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"

void hvd_wbuf_init(struct hvd_wbuf *w)
{
    memset(w, 0, sizeof(*w));
    w->len = HVD_FRAME_HDR;
}

void hvd_wbuf_close(struct hvd_wbuf *w)
{
    if (w == NULL)
        return;
    free(w->data);
    memset(w, 0, sizeof(*w));
}

static uint8_t *reserve(struct hvd_wbuf *w, size_t n)
{
    if (w->err)
        return NULL;
    if (n > HVD_FRAME_MAX || w->len - HVD_FRAME_HDR > HVD_FRAME_MAX - n) {
        w->err = HVD_ETOOBIG;
        return NULL;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *nd = realloc(w->data, cap);
        if (nd == NULL) {
            w->err = HVD_ENOMEM;
            return NULL;
        }
        w->data = nd;
        w->cap = cap;
    }
    uint8_t *p = w->data + w->len;
    w->len += n;
    return p;
}

void hvd_wbuf_u8(struct hvd_wbuf *w, uint8_t v)
{
    uint8_t *p = reserve(w, 1);
    if (p)
        p[0] = v;
}

void hvd_wbuf_u32(struct hvd_wbuf *w, uint32_t v)
{
    uint8_t *p = reserve(w, 4);
    if (p == NULL)
        return;
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void hvd_wbuf_i32(struct hvd_wbuf *w, int32_t v)
{
    hvd_wbuf_u32(w, (uint32_t)v);
}

void hvd_wbuf_raw(struct hvd_wbuf *w, const void *src, size_t len)
{
    uint8_t *p = reserve(w, len);
    if (p && len)
        memcpy(p, src, len);
}

void hvd_wbuf_bytes(struct hvd_wbuf *w, const void *src, size_t len)
{
    if (len > UINT32_MAX) {
        w->err = w->err ? w->err : HVD_ETOOBIG;
        return;
    }
    hvd_wbuf_u32(w, (uint32_t)len);
    hvd_wbuf_raw(w, src, len);
}

void hvd_wbuf_str(struct hvd_wbuf *w, const char *s)
{
    hvd_wbuf_bytes(w, s, strlen(s));
}

int hvd_wbuf_finish(struct hvd_wbuf *w, uint8_t type, uint8_t **out,
                    size_t *outlen)
{
    /* A payload-less frame still needs room for its header. */
    if (w->data == NULL)
        reserve(w, 0);
    int err = w->err;

    if (err) {
        hvd_wbuf_close(w);
        hvd_wbuf_init(w);
        return err;
    }
    hvd_frame_header(w->data, type, (uint32_t)(w->len - HVD_FRAME_HDR));
    *out = w->data;
    *outlen = w->len;
    w->data = NULL;
    hvd_wbuf_close(w);
    hvd_wbuf_init(w);
    return 0;
}

void hvd_rbuf_init(struct hvd_rbuf *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->err = 0;
}

static const uint8_t *take(struct hvd_rbuf *r, size_t n)
{
    if (r->err)
        return NULL;
    if (r->len - r->off < n) {
        r->err = HVD_ETRUNC;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t hvd_rbuf_u8(struct hvd_rbuf *r)
{
    const uint8_t *p = take(r, 1);
    return p ? p[0] : 0;
}

uint32_t hvd_rbuf_u32(struct hvd_rbuf *r)
{
    const uint8_t *p = take(r, 4);
    if (p == NULL)
        return 0;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

int32_t hvd_rbuf_i32(struct hvd_rbuf *r)
{
    return (int32_t)hvd_rbuf_u32(r);
}

const uint8_t *hvd_rbuf_bytes(struct hvd_rbuf *r, size_t *len)
{
    uint32_t n = hvd_rbuf_u32(r);
    const uint8_t *p = take(r, n);
    *len = p ? n : 0;
    return p;
}

char *hvd_rbuf_strdup(struct hvd_rbuf *r)
{
    size_t n;
    const uint8_t *p = hvd_rbuf_bytes(r, &n);
    if (p == NULL)
        return NULL;
    if (memchr(p, 0, n) != NULL) {
        r->err = HVD_EPROTO;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (s == NULL) {
        r->err = HVD_ENOMEM;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

const uint8_t *hvd_rbuf_rest(struct hvd_rbuf *r, size_t *len)
{
    *len = r->err ? 0 : r->len - r->off;
    const uint8_t *p = r->err ? NULL : r->p + r->off;
    if (!r->err)
        r->off = r->len;
    return p;
}

int hvd_rbuf_done(const struct hvd_rbuf *r)
{
    if (r->err)
        return r->err;
    return r->off == r->len ? 0 : HVD_EPROTO;
}
