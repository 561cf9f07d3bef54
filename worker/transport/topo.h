/* Which ranks share a host, and the host transport that follows from it:
 * the TCP ring, shared memory when every rank is on one host, or
 * hierarchical (shared memory within each host and a ring of one leader
 * per host across hosts). MPI's is chosen by hvd__mpi_join instead. */
#ifndef HVD_TOPO_H
#define HVD_TOPO_H

#include <stddef.h>
#include <stdint.h>

/* Which ranks share a host, from the rendezvous layout. */
struct hvd_topo {
    int nhosts;
    int host;       /* this rank's host, by order of first appearance */
    int *first;     /* each host's lowest rank */
    int *count;     /* each host's number of ranks */
    int contiguous; /* each host's ranks are first .. first+count-1 */
    int most;       /* the largest count */
    uint8_t *buf;   /* a leader's accumulator (hierarchical allreduce) */
    size_t cap;
};

struct hvd_transport;
struct hvd_rdv_layout;

/* 0 or HVD_ENOMEM. */
int hvd__topo_build(struct hvd_topo *t, const struct hvd_rdv_layout *l,
                    int rank);
void hvd__topo_close(struct hvd_topo *t);
/* The transport for this topology and the HOROVOD_SHM_DISABLE and
 * HOROVOD_HIERARCHICAL_ALLREDUCE settings (the same on every rank); never
 * MPI's, which hvd__mpi_join sets. */
const struct hvd_transport *hvd__topo_choose(const struct hvd_topo *t,
                                             int size);

#endif
