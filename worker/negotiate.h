/* Negotiation: which named operations every rank has submitted, in one
 * order that all ranks follow, and which disagree. */
#ifndef HVD_NEGOTIATE_H
#define HVD_NEGOTIATE_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

enum hvd_req_kind {
    HVD_REQ_ALLREDUCE = 0,
    HVD_REQ_BROADCAST = 1,
    HVD_REQ_ALLGATHER = 2,
    HVD_REQ_BARRIER = 3,
    HVD_REQ_STALL = 4, /* from rank 0 only: give up on this name */
    HVD_REQ_REDUCESCATTER = 5,
    HVD_REQ_ALLTOALL = 6,
    HVD_REQ_JOIN = 7,       /* this rank has no more data */
    HVD_REQ_PSET_ADD = 8,   /* count ranks, every rank */
    HVD_REQ_PSET_REMOVE = 9 /* set root, every rank */
};

struct hvd_psets;

/* What a rank asks for under a name. */
struct hvd_req {
    uint8_t kind;
    uint8_t dtype;
    uint8_t op;
    int32_t root;
    /* allgather, alltoall: this rank's own count, may differ */
    uint64_t count;
    uint64_t row;   /* reducescatter: elements per row; otherwise 0 */
    uint64_t shape; /* the caller's shape tag (hvd_next_shape), 0: none */
    char *name;
    int32_t pset;     /* the process set; names are per set */
    uint8_t compress; /* allreduce, reducescatter: sent as float16 */
    uint8_t device;   /* the buffers are CUDA device memory */
    double prescale, postscale;
};

/* A decision: run the operation named, or fail it on every rank. */
struct hvd_resp {
    struct hvd_req req; /* rank 0's view of it (name owned here) */
    int error;          /* 0, or HVD_EMISMATCH with msg */
    char msg[256];
};

struct hvd_neg_entry;

/* The table every rank keeps identically: requests seen per name. */
struct hvd_neg {
    int size;
    struct hvd_neg_entry **slots; /* open hash by name */
    size_t nslots, used;
    /*
     * The response cache: requests that every rank made before, by id, in
     * the same order on every rank. A request found here travels as its
     * id instead of its description.
     */
    struct hvd_req *cache;
    size_t ncache, cache_cap;
    int32_t *cache_head, *cache_next; /* hash chains by name */
    size_t cache_buckets;
    /* The process sets (NULL: only every rank). A set's request counts
     * its other ranks as having asked. */
    const struct hvd_psets *psets;
    /*
     * Ranks that joined (HVD_REQ_JOIN) count as having asked for every
     * request until the join completes, when every rank has joined; its
     * response's root is the rank that joined last.
     */
    uint8_t *joined;
    int njoined, last_joined;
};

/* cache_cap 0 turns the response cache off. */
int hvd__neg_init(struct hvd_neg *t, int size, size_t cache_cap);
void hvd__neg_close(struct hvd_neg *t);

/*
 * Records that rank asked for req (copied). When the last rank's request
 * for a name (in its process set) arrives, a response is appended to *out
 * (grown with realloc; *nout counts). Requests must be fed in the same order on
 * every rank so that every rank appends the same responses in the same order.
 */
int hvd__neg_add(struct hvd_neg *t, int rank, const struct hvd_req *req,
                 struct hvd_resp **out, size_t *nout);

/* Calls fn for every name that some ranks asked for before before_us
 * (monotonic microseconds) and others have not yet; seen[r] says who
 * (ranks outside the name's process set, and joined ranks, count as
 * seen). */
void hvd__neg_each_waiting(struct hvd_neg *t, int64_t before_us,
                           void (*fn)(void *ctx, const char *name, int pset,
                                      const uint8_t *seen),
                           void *ctx);
/* Answers a waiting name at once with a stall error that names the ranks
 * missing; nothing happens if the name is not waiting. */
int hvd__neg_fail_stalled(struct hvd_neg *t, const char *name, int pset,
                          double secs, struct hvd_resp **out, size_t *nout);

/* Remembers a request every rank made (a response without error), while
 * the cache has room; every rank must call it for the same responses in
 * the same order. */
void hvd__neg_cache_put(struct hvd_neg *t, const struct hvd_req *req);
/* The cache id of req (the same on every rank), or -1. */
int32_t hvd__neg_cache_id(const struct hvd_neg *t, const struct hvd_req *req);

/* Records that rank asked for cached request id (as hvd__neg_add). */
int hvd__neg_add_cached(struct hvd_neg *t, int rank, size_t id,
                        struct hvd_resp **out, size_t *nout);
/* Cached request id that every rank asked for in this cycle: ready at
 * once, without the table. */
int hvd__neg_ready_cached(struct hvd_neg *t, size_t id, struct hvd_resp **out,
                          size_t *nout);

/*
 * Request lists on the wire: the cached requests as a bitmap over the
 * cache (length-prefixed, one bit per id), then u32 n and the others in
 * full: u8 kind, u8 dtype, u8 op, i32 root, u64 count (two u32), str
 * name, i32 process set, u8 compress, u8 device, the prescale and postscale
 * factors (IEEE doubles as two u32 each), u64 row and u64 shape (two u32
 * each). In steady state
 * a cycle's message is the bitmap alone.
 */
int hvd__neg_encode(const struct hvd_neg *t, const struct hvd_req *reqs,
                    size_t n, uint8_t **out, size_t *len);
/* Decodes: *bits points into p at the bitmap ((ncache + 7) / 8 bytes), the
 * full requests go into a new array (*reqs, *n); free it with
 * hvd__neg_free_reqs. */
int hvd__neg_decode(const struct hvd_neg *t, const uint8_t *p, size_t len,
                    const uint8_t **bits, struct hvd_req **reqs, size_t *n);
void hvd__neg_free_reqs(struct hvd_req *reqs, size_t n);

#endif
