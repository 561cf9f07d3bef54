/* HMAC-SHA256 proofs of the job secret; the secret never crosses the wire. */
#ifndef HVD_AUTH_H
#define HVD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define HVD_MAC_LEN 32
#define HVD_NONCE_LEN 32

struct hvd_mac_part {
    const void *p;
    size_t len;
};

/* out = HMAC-SHA256(key, part0 || part1 || ...). 0 or HVD_ESYS. */
int hvd_hmac(const uint8_t *key, size_t keylen,
             const struct hvd_mac_part *parts, int nparts,
             uint8_t out[HVD_MAC_LEN]);
/* Constant-time comparison of two MACs: 1 when equal. */
int hvd_mac_equal(const uint8_t a[HVD_MAC_LEN], const uint8_t b[HVD_MAC_LEN]);
/* Decodes exactly 2*len hex digits into out. 0 or HVD_EINVAL. */
int hvd_hex_decode(const char *hex, uint8_t *out, size_t len);

#endif
