/* Fuzz target: decoders of the agent channel's messages (lib/proto.h). */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/hvd_err.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"
#include "common/wire.h"

/*
 * Input layout: byte 0 is the message type (enum hvd_msg), the rest is the
 * payload of one frame of that type.
 *
 * The JOB decoder is launcher/lib/proto.c's. The other messages are decoded
 * where they are received (launcher/horovodrun/job.c, launcher/agent/agent.c)
 * with the wire.h reader; this target decodes them the same way, as proto.h
 * lays them out, so the reader is fed every shape of payload.
 */

/* A frame's payload must be what the writer in w produces for type. */
static void check_same(struct hvd_wbuf *w, uint8_t type, const uint8_t *p,
                       size_t len)
{
    uint8_t *out = NULL;
    size_t outlen = 0;

    FUZZ_CHECK(hvd_wbuf_finish(w, type, &out, &outlen) == 0);
    FUZZ_CHECK(outlen == HVD_FRAME_HDR + len);
    FUZZ_CHECK(out[3] == type);
    FUZZ_CHECK(memcmp(out + HVD_FRAME_HDR, p, len) == 0);
    free(out);
    hvd_wbuf_close(w);
}

/* Strings of a decoded vector are NUL-terminated, no longer than the
 * payload, and the vector is NULL-terminated. */
