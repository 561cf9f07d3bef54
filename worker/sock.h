/* Blocking-with-deadline socket helpers for libhvd's start-up. */
#ifndef HVD_SOCK_H
#define HVD_SOCK_H

#include <stddef.h>
#include <stdint.h>

#include "common/frame.h"

/* Connects to host:port (numeric or name) before deadline_ms, trying again
 * while the connection is refused if retry_refused (the listener may not
 * be up yet). Returns the fd or a negative hvd code with errno describing
 * the cause. */
int hvd__sock_connect(const char *host, int port, int64_t deadline_ms,
                      int retry_refused);
/* A listening TCP socket on any address of the given family (AF_INET or
 * AF_INET6) at an ephemeral port; *port receives it. */
int hvd__sock_listen(int family, int backlog, int *port);
/* Accepts one connection before the deadline (HVD_ETIMEDOUT). */
int hvd__sock_accept(int lfd, int64_t deadline_ms);
/* Sends or receives exactly len bytes before the deadline. 0, HVD_ETIMEDOUT,
 * HVD_EPEER (closed) or HVD_ESYS (errno set). */
int hvd__sock_send_all(int fd, const void *p, size_t len, int64_t deadline);
int hvd__sock_recv_all(int fd, void *p, size_t len, int64_t deadline);
/* Reads until r holds a whole frame. 1 with f filled, or a negative code. */
int hvd__sock_recv_frame(int fd, struct hvd_frame_reader *r,
                         struct hvd_frame *f, int64_t deadline_ms);
/*
 * Data-plane settings: non-blocking, TCP_NODELAY, larger buffers, and a
 * dead-peer bound: keepalive on an idle connection after about timeout_s
 * seconds, TCP_USER_TIMEOUT on data not taken after 1.5 timeout_s + 1 s
 * (after the collectives' own progress timeout).
 */
void hvd__sock_tune(int fd, int timeout_s);
/* The local IP address of a connected socket, as text. */
int hvd__sock_local_ip(int fd, char *out, size_t outlen);

#endif
