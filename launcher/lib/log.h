/* One-line messages from the CLI and the agent to stderr. */
#ifndef HVD_LOG_H
#define HVD_LOG_H

/* Program name used as the prefix ("horovodrun: error: ..."). */
void hvd_log_init(const char *prog, int verbose);
int hvd_log_verbose(void);
void hvd_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hvd_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed only with --verbose. */
void hvd_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
