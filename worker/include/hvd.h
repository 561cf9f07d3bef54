/* libhvd: the gradient-averaging runtime that Horovod-style workers embed. */
#ifndef HVD_H
#define HVD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HVD_EXPORT __attribute__((visibility("default")))
#else
#define HVD_EXPORT
#endif

/*
 * Every function returns 0 (or a non-negative value) on success and a
 * negative code from this table on failure; hvd_strerror() describes it.
 * Each entry: name, value, message. The values are fixed: a new code takes
 * the next free number. The numbers missing here (-3 to -6, -10) belong to
 * horovodrun's own errors, which libhvd never returns; -12 is retired.
 */
#define HVD_ERRNO_MAP(XX)                                                      \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(ETOOBIG, -7, "frame larger than the limit")                             \
    XX(EPROTO, -8, "protocol error")                                           \
    XX(ETRUNC, -9, "truncated message")                                        \
    XX(ESYS, -11, "system call failed")                                        \
    XX(ENOTINIT, -13, "hvd_init() has not been called")                        \
    XX(EINIT, -14, "hvd_init() was already called")                            \
    XX(ETIMEDOUT, -15, "timed out")                                            \
    XX(EPEER, -16, "a peer rank failed or disconnected")                       \
    XX(EAUTH, -17, "authentication with the job secret failed")                \
    XX(ECONNECT, -18, "cannot connect")                                        \
    XX(EENV, -19, "invalid horovodrun environment")                            \
    XX(ESHUTDOWN, -20, "the runtime was shut down")                            \
    XX(ENOTSUP, -21, "not supported")                                          \
    XX(EMISMATCH, -22, "ranks disagree about a named operation")               \
    XX(ENOTMEMBER, -23, "this rank is not in the process set")

/* Guarded: libhvd's own sources declare the same codes from a copy of
 * this table, and may include both. */
#ifndef HVD_ERRNO_DECLARED
#define HVD_ERRNO_DECLARED
enum hvd_errno {
#define XX(name, val, msg) HVD_##name = val,
    HVD_ERRNO_MAP(XX)
#undef XX
};
#endif

/* The values are ABI: a new dtype takes the next free number. */
typedef enum hvd_dtype {
    HVD_UINT8 = 0,
    HVD_INT8 = 1,
    HVD_INT32 = 2,
    HVD_INT64 = 3,
    HVD_FLOAT16 = 4,  /* IEEE 754 binary16, as uint16_t bits */
    HVD_BFLOAT16 = 5, /* bfloat16, as uint16_t bits */
    HVD_FLOAT32 = 6,
    HVD_FLOAT64 = 7,
    HVD_INT16 = 8
} hvd_dtype;

typedef enum hvd_op {
    HVD_SUM = 0,
    HVD_AVERAGE = 1, /* sum, divided once by the size at the end */
    HVD_MIN = 2,
    HVD_MAX = 3,
    HVD_PRODUCT = 4,
    /* Horovod's Adasum: pairs of gradients a, b combine in a binary tree
     * of the ranks as (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b. Allreduces
     * only, of floating-point tensors without compression, among every
     * rank (set 0) of a job of a power-of-two size. */
    HVD_ADASUM = 5
} hvd_op;

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
HVD_EXPORT size_t hvd_dtype_size(hvd_dtype dtype);

/*
 * Whether this libhvd was built with feature: for "mpi" and "cuda" 1, for
 * "nccl" the NCCL_VERSION_CODE it was built against (e.g. 22105 for NCCL
 * 2.21.5); 0 when it was built without it, for any other name, and for
 * NULL. May be called before hvd_init.
 */
HVD_EXPORT int hvd_built(const char *feature);

