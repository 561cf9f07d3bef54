/* One-line error messages of the parsers: formatting and quoting input. */
#ifndef HVD_ERRMSG_H
#define HVD_ERRMSG_H

#include <stddef.h>

/* Longest piece of input quoted in a message. */
#define HVD_QUOTE_MAX 80

/* Formats into err (errlen bytes; nothing when err is NULL). */
void hvd_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears the message, or sets it and returns HVD_EINVAL on bad
 * arguments. */
int hvd_errmsg_start(char *err, size_t errlen, int args_ok);
/*
 * Copies at most HVD_QUOTE_MAX bytes of s into dst (HVD_QUOTE_MAX + 1
 * bytes) for quoting in a message. Control bytes become '?', so that a
 * stray newline, NUL or escape sequence cannot cut or garble the one-line
 * message, and the cut never falls inside a UTF-8 sequence.
 */
void hvd_quote(char *dst, const char *s, size_t len);

#endif
