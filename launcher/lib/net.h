/* Small network helpers for the launcher: local hosts, free ports. */
#ifndef HR_NET_H
#define HR_NET_H

#include <stddef.h>

struct hvd_strvec;

/* 1 if name means this machine: localhost, 127.0.0.1, ::1 or its own host
 * names. Other loopback addresses (127.0.0.2) count as remote. */
int hr_host_is_local(const char *name);

/* A TCP port that is free on this host right now, or a negative code. */
int hr_free_port(void);

/* The first IPv4 address (else IPv6) of a network interface, as text.
 * 0, or -1 with a message naming the interface in out. */
int hr_net_if_addr(const char *ifname, char *out, size_t len);

/* The name of the interface that has addr (an IPv4 or IPv6 literal), for
 * Horovod's HOROVOD_GLOO_IFACE. 0, or -1 when no interface has it. */
int hr_net_addr_if(const char *addr, char *out, size_t len);

/* This host's address on the route to host (resolved here), as text.
 * 0, or 1 with "route to HOST" in out when there is none. */
int hr_net_route_addr(const char *host, char *out, size_t len);

/* Up to max addresses of this host that a process on host may reach it at,
 * appended to out in the order to try: the address on the route to host
 * (when its name resolves here), the other interfaces' addresses (IPv4
 * first), loopback last. 0 or HVD_ENOMEM. */
int hr_net_addrs_toward(const char *host, struct hvd_strvec *out, size_t max);

#endif