/*
 * Joins the job. Under horovodrun it reads the environment horovodrun set,
 * registers with the rendezvous server (proving it knows the job secret),
 * and connects to the other ranks; within HOROVOD_START_TIMEOUT seconds
 * (default 30) or it fails with HVD_ETIMEDOUT, and hvd_last_error() names
 * the missing ranks. Under mpirun (or with HOROVOD_CONTROLLER=mpi, in a
 * build with MPI) it initializes MPI unless the program did, and takes the
 * job and the transport from MPI. Without either it starts a job of one
 * rank. Also makes stdout line-buffered.
 */
HVD_EXPORT int hvd_init(void);
/* Leaves the job and frees everything; under MPI, finalizes MPI if
 * hvd_init initialized it. hvd_init may be called again afterwards: under
 * horovodrun it returns once every rank has called it again, with the
 * same rank and size; not under MPI once MPI was finalized. */
HVD_EXPORT int hvd_shutdown(void);

/* This rank's place in the job, or HVD_ENOTINIT before hvd_init. */
HVD_EXPORT int hvd_rank(void);
HVD_EXPORT int hvd_size(void);
HVD_EXPORT int hvd_local_rank(void);
HVD_EXPORT int hvd_local_size(void);
HVD_EXPORT int hvd_cross_rank(void);
HVD_EXPORT int hvd_cross_size(void);

/*
 * Elastic jobs (horovodrun --host-discovery-script or --min-np): what
 * horovodrun's host discovery found since the last call, as a bit mask of
 * Horovod's HostUpdateResult (1: hosts removed, 2: hosts added), or 0.
 * *timestamp, if not NULL, gets the latest notice's time (seconds since
 * the epoch). Notices arrive while the process is initialized (the
 * background thread reads them) and wait until taken; hvd_init forgets
 * older ones, which its new assignment already reflects.
 */
HVD_EXPORT int hvd_host_updates(uint64_t *timestamp);

/*
 * The host transport hvd_init chose: "ring" (TCP ring; also a job of
 * one), "shm" (shared memory, every rank on one host), "hier" (shared
 * memory within each host and a ring between hosts) or "mpi". "" before
 * hvd_init. The string is static.
 */
HVD_EXPORT const char *hvd_transport(void);

/*
 * The CUDA device this rank should use: 0 when horovodrun pinned the rank
 * to one GPU (CUDA_VISIBLE_DEVICES lists one device), otherwise its local
 * rank modulo the number of visible devices (the local rank in a build
 * without CUDA). HVD_ENOTINIT before hvd_init.
 */
HVD_EXPORT int hvd_device(void);

/*
 * Reduces count elements across all ranks; every rank gets the same bits.
 * In place when sendbuf == recvbuf. name identifies the operation in error
 * messages (may be NULL). All ranks must call collectives in the same
 * order with the same count, dtype and op.
 *
 * In a build with CUDA, the buffers of hvd_allreduce, hvd_broadcast and
 * hvd_allgather (and their _async forms) may be CUDA device memory (found
 * with cudaPointerGetAttributes): NCCL reduces them on the device, or,
 * without NCCL, they are staged through host memory, as those of
 * hvd_reducescatter and hvd_alltoall always are. The data must be
 * ready: synchronize the stream that wrote it before the call, or name
 * the stream with hvd_use_cuda_stream. A call returns (a handle
 * completes) when the result is in place.
 */
HVD_EXPORT int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             hvd_dtype dtype, hvd_op op, const char *name);

/* Copies root's count elements of buf into buf on every other rank. */
HVD_EXPORT int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root,
                             const char *name);

/*
 * Concatenates every rank's elements in rank order. Each rank may give a
 * different count. On success *recvbuf is a new malloc()ed buffer (free()
 * or hvd_free() it; NULL when the total is 0) and counts[r], an array of
 * hvd_size() entries supplied by the caller, holds rank r's count. When
 * sendbuf is CUDA device memory, *recvbuf is device memory from cudaMalloc
 * (free it with cudaFree).
 */
HVD_EXPORT int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype,
                             void **recvbuf, size_t *counts, const char *name);

