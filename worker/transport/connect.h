/* How a transport connects to its peers once hvd__join has its part of
 * the rendezvous peer table: the authenticated rings of TCP links, and
 * the host's shared memory. join.c calls a transport's connect entry;
 * the entries call these, and nothing here calls back into join.c. */
#ifndef HVD_CONNECT_H
#define HVD_CONNECT_H

#include <stddef.h>
#include <stdint.h>

struct hvd_ctx;
struct hvd_ring;
struct hvd_rdv_peers;

/* What hvd__join hands a transport's connect entry. */
struct hvd_link {
    int lfd;                        /* listening for peers */
    const struct hvd_rdv_peers *pt; /* the peers this rank connects to */
    int64_t deadline;               /* hvd__now_ms() clock */
};

/* Connects ring r (r->rank and r->size set) with the hellos of the ring of
 * every rank or (cross) of host leaders: member i of the ring is global
 * rank global[i] (NULL: i). Each member connects to the next one and, in
 * rings of 4 or more, to the ones 2, 4, 8, ... ahead (Bruck's links). */
int hvd__connect_ring(struct hvd_ctx *c, struct hvd_ring *r, int cross,
                      const int *global, const struct hvd_link *l, char *err,
                      size_t errlen);
/* Sets up shared memory among this host's ranks (c->topo), if it has more
 * than one. */
int hvd__connect_shm(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                     size_t errlen);

#endif