static void check_vec(const struct hvd_strvec *sv, size_t len)
{
    FUZZ_CHECK(sv->n <= len / 4);
    FUZZ_CHECK(sv->n == 0 || sv->v[sv->n] == NULL);
    for (size_t i = 0; i < sv->n; i++)
        FUZZ_CHECK(sv->v[i] != NULL && strlen(sv->v[i]) <= len);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void fuzz_job(const uint8_t *p, size_t len)
{
    struct hvd_jobspec js;
    uint8_t *out = NULL;
    size_t outlen = 0;

    hvd_jobspec_init(&js);
    int err = hvd_jobspec_decode(&js, p, len);
    FUZZ_CHECK(err == 0 || err == HVD_EPROTO || err == HVD_ETRUNC);
    if (err == 0) {
        FUZZ_CHECK(js.cwd != NULL && strlen(js.cwd) <= len);
        FUZZ_CHECK(js.argv.n >= 1 && js.argv.v[0][0] != '\0');
        FUZZ_CHECK(js.nranks >= 1 && js.nranks <= len / 12);
        check_vec(&js.argv, len);
        check_vec(&js.env, len);
        uint32_t *ranks = malloc(js.nranks * sizeof(*ranks));
        FUZZ_CHECK(ranks != NULL);
        for (uint32_t i = 0; i < js.nranks; i++) {
            check_vec(&js.ranks[i].env, len);
            ranks[i] = js.ranks[i].rank;
        }
        qsort(ranks, js.nranks, sizeof(*ranks), cmp_u32);
        for (uint32_t i = 1; i < js.nranks; i++)
            FUZZ_CHECK(ranks[i] != ranks[i - 1]);
        free(ranks);
        /* The encoding is canonical: decode(encode(x)) gives the bytes. */
        FUZZ_CHECK(hvd_jobspec_encode(&js, &out, &outlen) == 0);
        FUZZ_CHECK(outlen == HVD_FRAME_HDR + len);
        FUZZ_CHECK(out[3] == HVD_MSG_JOB);
        FUZZ_CHECK(memcmp(out + HVD_FRAME_HDR, p, len) == 0);
        free(out);
    }
    hvd_jobspec_close(&js);
    /* Closing twice is harmless: close leaves an empty spec. */
    hvd_jobspec_close(&js);
}

/* HELLO (hvd_hello_decode, as launcher/horovodrun/job.c reads it): u32 version,
 * str host, i32 gpus, i32 port. */
static void fuzz_hello(const uint8_t *p, size_t len)
{
    struct hvd_hello h;
    struct hvd_wbuf w;

    int err = hvd_hello_decode(&h, p, len);
    FUZZ_CHECK(err == 0 || err == HVD_EPROTO || err == HVD_ETRUNC ||
               err == HVD_ENOTSUP);
    /* Another version is told only by the version word, and damage is
     * never taken for another version. */
    uint32_t version = len < 4 ? 0
                               : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                                     (uint32_t)p[2] << 8 | p[3];
    FUZZ_CHECK(h.version == version);
    FUZZ_CHECK((err == HVD_ENOTSUP) ==
               (len >= 4 && version != HVD_PROTO_VERSION));
    FUZZ_CHECK(len >= 4 || err == HVD_ETRUNC);
    FUZZ_CHECK((err == 0) == (h.host != NULL));
    if (err == 0) {
        FUZZ_CHECK(strlen(h.host) == len - 16);
        hvd_wbuf_init(&w);
        hvd_wbuf_u32(&w, h.version);
        hvd_wbuf_str(&w, h.host);
        hvd_wbuf_i32(&w, h.gpus);
        hvd_wbuf_i32(&w, h.port);
        check_same(&w, HVD_MSG_HELLO, p, len);
    }
    hvd_hello_close(&h);
}

/* SIGNAL and PING carry one u32; STOP carries one u8 (launcher/agent/agent.c).
 */
static void fuzz_word(uint8_t type, const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    struct hvd_wbuf w;
    uint32_t v;

    hvd_rbuf_init(&r, p, len);
    v = type == HVD_MSG_STOP ? hvd_rbuf_u8(&r) : hvd_rbuf_u32(&r);
    int err = hvd_rbuf_done(&r);
    FUZZ_CHECK((err == 0) == (len == (type == HVD_MSG_STOP ? 1u : 4u)));
    if (err == 0 && type == HVD_MSG_SIGNAL && (v == 0 || v >= NSIG))
        err = HVD_EPROTO;
    if (err == 0 && type == HVD_MSG_PING && v == 0)
        err = HVD_EPROTO;
    if (err == 0) {
        hvd_wbuf_init(&w);
        if (type == HVD_MSG_STOP)
            hvd_wbuf_u8(&w, (uint8_t)v);
        else
            hvd_wbuf_u32(&w, v);
        check_same(&w, type, p, len);
    }
}

/* LINE, as launcher/horovodrun/job.c reads it: u32 rank, u8 stream, u8 term,
 * text. */
static void fuzz_line(const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    struct hvd_wbuf w;
    size_t n;

    hvd_rbuf_init(&r, p, len);
    uint32_t rank = hvd_rbuf_u32(&r);
    uint8_t stream = hvd_rbuf_u8(&r);
    uint8_t term = hvd_rbuf_u8(&r);
    const uint8_t *text = hvd_rbuf_rest(&r, &n);
    FUZZ_CHECK((r.err == 0) == (len >= 6));
    if (r.err)
        return;
    FUZZ_CHECK(text == p + 6 && n == len - 6);
    FUZZ_CHECK(hvd_rbuf_done(&r) == 0);
    if (term > 3)
        return;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, rank);
    hvd_wbuf_u8(&w, stream);
    hvd_wbuf_u8(&w, term);
    hvd_wbuf_raw(&w, text, n);
    check_same(&w, HVD_MSG_LINE, p, len);
}

/* EXIT, as launcher/horovodrun/job.c reads it: u32 rank, u8 kind, i32 code. */
static void fuzz_exit(const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    struct hvd_wbuf w;

    hvd_rbuf_init(&r, p, len);
    uint32_t rank = hvd_rbuf_u32(&r);
    uint8_t kind = hvd_rbuf_u8(&r);
    int32_t code = hvd_rbuf_i32(&r);
    int err = hvd_rbuf_done(&r);
    FUZZ_CHECK((err == 0) == (len == 9));
    if (err || kind > HVD_EXIT_NOCWD)
        return;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, rank);
    hvd_wbuf_u8(&w, kind);
    hvd_wbuf_i32(&w, code);
    check_same(&w, HVD_MSG_EXIT, p, len);
}