/* Returns once every rank has called it. */
HVD_EXPORT int hvd_barrier(void);

/*
 * Asynchronous forms. Each returns at once with *handle set; the operation
 * runs in the background and completes when every rank has submitted an
 * operation of the same name (ranks may submit names in different orders).
 * Names must be unique among unfinished operations; NULL takes the next
 * name of a per-rank sequence, so unnamed calls pair up in call order.
 * Buffers must stay untouched until the operation completes. Every handle
 * must be passed to hvd_wait exactly once.
 */
typedef struct hvd_request *hvd_handle;

HVD_EXPORT int hvd_allreduce_async(const void *sendbuf, void *recvbuf,
                                   size_t count, hvd_dtype dtype, hvd_op op,
                                   const char *name, hvd_handle *handle);
HVD_EXPORT int hvd_broadcast_async(void *buf, size_t count, hvd_dtype dtype,
                                   int root, const char *name,
                                   hvd_handle *handle);
HVD_EXPORT int hvd_allgather_async(const void *sendbuf, size_t count,
                                   hvd_dtype dtype, void **recvbuf,
                                   size_t *counts, const char *name,
                                   hvd_handle *handle);
/*
 * n allreduces of one dtype and op that complete together, as one
 * handle; tensor i is named "name.i".
 */
HVD_EXPORT int
hvd_grouped_allreduce_async(const void *const *sendbufs, void *const *recvbufs,
                            const size_t *counts, int n, hvd_dtype dtype,
                            hvd_op op, const char *name, hvd_handle *handle);
HVD_EXPORT int hvd_grouped_allreduce(const void *const *sendbufs,
                                     void *const *recvbufs,
                                     const size_t *counts, int n,
                                     hvd_dtype dtype, hvd_op op,
                                     const char *name);
/*
 * n allgathers of one dtype that complete together, as one handle; tensor
 * i (counts[i] elements at sendbufs[i]) is named "name.i", its result goes
 * to recvbufs[i] (as hvd_allgather's *recvbuf) and its counts to
 * recvcounts[i * m .. i * m + m - 1], m being the size of the process set.
 */
HVD_EXPORT int hvd_grouped_allgather_async(const void *const *sendbufs,
                                           const size_t *counts, int n,
                                           hvd_dtype dtype, void **recvbufs,
                                           size_t *recvcounts, const char *name,
                                           hvd_handle *handle);
HVD_EXPORT int hvd_grouped_allgather(const void *const *sendbufs,
                                     const size_t *counts, int n,
                                     hvd_dtype dtype, void **recvbufs,
                                     size_t *recvcounts, const char *name);
/* Options of an allreduce (all zero means none: factors of 0 count as 1). */
enum hvd_compression {
    HVD_COMPRESS_NONE = 0,
    HVD_COMPRESS_FP16 = 1 /* float32 sent as float16, summed in float32 */
};
typedef struct hvd_allreduce_opts {
    double prescale;  /* multiplies the input before the reduction */
    double postscale; /* multiplies the result */
    int compression;  /* enum hvd_compression; float32 tensors only */
} hvd_allreduce_opts;

/* hvd_allreduce_async with options; scale factors need a floating-point
 * dtype and HVD_SUM or HVD_AVERAGE. Every rank must give the same. */
HVD_EXPORT int hvd_allreduce_ex_async(const void *sendbuf, void *recvbuf,
                                      size_t count, hvd_dtype dtype, hvd_op op,
                                      const char *name,
                                      const hvd_allreduce_opts *opts,
                                      hvd_handle *handle);

/*
 * Horovod's reducescatter: the elementwise reduction of every rank's count
 * elements, as hvd_allreduce computes it (the same bits, op and opts), of
 * which recvbuf receives this rank's rows. The count / row rows of row
 * elements each are split over the ranks in order, as Horovod splits a
 * tensor's first dimension: with R rows and n ranks, rank r gets R / n
 * rows, and one more if r < R % n. recvbuf holds that many rows; it must
 * not overlap sendbuf. Every rank must give the same count, row, dtype,
 * op and opts (else HVD_EMISMATCH); row must be at least 1 and divide
 * count (else HVD_EINVAL). opts may be NULL.
 */
