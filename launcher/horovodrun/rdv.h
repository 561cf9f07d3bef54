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

/* What an elastic job's server tells its controller (elastic.c). */
struct hr_rdv_cb {
    /* Process id registered in the generation forming. */
    void (*registered)(void *arg, int id);
    /* The generation formed: every process of the plan has its rank. */
    void (*formed)(void *arg, unsigned gen);
    /* The plan's processes did not all register within the start timeout
     * after hr_rdv_form; hr_rdv_registered says which did. */
    void (*timeout)(void *arg);
};

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
    int size; /* a fixed job's size; 0 in an elastic job */
    double start_timeout;
    /* Registered connection of each id: the rank in a fixed job, the
     * process id in an elastic one. cap entries. */
    struct hr_rdv_conn **ranks;
    int cap;
    /* The plan of the generation forming: the id of each rank, and in an
     * elastic job each rank's place (ASSIGN). A fixed job's plan is every
     * rank, once and for all. */
    int *plan_ids;
    struct hvd_rdv_assign *plan_assign;
    int plan_n;
    int plan_ready; /* the plan is set for the generation forming */
    const struct hr_rdv_cb *cb;
    void *cb_arg;
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
 *
 * size 0 makes an elastic job's server: processes register with their id,
 * cb hears of them, and each generation forms once hr_rdv_form gave its
 * plan and every process of it registered.
 */
int hr_rdv_start(struct hr_rdv *r, uv_loop_t *loop, int bind_any,
                 const char *addr, const uint8_t secret[HVD_SECRET_LEN],
                 int size, double start_timeout);
/* Elastic: the controller's callbacks (before any process starts). */
void hr_rdv_set_cb(struct hr_rdv *r, const struct hr_rdv_cb *cb, void *arg);
/*
 * Elastic: the plan of the generation forming (a new one if the last has
 * formed): ids[i] is rank i's process, assign[i] its place. Replaces a
 * plan given before for the same generation (a process failed while it
 * formed). Arms the start timeout for the plan's processes to register.
 * 0 or HVD_ENOMEM.
 */
int hr_rdv_form(struct hr_rdv *r, const int *ids,
                const struct hvd_rdv_assign *assign, int n);
/* Whether process id has registered in the generation forming. */
int hr_rdv_registered(const struct hr_rdv *r, int id);
/* Elastic: a notice of host changes to every registered process. */
void hr_rdv_notify_hosts(struct hr_rdv *r, uint64_t timestamp, uint8_t changes);
void hr_rdv_close(struct hr_rdv *r);

/*
 * Connections carried by an agent (the agents' carried rendezvous, see
 * carry.h): the server treats one like a TCP connection of its own, and
 * hands what it sends, and its end, to the carrier.
 */
struct hr_rdv_carrier {
    /* One frame for connection id (header included; takes it). */
    void (*send)(void *arg, uint32_t id, uint8_t *frame, size_t len);
    /* The server closed connection id (c is then gone). */
    void (*close)(void *arg, uint32_t id);
};
/* A connection came to the carrier; from names it in messages. It gets
 * its challenge at once. NULL when out of memory or closed already (the
 * carrier's close was then called). */
struct hr_rdv_conn *hr_rdv_carried_open(struct hr_rdv *r,
                                        const struct hr_rdv_carrier *carrier,
                                        void *arg, uint32_t id,
                                        const char *from);
/* Bytes the connection sent, as they came. It may close (close is called
 * before this returns). */
void hr_rdv_carried_bytes(struct hr_rdv_conn *c, const void *p, size_t n);
/* The connection ended at the carrier's side (c is then gone, and close
 * is not called). */
void hr_rdv_carried_end(struct hr_rdv_conn *c);

#endif
