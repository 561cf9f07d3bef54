/* One-line messages from the CLI and the agent to stderr. */
#ifndef HVD_LOG_H
#define HVD_LOG_H

#include <stddef.h>

/* Program name used as the prefix ("horovodrun: error: ..."). */
void hvd_log_init(const char *prog, int verbose);
int hvd_log_verbose(void);
/* Hands each message of the calling thread (without its newline) to fn
 * instead of writing it, until called with NULL: horovodrun's terminal
 * queue, which keeps them in order with the rank lines and out of the
 * status block. Other threads' messages are written as before. */
void hvd_log_redirect(void (*fn)(void *arg, const char *line, size_t len),
                      void *arg);
void hvd_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hvd_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed only with --verbose. */
void hvd_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