HVD_EXPORT int hvd_reducescatter(const void *sendbuf, void *recvbuf,
                                 size_t count, size_t row, hvd_dtype dtype,
                                 hvd_op op, const char *name,
                                 const hvd_allreduce_opts *opts);
HVD_EXPORT int hvd_reducescatter_async(const void *sendbuf, void *recvbuf,
                                       size_t count, size_t row,
                                       hvd_dtype dtype, hvd_op op,
                                       const char *name,
                                       const hvd_allreduce_opts *opts,
                                       hvd_handle *handle);

/*
 * Horovod's alltoall with splits: sendbuf holds sendcounts[0] elements for
 * rank 0, then sendcounts[1] for rank 1, and so on (hvd_size() entries).
 * On success *recvbuf is a new buffer (malloc; NULL when empty) holding
 * what each rank sent to this one, in rank order, and recvcounts[r]
 * (hvd_size() entries) the count from rank r. Ranks may send different
 * counts but must agree on dtype. With device memory, *recvbuf is device
 * memory from cudaMalloc.
 */
HVD_EXPORT int hvd_alltoall(const void *sendbuf, const size_t *sendcounts,
                            hvd_dtype dtype, void **recvbuf, size_t *recvcounts,
                            const char *name);
HVD_EXPORT int hvd_alltoall_async(const void *sendbuf, const size_t *sendcounts,
                                  hvd_dtype dtype, void **recvbuf,
                                  size_t *recvcounts, const char *name,
                                  hvd_handle *handle);

/*
 * Frees a host buffer that libhvd handed out: the *recvbuf of
 * hvd_allgather, hvd_grouped_allgather and hvd_alltoall (and their _async
 * forms). It is free() from the C library libhvd uses, for callers that
 * cannot reach that free() themselves (a ctypes binding, a program with
 * another allocator). NULL does nothing. Device buffers are cudaFree()'s.
 */
HVD_EXPORT void hvd_free(void *ptr);

/*
 * Describes the tensors of the next collective call this thread makes, so
 * that ranks that disagree about their shapes fail as Horovod's do: n
 * tensors (one, or one per tensor of a grouped call), tensor i having
 * ndims[i] dimensions, all in dims one tensor after the other. Ranks must
 * agree on every dimension for allreduce and broadcast, and on all but
 * the first for allgather, alltoall and reducescatter; where they do not,
 * the call fails on every rank with HVD_EMISMATCH ("Mismatched allreduce
 * tensor shapes"). Ranks that give no shapes are checked on element
 * counts only. The shapes apply to the next call only, which forgets them
 * whether it succeeds or fails.
 */
HVD_EXPORT int hvd_next_shapes(const int64_t *dims, const int *ndims, int n);

/*
 * Process sets: collectives among a subset of the ranks. Id 0 is every
 * rank and always exists. Every rank (members or not) calls
 * hvd_add_process_set with the same ranks, in any order, at the same
 * point among its other process set calls; it returns the new set's id,
 * the same on every rank. HVD_EINVAL for a rank out of range or given
 * twice, or a set of these ranks that exists already; HVD_EMISMATCH when
 * the ranks disagree about the set. hvd_remove_process_set (every rank,
 * with no collective still waiting on the set) removes one; ids are not
 * reused.
 *
 * hvd_use_process_set(id) makes the collectives this thread submits from
 * then on go to set id (0: every rank) and returns the set used before.
 * Only the set's ranks call its collectives (HVD_ENOTMEMBER otherwise);
 * names are per set; broadcast roots stay global ranks and must be in the
 * set; allgather and alltoall counts arrays have one entry per rank of
 * the set, in set order (increasing global rank); HVD_AVERAGE divides by
 * the set's size. A set's collective runs on the job's transport with
 * the ranks outside the set adding nothing, from their background
 * threads: they never wait for it, but it costs them its traffic. Device
 * buffers of a set's collectives are staged through host memory.
 */
