/* The collectives on the transport each takes: the TCP ring, shared memory
 * when every rank is on one host, hierarchical (shared memory within each
 * host and a TCP ring of one leader per host across hosts), or MPI when
 * mpirun started the ranks (transport/topo.h chooses). */
#ifndef HVD_COLL_H
#define HVD_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

struct hvd_ctx;

/* Whether the reduce kernels take an allreduce of dt and op among more
 * than one rank; the shared-memory transports hand the rest to the TCP
 * ring, which copies (a job of one) or refuses it. */
int hvd__coll_kernels_take(const struct hvd_ctx *c, hvd_dtype dt, hvd_op op);

/* As the hvd__ring_* functions of the same names, on the chosen
 * transport (c->tp). */
int hvd__coll_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        size_t count, hvd_dtype dt, hvd_op op, char *err,
                        size_t errlen);
int hvd__coll_reduce_segs(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          size_t count, hvd_dtype dt, hvd_op op,
                          const size_t *bounds, char *err, size_t errlen);
int hvd__coll_gather_reduce(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, char *err, size_t errlen);
int hvd__coll_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                        char *err, size_t errlen);
int hvd__coll_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen);
/* This rank's slice of an allreduce, elements bounds[rank] ..
 * bounds[rank+1]-1 (size+1 bounds), into recvbuf (which must not overlap
 * sendbuf), with the same bits as the allreduce; and the fallback of the
 * transports that have no entry of their own for it. */
int hvd__coll_reducescatter(struct hvd_ctx *c, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, const size_t *bounds, char *err,
                            size_t errlen);
int hvd__coll_reducescatter_by_allreduce(struct hvd_ctx *c, const void *sendbuf,
                                         void *recvbuf, size_t count,
                                         hvd_dtype dt, hvd_op op,
                                         const size_t *bounds, char *err,
                                         size_t errlen);
/* bytes[i * size + j] bytes go from rank i to rank j (every rank passes
 * the same matrix): sendbuf holds this rank's blocks for ranks 0, 1, ...
 * end to end, recvbuf receives the blocks sent to this rank, in rank
 * order. The fallback moves every rank's whole sendbuf to every rank. */
int hvd__coll_alltoallv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        const size_t *bytes, char *err, size_t errlen);
int hvd__coll_alltoallv_by_allgatherv(struct hvd_ctx *c, const void *sendbuf,
                                      void *recvbuf, const size_t *bytes,
                                      char *err, size_t errlen);
/* Whether HOROVOD_LOG_LEVEL asks for debug lines (debug or trace). */
int hvd__coll_debug(void);
/* With debug lines on, says on stderr which transport this rank uses. */
void hvd__coll_log(const struct hvd_ctx *c);
/* Starts a collective with no failure grace period running. */
void hvd__coll_reset_abort(struct hvd_ctx *c);
/* Whether another rank has started a collective this rank must join. */
int hvd__coll_peer_started(struct hvd_ctx *c);
/* The socket of the ring (cross: of host leaders) on which another rank
 * starting a collective shows, or -1 once its sender has gone. */
int hvd__coll_watched_fd(const struct hvd_ctx *c, int cross);
/* A negotiation cycle starts (MPI: calls the other ranks into it). */
void hvd__coll_cycle_start(struct hvd_ctx *c);
/* How long the idle background thread may sleep before it must look for
 * another rank's start again, in microseconds; -1: as long as it likes,
 * since a start shows on a file descriptor it polls. */
int64_t hvd__coll_idle_us(struct hvd_ctx *c);

#endif
