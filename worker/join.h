/* How hvd_init joins the job: who started this process, the rendezvous,
 * and the connections a transport makes to its peers. */
#ifndef HVD_JOIN_H
#define HVD_JOIN_H

#include <stddef.h>
#include <stdint.h>

struct hvd_ctx;
struct hvd_ring;
struct hvd_rdv_peers;

/* Who started this process, which decides how hvd_init joins the job. */
enum hvd_join_kind {
    HVD_JOIN_ALONE,      /* nobody: a job of one */
    HVD_JOIN_HOROVODRUN, /* the env contract and the rendezvous server */
    HVD_JOIN_MPI         /* mpirun, or HOROVOD_CONTROLLER=mpi */
};
/* The kind from the environment, or a negative code (with err filled)
 * when it asks for MPI and this build has none. */
int hvd__join_kind(char *err, size_t errlen);
/* Meets the other ranks (env, rendezvous, then the transport's connect). */
int hvd__join(struct hvd_ctx *c, char *err, size_t errlen);
/* Says goodbye to the rendezvous server and waits (up to a second) until
 * it has closed the connection, so that a later hvd_init in this process
 * finds this rank's place free. */
void hvd__join_leave(struct hvd_ctx *c);

/* What hvd__join hands a transport's connect entry. */
struct hvd_link {
    int lfd;                        /* listening for peers */
    const struct hvd_rdv_peers *pt; /* every rank's address and host */
    int64_t deadline;               /* hvd__now_ms() clock */
};
/* Connects ring r (r->rank and r->size set) with the hellos of the ring of
 * every rank or (cross) of host leaders: member i of the ring is global
 * rank global[i] (NULL: i). Each member connects to the next one and, in
 * rings of 4 or more, to the ones 2, 4, 8, ... ahead (Bruck's links). */
int hvd__join_ring(struct hvd_ctx *c, struct hvd_ring *r, int cross,
                   const int *global, const struct hvd_link *l, char *err,
                   size_t errlen);
/* Sets up shared memory among this host's ranks, if it has more than one. */
int hvd__join_shm(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                  size_t errlen);

#endif