HVD_EXPORT int hvd_add_process_set(const int *ranks, int n);
HVD_EXPORT int hvd_remove_process_set(int id);
HVD_EXPORT int hvd_use_process_set(int id);
/* The set's size; this rank's place in it (HVD_ENOTMEMBER when it is not
 * in it); its ranks, in increasing order, into ranks (cap entries at
 * most), returning how many it has. HVD_EINVAL for an unknown id. */
HVD_EXPORT int hvd_process_set_size(int id);
HVD_EXPORT int hvd_process_set_rank(int id);
HVD_EXPORT int hvd_process_set_ranks(int id, int *ranks, int cap);
/* The ids of the sets that exist, 0 first, into ids (cap at most);
 * returns how many exist. */
HVD_EXPORT int hvd_process_set_ids(int *ids, int cap);

/*
 * Horovod's join: this rank has no more data. Until every rank has
 * joined, the others' allreduces (and barriers) go on without it: it adds
 * zeros to their sums (an average still divides by the job's size) and
 * the op's identity to their minimums, maximums and products; a
 * broadcast, allgather, alltoall or reducescatter fails with HVD_EINVAL
 * while a rank of its set has joined. Returns, on every rank, the rank
 * that joined last, once all have.
 */
HVD_EXPORT int hvd_join(void);

/*
 * Orders the device buffers of the collectives this thread submits from
 * then on (on nonzero) after the work that CUDA stream stream (a
 * cudaStream_t; NULL is the legacy default stream) has queued at each
 * submission: an event is recorded on it, and the background thread waits
 * for the event before it reads the buffers, so the caller need not
 * synchronize the stream and does not wait. A handle completes once the
 * result is in place, so work queued on the stream after hvd_wait sees
 * it. on 0 turns it off (the data must then be ready at the call). Per
 * thread; returns 0.
 */
HVD_EXPORT int hvd_use_cuda_stream(int on, void *stream);

/* 1 when the operation has completed, 0 when not yet. */
HVD_EXPORT int hvd_poll(hvd_handle handle);
/* Waits for the operation, frees the handle and returns its result. */
HVD_EXPORT int hvd_wait(hvd_handle handle);

/*
 * Starts rank 0's timeline (a Chrome trace of every tensor's phases, as
 * HOROVOD_TIMELINE writes from hvd_init) in path, truncating it; with
 * mark_cycles nonzero it also marks each negotiation cycle. A timeline
 * already running, from either, is closed first and stays a valid file;
 * if path cannot be opened, it keeps running and the call fails with
 * HVD_ESYS. On other ranks, and in a job of one (not started by
 * horovodrun or mpirun), it does nothing and returns 0. HVD_EINVAL for a
 * NULL or empty path, HVD_ENOTINIT before hvd_init.
 */
HVD_EXPORT int hvd_start_timeline(const char *path, int mark_cycles);
/* Stops the timeline, leaving a valid JSON file; 0 also when none runs
 * and on ranks other than 0. HVD_ENOTINIT before hvd_init. */
HVD_EXPORT int hvd_stop_timeline(void);

/*
 * What the last failing call in this thread was doing and why, naming the
 * rank or peer involved, e.g. "allreduce 'fc1.weight' on rank 1: rank 2
 * (host node2) disconnected". Empty when nothing failed yet.
 */
HVD_EXPORT const char *hvd_last_error(void);

/* A message for an error code; never NULL. */
HVD_EXPORT const char *hvd_strerror(int err);
/* The code's name, e.g. "HVD_EPEER"; never NULL. */
HVD_EXPORT const char *hvd_err_name(int err);

#ifdef __cplusplus
}
#endif

#endif
