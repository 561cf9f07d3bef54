/* The per-job secret: random bytes from the OS, shown only as hex. */
#ifndef HVD_SECRET_H
#define HVD_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define HVD_SECRET_LEN 32

/* Fills out with fresh random bytes from the kernel. 0 or HVD_ESYS. */
int hvd_secret_new(uint8_t out[HVD_SECRET_LEN]);
/* Writes 2*len lowercase hex digits and a NUL into hex. */
void hvd_hex_encode(const uint8_t *p, size_t len, char *hex);

#endif
