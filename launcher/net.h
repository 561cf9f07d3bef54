/* Small network helpers for the launcher: local hosts, free ports. */
#ifndef HR_NET_H
#define HR_NET_H

/* 1 if name means this machine: localhost, 127.0.0.1, ::1 or its own host
 * names. Other loopback addresses (127.0.0.2) count as remote. */
int hr_host_is_local(const char *name);

/* A TCP port that is free on this host right now, or a negative code. */
int hr_free_port(void);

#endif
