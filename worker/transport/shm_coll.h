/* Collectives among the ranks of one host, through shared memory. */
#ifndef HVD_SHM_COLL_H
#define HVD_SHM_COLL_H

#include "worker/transport/shm.h"

/*
 * Reduces every local rank's sendbuf (count elements of dt). With bounds
 * (n + 1 entries), the elements of segment k are folded in the order
 * k, k+1, ..., k-1, as the TCP ring folds them; without, in rank order, as
 * its small-tensor path does: either way the result has the ring's bits.
 * size > 0: the result is finished (narrowed; averaged over size ranks) in
 * dt; size 0: it stays the accumulator type's sum. Local rank root (every
 * rank when root < 0) receives it in out.
 */
int hvd__shm_reduce(struct hvd_shm *s, const void *sendbuf, void *out,
                    size_t count, hvd_dtype dt, hvd_op op, const size_t *bounds,
                    int size, int root, char *err, size_t errlen);
/* Local rank root's bytes to every local rank. */
int hvd__shm_bcast(struct hvd_shm *s, void *buf, size_t bytes, int root,
                   char *err, size_t errlen);
/* bytes[i * n + j] go from local rank i to local rank j (as
 * hvd__coll_alltoallv): each rank's input passes through shared memory
 * once and each rank copies out only its own blocks. */
int hvd__shm_alltoallv(struct hvd_shm *s, const void *sendbuf, void *recvbuf,
                       const size_t *bytes, char *err, size_t errlen);
/* Every local rank's block, in local rank order (as hvd__ring_allgatherv;
 * bytes has n entries). */
int hvd__shm_allgatherv(struct hvd_shm *s, const void *sendbuf, void *recvbuf,
                        const size_t *bytes, char *err, size_t errlen);

#endif