/* NOTE: u8 level, str text. */
static void fuzz_note(const uint8_t *p, size_t len)
{
    struct hvd_rbuf r;
    struct hvd_wbuf w;

    hvd_rbuf_init(&r, p, len);
    uint8_t level = hvd_rbuf_u8(&r);
    char *text = hvd_rbuf_strdup(&r);
    int err = hvd_rbuf_done(&r);
    if (err == 0) {
        FUZZ_CHECK(text != NULL && strlen(text) == len - 5);
        hvd_wbuf_init(&w);
        hvd_wbuf_u8(&w, level);
        hvd_wbuf_str(&w, text);
        check_same(&w, HVD_MSG_NOTE, p, len);
    }
    free(text);
}

/* STDIN is raw bytes; the writer must pass them through unchanged. */
static void fuzz_stdin(const uint8_t *p, size_t len)
{
    struct hvd_wbuf w;

    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, p, len);
    check_same(&w, HVD_MSG_STDIN, p, len);
}

/* The tree launch's SPAWN and GONE: a decoded message encodes back to the
 * same bytes; TO, FROM and DROP: the id, then the rest untouched. */
static void fuzz_relay(uint8_t type, const uint8_t *p, size_t len)
{
    uint8_t *out = NULL;
    size_t outlen = 0, n;
    const uint8_t *rest;
    uint32_t id;
    int err;

    if (type == HVD_MSG_SPAWN) {
        struct hvd_spawn s;
        if ((err = hvd_spawn_decode(&s, p, len)) == 0) {
            FUZZ_CHECK(s.host[0] != '\0' && s.port <= 65535);
            FUZZ_CHECK(hvd_spawn_encode(&s, &out, &outlen) == 0);
        }
        hvd_spawn_close(&s);
    } else if (type == HVD_MSG_GONE) {
        struct hvd_gone g;
        if ((err = hvd_gone_decode(&g, p, len)) == 0)
            FUZZ_CHECK(hvd_gone_encode(&g, &out, &outlen) == 0);
        hvd_gone_close(&g);
    } else {
        err = hvd_relay_unwrap(p, len, &id, &rest, &n);
        FUZZ_CHECK((err == 0) == (len >= 4));
        if (err == 0) {
            FUZZ_CHECK(rest == p + 4 && n == len - 4);
            FUZZ_CHECK(hvd_relay_wrap(type, id, rest, n, &out, &outlen) == 0);
        }
    }
    FUZZ_CHECK(err == 0 || err == HVD_ETRUNC || err == HVD_EPROTO);
    if (out != NULL) {
        FUZZ_CHECK(outlen == HVD_FRAME_HDR + len && out[3] == type);
        FUZZ_CHECK(memcmp(out + HVD_FRAME_HDR, p, len) == 0);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t len = size - 1;

    switch (data[0]) {
    case HVD_MSG_HELLO:
        fuzz_hello(p, len);
        break;
    case HVD_MSG_JOB:
        fuzz_job(p, len);
        break;
    case HVD_MSG_STDIN:
        fuzz_stdin(p, len);
        break;
    case HVD_MSG_SIGNAL:
    case HVD_MSG_STOP:
    case HVD_MSG_PING:
        fuzz_word(data[0], p, len);
        break;
    case HVD_MSG_LINE:
        fuzz_line(p, len);
        break;
    case HVD_MSG_EXIT:
        fuzz_exit(p, len);
        break;
    case HVD_MSG_NOTE:
        fuzz_note(p, len);
        break;
    case HVD_MSG_SPAWN:
    case HVD_MSG_TO:
    case HVD_MSG_FROM:
    case HVD_MSG_GONE:
    case HVD_MSG_DROP:
        fuzz_relay(data[0], p, len);
        break;
    default:
        /* Any other type byte is the JOB decoder's: it is the big one. */
        fuzz_job(p, len);
        break;
    }
    return 0;
}
