/*
 * The launcher's own error codes: failures of parsing and planning that
 * libhvd never has. They share the number space of libhvd's table
 * (common/hvd_err.h), in the numbers it leaves free, so that one int
 * carries either kind and hr_err_str() describes both.
 */
#ifndef HR_ERRCODE_H
#define HR_ERRCODE_H

#include "common/hvd_err.h"

/* Each entry: name, value, message. The values are fixed. */
#define HR_ERRNO_MAP(XX)                                                       \
    XX(EIO, -3, "input/output error")                                          \
    XX(ERANGE, -4, "value out of range")                                       \
    XX(EPARSE, -5, "malformed input")                                          \
    XX(EDUP, -6, "duplicate entry")                                            \
    XX(ENOSLOTS, -10, "not enough slots")

enum hr_errno {
#define XX(name, val, msg) HVD_##name = val,
    HR_ERRNO_MAP(XX)
#undef XX
};

/* The message of a code of either table (hvd_strerror's for libhvd's). */
const char *hr_err_str(int err);
/* Its name, such as "HVD_EPARSE" (hvd_err_name's for libhvd's). */
const char *hr_err_name(int err);

#endif
