/* Error codes shared by every role: libhvd's table, which horovodrun's own
 * (launcher/lib/errcode.h) extends into the numbers it leaves free. */
#ifndef HVD_ERR_H
#define HVD_ERR_H

/*
 * Each entry: name, value, message. The installed header hvd.h publishes
 * the same table as HVD_ERRNO_MAP, spelled out there because it must stand
 * alone; worker/errcodes.c fails to compile where the two differ in a
 * name, a value or a message's length, and hvd_strerror's messages are
 * the ones of this table.
 */
#define HVD_ERR_MAP(XX)                                                        \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(ETOOBIG, -7, "frame larger than the limit")                             \
    XX(EPROTO, -8, "protocol error")                                           \
    XX(ETRUNC, -9, "truncated message")                                        \
    XX(ESYS, -11, "system call failed")                                        \
    XX(ENOTINIT, -13, "hvd_init() has not been called")                        \
    XX(EINIT, -14, "hvd_init() was already called")                            \
    XX(ETIMEDOUT, -15, "timed out")                                            \
    XX(EPEER, -16, "a peer rank failed or disconnected")                       \
    XX(EAUTH, -17, "authentication with the job secret failed")                \
    XX(ECONNECT, -18, "cannot connect")                                        \
    XX(EENV, -19, "invalid horovodrun environment")                            \
    XX(ESHUTDOWN, -20, "the runtime was shut down")                            \
    XX(ENOTSUP, -21, "not supported")                                          \
    XX(EMISMATCH, -22, "ranks disagree about a named operation")               \
    XX(ENOTMEMBER, -23, "this rank is not in the process set")

/* hvd.h declares the same enum under the same guard, so that a file of
 * libhvd may include both headers, in either order. */
#ifndef HVD_ERRNO_DECLARED
#define HVD_ERRNO_DECLARED
enum hvd_errno {
#define XX(name, val, msg) HVD_##name = val,
    HVD_ERR_MAP(XX)
#undef XX
};
#endif

/* libhvd exports these two (hvd.h declares them as its own); err.c, which
 * defines them, sees only this header. */
#if defined(__GNUC__)
#define HVD_ERR_EXPORT __attribute__((visibility("default")))
#else
#define HVD_ERR_EXPORT
#endif

/* A message for an error code; never NULL. */
HVD_ERR_EXPORT const char *hvd_strerror(int err);
/* The code's name, e.g. "HVD_EPEER"; never NULL. */
HVD_ERR_EXPORT const char *hvd_err_name(int err);

#endif
