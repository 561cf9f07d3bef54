/* Rendezvous listener. The protocol that ranks speak on it (registration
 * with the job secret, peer table) arrives with libhvd; until then every
 * connection is accepted and closed. */
#include "rdv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    uv_tcp_t *c = malloc(sizeof(*c));
    if (c == NULL)
        return;
    uv_tcp_init(server->loop, c);
    if (uv_accept(server, (uv_stream_t *)c) == 0)
        hvd_log_info("rendezvous: connection accepted and closed (no "
                     "protocol yet)");
    uv_close((uv_handle_t *)c, free_handle);
}

int hr_rdv_start(struct hr_rdv *r, uv_loop_t *loop, const char *addr)
{
    struct sockaddr_storage ss;
    int namelen = sizeof(ss);
    int err;

    memset(r, 0, sizeof(*r));
    if (strchr(addr, ':') != NULL)
        err = uv_ip6_addr(addr, 0, (struct sockaddr_in6 *)&ss);
    else
        err = uv_ip4_addr(addr, 0, (struct sockaddr_in *)&ss);
    if (err)
        return err;
    if ((err = uv_tcp_init(loop, &r->tcp)))
        return err;
    r->open = 1;
    if ((err = uv_tcp_bind(&r->tcp, (struct sockaddr *)&ss, 0)) ||
        (err = uv_listen((uv_stream_t *)&r->tcp, 128, on_connection)) ||
        (err = uv_tcp_getsockname(&r->tcp, (struct sockaddr *)&ss, &namelen))) {
        hr_rdv_close(r);
        return err;
    }
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    r->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

void hr_rdv_close(struct hr_rdv *r)
{
    if (r == NULL || !r->open)
        return;
    r->open = 0;
    uv_close((uv_handle_t *)&r->tcp, NULL);
}
