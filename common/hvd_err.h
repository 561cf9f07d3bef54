/* Error codes shared by every role: one X-macro table, libuv style. */
#ifndef HVD_ERR_H
#define HVD_ERR_H

/* Each entry: name, value, message. Values are negative; 0 is success. */
#define HVD_ERRNO_MAP(XX)                                                      \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(EIO, -3, "input/output error")                                          \
    XX(ERANGE, -4, "value out of range")                                       \
    XX(EPARSE, -5, "malformed input")                                          \
    XX(EDUP, -6, "duplicate entry")                                            \
    XX(ETOOBIG, -7, "frame larger than the limit")                             \
    XX(EPROTO, -8, "protocol error")                                           \
    XX(ETRUNC, -9, "truncated message")                                        \
    XX(ENOSLOTS, -10, "not enough slots")                                      \
    XX(ESYS, -11, "system call failed")                                        \
    XX(EAGAIN, -12, "need more data")

enum hvd_errno {
#define XX(name, val, msg) HVD_##name = val,
    HVD_ERRNO_MAP(XX)
#undef XX
};

/* Human-readable message for an error code; never NULL. */
const char *hvd_strerror(int err);
/* Symbolic name ("HVD_EINVAL") for an error code; never NULL. */
const char *hvd_err_name(int err);

#endif
