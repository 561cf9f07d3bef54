/* The rendezvous server: ranks prove the job secret, publish their
 * data-plane address, get the peer table, and hear about failed ranks.
 * It serves the whole job: ranks that shut down and initialise again
 * (hvd_shutdown(), hvd_init()) meet anew, one generation at a time. */
#ifndef HR_RDV_H
#define HR_RDV_H

#include <stdint.h>
#include <uv.h>

#include "common/rdvproto.h"
#include "common/secret.h"

struct hr_rdv_conn;

struct hr_rdv {
    uv_loop_t *loop;
    uv_tcp_t tcp;
    uv_timer_t timer;         /* start timeout, from the first registration */
    uv_timer_t pending_timer; /* closes connections that do not register */
    char addr[64];            /* address handed to the ranks */
    int port;
    int open;      /* the timers are initialized */
    int listening; /* the listening socket is open */
    uint8_t secret[HVD_SECRET_LEN];
    int size;
    double start_timeout;
    struct hr_rdv_conn **ranks; /* registered connection of each rank */
    struct hvd_rdv_peers table; /* filled as ranks register */
    unsigned gen; /* the generation forming, or the last one formed */
    int joined;   /* ranks registered in generation gen */
    int forming;  /* gen's peer table has not gone out yet */
    int failed;   /* the start timeout passed: nobody can join any more */
    int aborted;  /* a rank failure was broadcast */
    /* Connections that have not registered yet, oldest first. */
    struct hr_rdv_conn *pending, *pending_tail;
    int npending;
    int pending_max;        /* past this many, the oldest is dropped */
    unsigned long refusals; /* peers refused or dropped before registering */
    unsigned long refusals_told; /* of those, how many a message covered */
};

/*
 * Listens at an ephemeral port for a job of size ranks, on addr (an IPv4
 * or IPv6 literal handed to the ranks), or on every address of its family
 * with bind_any (remote hosts may come in on another interface). Returns
 * 0 or a libuv error code. It listens until hr_rdv_close: a rank that said
 * goodbye may register again, and once every rank has, the new generation
 * gets its peer table.
 */
int hr_rdv_start(struct hr_rdv *r, uv_loop_t *loop, int bind_any,
                 const char *addr, const uint8_t secret[HVD_SECRET_LEN],
                 int size, double start_timeout);
void hr_rdv_close(struct hr_rdv *r);

#endif
