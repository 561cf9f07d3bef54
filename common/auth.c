/* HMAC-SHA256 through OpenSSL's EVP_MAC interface. */
#include "common/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

#include "common/hvd_err.h"

int hvd_hmac(const uint8_t *key, size_t keylen,
             const struct hvd_mac_part *parts, int nparts,
             uint8_t out[HVD_MAC_LEN])
{
    static char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    size_t outlen = 0;
    int err = HVD_ESYS;

    if (ctx == NULL || !EVP_MAC_init(ctx, key, keylen, params))
        goto out;
    for (int i = 0; i < nparts; i++)
        if (!EVP_MAC_update(ctx, parts[i].p, parts[i].len))
            goto out;
    if (EVP_MAC_final(ctx, out, &outlen, HVD_MAC_LEN) && outlen == HVD_MAC_LEN)
        err = 0;
out:
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return err;
}

int hvd_mac_equal(const uint8_t a[HVD_MAC_LEN], const uint8_t b[HVD_MAC_LEN])
{
    return CRYPTO_memcmp(a, b, HVD_MAC_LEN) == 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hvd_hex_decode(const char *hex, uint8_t *out, size_t len)
{
    if (hex == NULL || strlen(hex) != 2 * len)
        return HVD_EINVAL;
    for (size_t i = 0; i < len; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return HVD_EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}
