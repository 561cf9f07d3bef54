/* The host transports behind one table: the TCP ring, shared memory on one
 * host, hierarchical across hosts, and MPI; coll.c dispatches through the
 * one hvd__topo_choose (for hvd__join) or hvd__mpi_join chose. */
#ifndef HVD_TRANSPORT_H
#define HVD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

struct hvd_ctx;
struct hvd_link;

/*
 * Every entry takes the context first and works on the state it keeps
 * there (c->ring, c->shm, c->xring, c->mpi). The collectives are as the
 * hvd__coll_* functions of the same names. An entry left NULL falls back
 * in coll.c, as its comment says.
 */
struct hvd_transport {
    /* What hvd_transport() returns: "ring", "shm", "hier" or "mpi". */
    const char *name;
    /* Connects the transport among the ranks of the rendezvous peer table
     * (NULL: the transport joins on its own, as MPI does). */
    int (*connect)(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                   size_t errlen);
    int (*allreduce)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                     size_t count, hvd_dtype dt, hvd_op op, char *err,
                     size_t errlen);
    /* NULL: allreduce, since the transport picks its own segments. */
    int (*reduce_segs)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                       size_t count, hvd_dtype dt, hvd_op op,
                       const size_t *bounds, char *err, size_t errlen);
    /* NULL: reduce_segs with NULL bounds, which fold in rank order. */
    int (*gather_reduce)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op, char *err,
                         size_t errlen);
    /* Only called with a root that is a rank. */
    int (*broadcast)(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                     char *err, size_t errlen);
    int (*allgatherv)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                      const size_t *bytes, char *err, size_t errlen);
    /* Elements bounds[rank] .. bounds[rank+1]-1 (size+1 bounds) of the
     * allreduce of count elements into recvbuf, with the bits allreduce
     * gives them. NULL: the allreduce into scratch memory, then the slice
     * (hvd__coll_reducescatter_by_allreduce). */
    int (*reducescatter)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op,
                         const size_t *bounds, char *err, size_t errlen);
    /* bytes[i * size + j] go from rank i to rank j: sendbuf holds this
     * rank's blocks for ranks 0, 1, ... end to end, recvbuf gets the
     * blocks for this rank in rank order. NULL: an allgatherv of every
     * rank's whole sendbuf (hvd__coll_alltoallv_by_allgatherv). */
    int (*alltoallv)(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                     const size_t *bytes, char *err, size_t errlen);
    /* One line on the transport, for HOROVOD_LOG_LEVEL=debug. */
    void (*describe)(const struct hvd_ctx *c, char *out, size_t len);
    /* NULL: a ring neighbour's bytes or a local rank ahead in shared
     * memory show that another rank started a collective. */
    int (*peer_started)(struct hvd_ctx *c);
    /* A negotiation cycle starts (NULL: nothing to do). */
    void (*cycle_start)(struct hvd_ctx *c);
    /* How long the idle thread may sleep before it must look for another
     * rank's start (NULL: as long as it likes, since a start shows on a
     * file descriptor it polls). */
    int64_t (*idle_us)(struct hvd_ctx *c);
};

/* ring.c: the ring of every rank; also a job of one. */
extern const struct hvd_transport hvd__transport_ring;
/* shm_coll.c: shared memory, every rank on one host. */
extern const struct hvd_transport hvd__transport_shm;
/* hier.c: shared memory within each host and a ring of host leaders. */
extern const struct hvd_transport hvd__transport_hier;
/* mpi_backend.c (MPI builds only): chosen by hvd__mpi_join. */
extern const struct hvd_transport hvd__transport_mpi;

#endif
