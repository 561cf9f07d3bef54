/* Fuzz target: the frame reader fed arbitrary streams in arbitrary chunks. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/frame.h"
#include "common/hvd_err.h"
#include "common/wire.h"

/*
 * Input layout: byte 0 picks the limit (high bit: the real HVD_FRAME_MAX,
 * else a 15-bit limit with byte 1, so that frames over it are common),
 * bytes 2-3 seed the chunk sizes, the rest is the stream.
 */
#define PARAMS 4

/* One frame as the reference parser sees it in the whole stream. */
struct ref_frame {
    size_t off; /* of the header in the stream */
    uint8_t type;
    uint32_t len;
};

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/*
 * Parses the whole stream the way frame.h describes it. Returns the state
 * it ends in: 0 when more bytes are needed, or the error of the first bad
 * header; *n gets the number of complete frames before that.
 */
static int ref_parse(const uint8_t *s, size_t len, uint32_t max,
                     struct ref_frame *frames, size_t *n)
{
    size_t off = 0;

    *n = 0;
    for (;;) {
        if (len - off < HVD_FRAME_HDR)
            return 0;
        if (s[off] != (HVD_FRAME_MAGIC >> 8) ||
            s[off + 1] != (HVD_FRAME_MAGIC & 0xff) ||
            s[off + 2] != HVD_FRAME_VERSION)
            return HVD_EPROTO;
        uint32_t flen = get_be32(s + off + 4);
        if (flen > max)
            return HVD_ETOOBIG;
        if (len - off - HVD_FRAME_HDR < flen)
            return 0;
        frames[*n] = (struct ref_frame){off, s[off + 3], flen};
        (*n)++;
        off += HVD_FRAME_HDR + flen;
    }
}

/* Re-encodes a frame through the payload writer: it must give the same
 * bytes the stream held. */
static void check_reencode(const uint8_t *want, const struct hvd_frame *f)
{
    struct hvd_wbuf w;
    uint8_t *out = NULL;
    size_t outlen = 0;

    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, f->payload, f->len);
    FUZZ_CHECK(hvd_wbuf_finish(&w, f->type, &out, &outlen) == 0);
    FUZZ_CHECK(outlen == HVD_FRAME_HDR + (size_t)f->len);
    FUZZ_CHECK(memcmp(out, want, outlen) == 0);
    free(out);
    hvd_wbuf_close(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    struct ref_frame *frames;
    size_t nref, got = 0, pos = 0;
    int want, rc = 0;

    if (size < PARAMS)
        return 0;
    uint32_t max = data[0] & 0x80 ? HVD_FRAME_MAX
                                  : (uint32_t)(data[0] & 0x7f) << 8 | data[1];
    uint32_t seed = (uint32_t)data[2] << 8 | data[3] | 0x10000u;
    const uint8_t *s = data + PARAMS;
    size_t len = size - PARAMS;

    /* Every frame takes at least a header. */
    frames = malloc((len / HVD_FRAME_HDR + 1) * sizeof(*frames));
    FUZZ_CHECK(frames != NULL);
    want = ref_parse(s, len, max, frames, &nref);

    hvd_frame_reader_init(&r, max);
    while (rc == 0 && pos < len) {
        uint32_t x = fuzz_next_rand(&seed);
        /* Mostly small chunks, sometimes empty ones, sometimes the rest. */
        size_t chunk = (x & 7) == 0 ? len - pos : (x >> 3) % 67;
        if (chunk > len - pos)
            chunk = len - pos;
        size_t held = r.len - r.off;

        /* Drained, the reader holds less than one whole frame. */
        FUZZ_CHECK(held < HVD_FRAME_HDR + (size_t)max);
        FUZZ_CHECK(hvd_frame_reader_push(&r, s + pos, chunk) == 0);
        pos += chunk;
        /* Memory follows the bytes received, never a declared length. */
        FUZZ_CHECK(r.cap <= 4096 || r.cap < 2 * (held + chunk));
        while ((rc = hvd_frame_reader_next(&r, &f)) == 1) {
            FUZZ_CHECK(got < nref);
            FUZZ_CHECK(f.type == frames[got].type);
            FUZZ_CHECK(f.len == frames[got].len);
            FUZZ_CHECK(f.payload >= r.buf && f.len <= r.len &&
                       (size_t)(f.payload - r.buf) <= r.len - f.len);
            FUZZ_CHECK(memcmp(f.payload, s + frames[got].off + HVD_FRAME_HDR,
                              f.len) == 0);
            check_reencode(s + frames[got].off, &f);
            got++;
        }
        FUZZ_CHECK(rc == 0 || rc == HVD_EPROTO || rc == HVD_ETOOBIG);
    }
    /* Chunking changes nothing: same frames, same verdict. */
    FUZZ_CHECK(got == nref);
    FUZZ_CHECK(rc == want);
    hvd_frame_reader_close(&r);
    free(frames);
    return 0;
}
