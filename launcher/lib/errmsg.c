/* One-line error messages of the parsers: formatting and quoting input. */
#include "launcher/lib/errmsg.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/hvd_err.h"

void hvd_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    if (vsnprintf(err, errlen, fmt, ap) < 0)
        err[0] = '\0';
    va_end(ap);
}

int hvd_errmsg_start(char *err, size_t errlen, int args_ok)
{
    hvd_seterr(err, errlen, "%s", args_ok ? "" : "invalid argument");
    return args_ok ? 0 : HVD_EINVAL;
}

void hvd_quote(char *dst, const char *s, size_t len)
{
    if (len > HVD_QUOTE_MAX) {
        len = HVD_QUOTE_MAX;
        while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[len] = '\0';
}
