/* Encoding and decoding of the tree launch's messages. */
#include "launcher/lib/relayproto.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "common/wire.h"
#include "launcher/lib/proto.h"

int hvd_spawn_encode(const struct hvd_spawn *s, uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, s->id);
    hvd_wbuf_str(&w, s->host);
    hvd_wbuf_u32(&w, s->port);
    hvd_wbuf_str(&w, s->identity ? s->identity : "");
    hvd_wbuf_str(&w, s->agent ? s->agent : "");
    hvd_wbuf_u8(&w, s->accept_new);
    hvd_wbuf_u32(&w, s->retry_ms);
    hvd_wbuf_str(&w, s->srun ? s->srun : "");
    hvd_wbuf_str(&w, s->rsh ? s->rsh : "");
    int err = hvd_wbuf_finish(&w, HVD_MSG_SPAWN, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_spawn_decode(struct hvd_spawn *s, const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    memset(s, 0, sizeof(*s));
    hvd_rbuf_init(&r, p, len);
    s->id = hvd_rbuf_u32(&r);
    s->host = hvd_rbuf_strdup(&r);
    s->port = hvd_rbuf_u32(&r);
    s->identity = hvd_rbuf_strdup(&r);
    s->agent = hvd_rbuf_strdup(&r);
    s->accept_new = hvd_rbuf_u8(&r);
    s->retry_ms = hvd_rbuf_u32(&r);
    s->srun = hvd_rbuf_strdup(&r);
    s->rsh = hvd_rbuf_strdup(&r);
    int err = hvd_rbuf_done(&r);
    if (err == 0 &&
        (s->host[0] == '\0' || s->port > 65535 || (s->srun[0] && s->rsh[0])))
        err = HVD_EPROTO;
    if (err)
        hvd_spawn_close(s);
    return err;
}

void hvd_spawn_close(struct hvd_spawn *s)
{
    if (s == NULL)
        return;
    free(s->host);
    free(s->identity);
    free(s->agent);
    free(s->srun);
    free(s->rsh);
    s->host = s->identity = s->agent = s->srun = s->rsh = NULL;
}

int hvd_relay_wrap(uint8_t type, uint32_t id, const void *p, size_t n,
                   uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, id);
    if (n > 0)
        hvd_wbuf_raw(&w, p, n);
    int err = hvd_wbuf_finish(&w, type, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_relay_unwrap(const uint8_t *p, size_t len, uint32_t *id,
                     const uint8_t **rest, size_t *n)
{
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, p, len);
    *id = hvd_rbuf_u32(&r);
    *rest = hvd_rbuf_rest(&r, n);
    return r.err;
}

int hvd_gone_encode(const struct hvd_gone *g, uint8_t **out, size_t *outlen)
{
    struct hvd_wbuf w;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, g->id);
    hvd_wbuf_i32(&w, g->status);
    hvd_wbuf_i32(&w, g->signal);
    hvd_wbuf_str(&w, g->why ? g->why : "");
    int err = hvd_wbuf_finish(&w, HVD_MSG_GONE, out, outlen);
    hvd_wbuf_close(&w);
    return err;
}

int hvd_gone_decode(struct hvd_gone *g, const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    memset(g, 0, sizeof(*g));
    hvd_rbuf_init(&r, p, len);
    g->id = hvd_rbuf_u32(&r);
    g->status = hvd_rbuf_i32(&r);
    g->signal = hvd_rbuf_i32(&r);
    g->why = hvd_rbuf_strdup(&r);
    int err = hvd_rbuf_done(&r);
    if (err)
        hvd_gone_close(g);
    return err;
}

void hvd_gone_close(struct hvd_gone *g)
{
    if (g == NULL)
        return;
    free(g->why);
    g->why = NULL;
}
