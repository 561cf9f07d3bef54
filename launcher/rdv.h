/* The rendezvous server: the TCP listener ranks meet through. */
#ifndef HR_RDV_H
#define HR_RDV_H

#include <uv.h>

struct hr_rdv {
    uv_tcp_t tcp;
    char addr[64]; /* address handed to the ranks */
    int port;
    int open;
};

/* Listens on addr (an IPv4 or IPv6 literal) at an ephemeral port. Returns
 * 0 or a libuv error code. */
int hr_rdv_start(struct hr_rdv *r, uv_loop_t *loop, const char *addr);
void hr_rdv_close(struct hr_rdv *r);

#endif
