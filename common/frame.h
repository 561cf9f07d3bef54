/* Length-prefixed, versioned, bounded frames for the agent channel. */
#ifndef HVD_FRAME_H
#define HVD_FRAME_H

#include <stddef.h>
#include <stdint.h>

/*
 * A frame is an 8-byte header followed by the payload:
 *   u16 magic 0x4856 ("HV"), u8 version, u8 type, u32 payload length,
 * all big-endian. A length above the reader's limit is an error, never an
 * allocation.
 */
#define HVD_FRAME_MAGIC 0x4856u
#define HVD_FRAME_VERSION 1u
#define HVD_FRAME_HDR 8u
/* Default limit: a 8 MiB line plus its header fields fits. */
#define HVD_FRAME_MAX (8u * 1024 * 1024 + 4096)

struct hvd_frame {
    uint8_t type;
    uint32_t len;
    const uint8_t *payload; /* valid until the next reader call */
};

struct hvd_frame_reader {
    uint8_t *buf;
    size_t len; /* bytes held */
    size_t off; /* start of the next unread frame */
    size_t cap;
    uint32_t max; /* largest payload accepted */
};

void hvd_frame_reader_init(struct hvd_frame_reader *r, uint32_t max);
void hvd_frame_reader_close(struct hvd_frame_reader *r);
/* Appends received bytes. 0 or HVD_ENOMEM. */
int hvd_frame_reader_push(struct hvd_frame_reader *r, const void *data,
                          size_t len);
/*
 * Takes the next complete frame: 1 when f is filled, 0 when more bytes are
 * needed, HVD_EPROTO for a bad magic or version, HVD_ETOOBIG for a length
 * over the limit. After an error the stream is unusable.
 */
int hvd_frame_reader_next(struct hvd_frame_reader *r, struct hvd_frame *f);

/* Writes a header for a payload of len bytes into hdr. */
void hvd_frame_header(uint8_t hdr[HVD_FRAME_HDR], uint8_t type, uint32_t len);

#endif
