/* Growable byte buffers. */
#ifndef HVD_BUF_H
#define HVD_BUF_H

#include <stddef.h>
#include <stdint.h>

/* Grows a buffer to at least want bytes (contents kept). 0 or HVD_ENOMEM. */
int hvd__grow(uint8_t **buf, size_t *cap, size_t want);

#endif
