/* Payload encoding for frames: a growable writer and a bounds-checked reader.
 */
#ifndef HVD_WIRE_H
#define HVD_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/frame.h"

/*
 * The writer reserves room for a frame header at the front, so a finished
 * buffer is sent as one frame without copying.
 */
struct hvd_wbuf {
    uint8_t *data;
    size_t len; /* header included */
    size_t cap;
    int err; /* first error; later puts are ignored */
};

void hvd_wbuf_init(struct hvd_wbuf *w);
void hvd_wbuf_close(struct hvd_wbuf *w);
void hvd_wbuf_u8(struct hvd_wbuf *w, uint8_t v);
void hvd_wbuf_u32(struct hvd_wbuf *w, uint32_t v);
void hvd_wbuf_i32(struct hvd_wbuf *w, int32_t v);
/* Length-prefixed (u32) bytes. */
void hvd_wbuf_bytes(struct hvd_wbuf *w, const void *p, size_t len);
void hvd_wbuf_str(struct hvd_wbuf *w, const char *s);
/* Raw bytes with no length prefix (the rest of the payload). */
void hvd_wbuf_raw(struct hvd_wbuf *w, const void *p, size_t len);
/*
 * Writes the header for type and hands over the frame: *out and *outlen
 * describe header + payload, owned by the caller (free()). The writer is
 * reset. Returns the first error seen, or HVD_ETOOBIG over HVD_FRAME_MAX.
 */
int hvd_wbuf_finish(struct hvd_wbuf *w, uint8_t type, uint8_t **out,
                    size_t *outlen);

struct hvd_rbuf {
    const uint8_t *p;
    size_t len;
    size_t off;
    int err; /* HVD_ETRUNC once a read ran past the end */
};

void hvd_rbuf_init(struct hvd_rbuf *r, const void *p, size_t len);
uint8_t hvd_rbuf_u8(struct hvd_rbuf *r);
uint32_t hvd_rbuf_u32(struct hvd_rbuf *r);
int32_t hvd_rbuf_i32(struct hvd_rbuf *r);
/* Length-prefixed bytes: a pointer into the payload, or NULL on error. */
const uint8_t *hvd_rbuf_bytes(struct hvd_rbuf *r, size_t *len);
/* Length-prefixed string as a new NUL-terminated copy; NULL on error. An
 * embedded NUL is an error (HVD_EPROTO). */
char *hvd_rbuf_strdup(struct hvd_rbuf *r);
/* The unread rest of the payload. */
const uint8_t *hvd_rbuf_rest(struct hvd_rbuf *r, size_t *len);
/* 0 when everything read so far was in bounds and nothing is left over. */
int hvd_rbuf_done(const struct hvd_rbuf *r);

#endif
