/* Collectives over a TCP ring: each rank sends to the next rank and
 * receives from the previous one, chunked and pipelined. */
#ifndef HVD_RING_H
#define HVD_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/rdvlayout.h"
#include "hvd.h"
#include "worker/wait.h"

/* Links at distances 1, 2, 4, ... 2^15 around the ring: how many a ring
 * connects is hvd_rdv_ring_links, since the rendezvous sends each rank
 * the addresses of those it connects to. */
#define HVD_RING_LINKS HVD_RDV_RING_LINKS

/* One connection of the ring. */
struct hvd_chan {
    int fd;        /* -1 when not connected */
    char desc[96]; /* "rank 3 (host a)", for messages */
};

struct hvd_ring {
    int rank;
    int size;
    /* to[k] goes to rank + 2^k and from[k] comes from rank - 2^k. Link 0
     * is the ring itself (to[0] and from[0] are -1 when size is 1); the
     * others, for Bruck's allgather, exist when size is at least 4 and
     * nlinks reaches every distance below size. */
    struct hvd_chan to[HVD_RING_LINKS];
    struct hvd_chan from[HVD_RING_LINKS];
    int nlinks;
    struct hvd_abort *ab; /* heard while a collective waits (may be NULL) */
    int spin_us;          /* busy-poll this long before sleeping in poll */
    /* A collective that moves no byte for this long fails (0: never). */
    int progress_ms;
    /* Where to say when a byte last moved, for the local ranks that wait
     * meanwhile (hvd__shm_busy_ms; may be NULL). */
    _Atomic int64_t *busy_ms;
    uint8_t *stage; /* receive staging for reductions */
    size_t stage_cap;
    uint8_t *acc; /* float32 accumulator for float16/bfloat16 */
    size_t acc_cap;
};

void hvd__ring_init(struct hvd_ring *r, int rank, int size);
/* Frees the buffers and closes the sockets. */
void hvd__ring_close(struct hvd_ring *r);

/* On failure each returns a negative code and writes the cause to err. */
int hvd__ring_allreduce(struct hvd_ring *r, const void *sendbuf, void *recvbuf,
                        size_t count, hvd_dtype dt, hvd_op op, char *err,
                        size_t errlen);
/* The same, with segment i of the reduce-scatter being elements
 * bounds[i] .. bounds[i+1]-1 (size+1 entries): a fused buffer keeps each
 * tensor's elements in the segments they would have alone, so fusion does
 * not change a single bit. */
int hvd__ring_reduce_segs(struct hvd_ring *r, const void *sendbuf,
                          void *recvbuf, size_t count, hvd_dtype dt, hvd_op op,
                          const size_t *bounds, char *err, size_t errlen);
/* The small-tensor path: every input goes around whole and each rank folds
 * them in rank order. */
int hvd__ring_gather_reduce(struct hvd_ring *r, const void *sendbuf,
                            void *recvbuf, size_t count, hvd_dtype dt,
                            hvd_op op, char *err, size_t errlen);
/* Whether hvd__ring_allreduce takes the small-tensor path. */
int hvd__ring_is_small(size_t count, hvd_dtype dt);
/* First element of segment i when count is split into size parts. */
size_t hvd__ring_seg_first(size_t count, int size, int i);
/* The size+1 bounds of the ring's own segments, for the _reduce_segs
 * functions (malloc; NULL when out of memory). */
size_t *hvd__ring_bounds(size_t count, int size);

int hvd__ring_broadcast(struct hvd_ring *r, void *buf, size_t bytes, int root,
                        char *err, size_t errlen);
/* recvbuf holds the sum of bytes[]; rank r's block goes at the sum of
 * bytes[0..r-1]. sendbuf (bytes[rank] long) may already be in place. */
int hvd__ring_allgatherv(struct hvd_ring *r, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen);

#endif
