/* Growable byte buffers. */
#ifndef HVD_BUF_H
#define HVD_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Grows a buffer to at least want bytes (contents kept). 0 or HVD_ENOMEM. */
int hvd__grow(uint8_t **buf, size_t *cap, size_t want);

/* Native-order loads and stores at any alignment (messages and slots stay
 * on one host's processes or between ranks of one build). */
static inline uint32_t hvd__get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t hvd__get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void hvd__put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

#endif
