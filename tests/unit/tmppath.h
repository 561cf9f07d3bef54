/* Where the unit tests make their temporary files and folders. */
#ifndef HVD_TEST_TMPPATH_H
#define HVD_TEST_TMPPATH_H

#include <stdio.h>
#include <string.h>

/*
 * Writes into buf (len bytes) a template for mkstemp or mkdtemp:
 * "/tmp/PREFIX-" and the six characters they replace with a unique name
 * (the letter X, six times). Returns buf.
 */
static inline char *tmp_template(char *buf, size_t len, const char *prefix)
{
    int n = snprintf(buf, len, "/tmp/%s-", prefix);
    if (n > 0 && (size_t)n + 7 <= len) {
        memset(buf + n, 'X', 6);
        buf[n + 6] = '\0';
    }
    return buf;
}

#endif
