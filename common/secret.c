/* Job secret generation and hex encoding. */
#include "common/secret.h"

#include <errno.h>
#include <sys/random.h>

#include "common/hvd_err.h"

int hvd_secret_new(uint8_t out[HVD_SECRET_LEN])
{
    size_t off = 0;
    while (off < HVD_SECRET_LEN) {
        ssize_t n = getrandom(out + off, HVD_SECRET_LEN - off, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return HVD_ESYS;
        off += (size_t)n;
    }
    return 0;
}

void hvd_hex_encode(const uint8_t *p, size_t len, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[p[i] >> 4];
        hex[2 * i + 1] = digits[p[i] & 15];
    }
    hex[2 * len] = '\0';
}
