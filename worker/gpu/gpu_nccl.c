/* Collectives on CUDA device buffers with NCCL (NCCL builds only): one
 * communicator per job, made at the first device operation from an id
 * that rank 0 broadcasts over the host transport, and a stream of the
 * runtime's own; a failure anywhere aborts the communicator instead of
 * leaving a GPU rank hanging; the device path of NCCL builds. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/exec.h"
#include "worker/gpu/gpu.h"
#include "worker/sock.h"
#include "worker/wait.h"

struct hvd_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    int broken; /* aborted: every later operation fails */
    void *fuse; /* device fusion buffer */
    size_t fuse_cap;
};

/* NCCL's types, by dtype; the dtypes past the end (int16) have none. */
static const ncclDataType_t nccl_types[] = {
    ncclUint8,   ncclInt8,     ncclInt32,   ncclInt64,
    ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};

/* Whether NCCL can reduce dt. */
static int nccl_reduces(hvd_dtype dt)
{
    return (int)dt >= 0 &&
           (size_t)dt < sizeof(nccl_types) / sizeof(nccl_types[0]);
}

/*
 * The type NCCL moves dt as, and *unit, how many elements of it make one
 * of dt: NCCL's own type (unit 1) where it has one, else bytes, which
 * serve broadcast and allgather (copies) but never a reduction.
 */
static int nccl_type(hvd_dtype dt, ncclDataType_t *t, size_t *unit)
{
    *unit = 1;
    if (nccl_reduces(dt)) {
        *t = nccl_types[dt];
        return 0;
    }
    *t = ncclUint8;
    *unit = hvd_dtype_size(dt);
    return *unit ? 0 : -1;
}

static ncclRedOp_t nccl_op(hvd_op op)
{
    switch (op) {
    case HVD_AVERAGE:
        return ncclAvg;
    case HVD_MIN:
        return ncclMin;
    case HVD_MAX:
        return ncclMax;
    case HVD_PRODUCT:
        return ncclProd;
    default:
        return ncclSum;
    }
}

/* Whether NCCL runs this operation (the same answer on every rank: it
 * depends only on what was negotiated). */
static int nccl_can(const struct hvd_work *w)
{
    int is_float = w->dtype == HVD_FLOAT16 || w->dtype == HVD_BFLOAT16 ||
                   w->dtype == HVD_FLOAT32 || w->dtype == HVD_FLOAT64;
    if (w->kind != HVD_OP_ALLREDUCE)
        return w->kind == HVD_OP_BROADCAST || w->kind == HVD_OP_ALLGATHER;
    /* NCCL averages integers in its own way, cannot reduce int16, and has
     * no compression or scaling: those take the host path. */
    return nccl_reduces(w->dtype) && !w->compress && w->prescale == 1 &&
           w->postscale == 1 && (is_float || w->op_kind != HVD_AVERAGE);
}

static void say(char *err, size_t errlen, const char *what, ncclResult_t r)
{
    snprintf(err, errlen, "NCCL %s: %s", what, ncclGetErrorString(r));
}

/* Fails the communicator for good. */
static void abort_comm(struct hvd_nccl *g)
{
    if (!g->broken && g->comm)
        ncclCommAbort(g->comm);
    g->broken = 1;
}

/* Waits for the stream (or the communicator's set-up), watching NCCL's
 * own errors and the failures the rendezvous server announces. */
static int wait_done(struct hvd_ctx *c, struct hvd_nccl *g, int init, char *err,
                     size_t errlen)
{
    int64_t deadline = hvd__now_ms() + (int64_t)c->peer_timeout_s * 1000;
    for (;;) {
        ncclResult_t ar = ncclSuccess;
        if (ncclCommGetAsyncError(g->comm, &ar) != ncclSuccess ||
            (ar != ncclSuccess && ar != ncclInProgress)) {
            say(err, errlen, "failed", ar);
            abort_comm(g);
            return HVD_EPEER;
        }
        if (init && ar == ncclSuccess)
            return 0;
        if (!init) {
            cudaError_t e = cudaStreamQuery(g->stream);
            if (e == cudaSuccess)
                return 0;
            if (e != cudaErrorNotReady) {
                snprintf(err, errlen, "CUDA: %s", cudaGetErrorString(e));
                abort_comm(g);
                return HVD_ESYS;
            }
        }
        int rc = hvd__abort_poll(&c->abort, 1, err, errlen);
        if (rc < 0) {
            abort_comm(g);
            return rc;
        }
        if (hvd__now_ms() >= deadline) {
            snprintf(err, errlen,
                     "NCCL did not finish within %d s "
                     "(HOROVOD_PEER_TIMEOUT: a rank is stopped or hung, or "
                     "the operation needs longer)",
                     c->peer_timeout_s);
            abort_comm(g);
            return HVD_ETIMEDOUT;
        }
        sched_yield();
    }
}

/* The communicator, made on first use: every rank gets here at the same
 * operation, since all run the same operations in the same order. */
static int get_comm(struct hvd_ctx *c, int device, struct hvd_nccl **out,
                    char *err, size_t errlen)
{
    struct hvd_nccl *g = c->nccl;
    ncclUniqueId id;
    ncclResult_t r;
    int rc;

    if (g) {
        *out = g;
        if (g->broken) {
            snprintf(err, errlen, "the NCCL communicator was aborted");
            return HVD_EPEER;
        }
        if (g->device != device) {
            snprintf(err, errlen,
                     "the tensor is on CUDA device %d, the NCCL communicator "
                     "on device %d; keep a rank's tensors on one device",
                     device, g->device);
            return HVD_EINVAL;
        }
        return 0;
    }
    memset(&id, 0, sizeof(id));
    if (c->rank == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess)
        say(err, errlen, "ncclGetUniqueId", r);
    /* Rank 0 sends its id (or zeros, having failed) to every rank. */
    if ((rc = hvd__coll_broadcast(c, &id, sizeof(id), 0, err, errlen)))
        return rc;
    static const ncclUniqueId zero;
    if (memcmp(&id, &zero, sizeof(id)) == 0) {
        if (c->rank != 0)
            snprintf(err, errlen, "rank 0 could not make an NCCL id");
        return HVD_ESYS;
    }
    if ((g = calloc(1, sizeof(*g))) == NULL)
        return HVD_ENOMEM;
    g->device = device;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA device %d: %s", device,
                 cudaGetErrorString(e));
        free(g);
        return HVD_ESYS;
    }
    /* Non-blocking set-up, so that a rank that never comes cannot hang
     * this one: it is watched like any operation. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    r = ncclCommInitRankConfig(&g->comm, c->size, id, c->rank, &config);
    c->nccl = g;
    *out = g;
    if (r != ncclSuccess && r != ncclInProgress) {
        say(err, errlen, "ncclCommInitRankConfig", r);
        abort_comm(g);
        return HVD_ESYS;
    }
    return wait_done(c, g, 1, err, errlen);
}

/* Checks what an NCCL call returned (r): a non-blocking communicator may
 * still be enqueueing it (ncclInProgress), so wait until it has, before
 * anything else goes on the stream. */
static int settle(struct hvd_ctx *c, struct hvd_nccl *g, ncclResult_t r,
                  const char *what, char *err, size_t errlen)
{
    if (r == ncclInProgress)
        return wait_done(c, g, 1, err, errlen);
    if (r == ncclSuccess)
        return 0;
    say(err, errlen, what, r);
    abort_comm(g);
    return HVD_ESYS;
}

/* Settles the NCCL calls just made, then waits for the stream. */
static int run_group(struct hvd_ctx *c, struct hvd_nccl *g, ncclResult_t r,
                     const char *what, char *err, size_t errlen)
{
    int rc = settle(c, g, r, what, err, errlen);
    return rc ? rc : wait_done(c, g, 0, err, errlen);
}

static int allreduce(struct hvd_ctx *c, struct hvd_nccl *g,
                     struct hvd_work **ws, int n, ncclDataType_t t, char *err,
                     size_t errlen)
{
    size_t es = hvd_dtype_size(ws[0]->dtype), total = 0;
    if (n == 1)
        return run_group(c, g,
                         ncclAllReduce(ws[0]->sendbuf, ws[0]->recvbuf,
                                       ws[0]->count, t, nccl_op(ws[0]->op_kind),
                                       g->comm, g->stream),
                         "ncclAllReduce", err, errlen);
    /* Fused: packed into the device fusion buffer, reduced once. */
    for (int i = 0; i < n; i++)
        total += ws[i]->count * es;
    if (total > g->fuse_cap) {
        cudaFree(g->fuse);
        g->fuse = NULL;
        g->fuse_cap = 0;
        if (cudaMalloc(&g->fuse, total) != cudaSuccess) {
            snprintf(err, errlen,
                     "cannot allocate a %zu-byte device fusion buffer", total);
            abort_comm(g);
            return HVD_ENOMEM;
        }
        g->fuse_cap = total;
    }
    uint8_t *f = g->fuse;
    cudaError_t e = cudaSuccess;
    size_t off = 0;
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        e = cudaMemcpyAsync(f + off, ws[i]->sendbuf, ws[i]->count * es,
                            cudaMemcpyDeviceToDevice, g->stream);
        off += ws[i]->count * es;
    }
    if (e == cudaSuccess) {
        int rc =
            settle(c, g,
                   ncclAllReduce(f, f, total / es, t, nccl_op(ws[0]->op_kind),
                                 g->comm, g->stream),
                   "ncclAllReduce", err, errlen);
        if (rc)
            return rc;
    }
    off = 0;
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        e = cudaMemcpyAsync(ws[i]->recvbuf, f + off, ws[i]->count * es,
                            cudaMemcpyDeviceToDevice, g->stream);
        off += ws[i]->count * es;
    }
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMemcpyAsync: %s", cudaGetErrorString(e));
        abort_comm(g);
        return HVD_ESYS;
    }
    return wait_done(c, g, 0, err, errlen);
}

/* Every rank's count over the host transport, then each rank's block
 * broadcast from it into a new device buffer; unit elements of t make one
 * of w's. */
static int allgather(struct hvd_ctx *c, struct hvd_nccl *g, struct hvd_work *w,
                     ncclDataType_t t, size_t unit, char *err, size_t errlen)
{
    size_t es = hvd_dtype_size(w->dtype), n = (size_t)c->size, total = 0;
    void *out = NULL;
    int rc = hvd__exec_counts(c, w, &total, err, errlen);

    if (rc || total == 0)
        goto out;
    if (cudaMalloc(&out, total) != cudaSuccess) {
        snprintf(err, errlen, "cudaMalloc of %zu bytes failed", total);
        abort_comm(g);
        rc = HVD_ENOMEM;
        goto out;
    }
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (size_t i = 0; i < n && r == ncclSuccess; i++) {
        r = ncclBroadcast(w->sendbuf, (uint8_t *)out + off, w->counts[i] * unit,
                          t, (int)i, g->comm, g->stream);
        off += w->counts[i] * es;
    }
    ncclResult_t r2 = ncclGroupEnd();
    rc = run_group(c, g, r != ncclSuccess ? r : r2, "ncclBroadcast", err,
                   errlen);
out:
    if (rc == 0)
        *w->gathered = out;
    else if (out)
        cudaFree(out);
    return rc;
}

/* Runs one operation, or n fused allreduces, on the device. */
static int nccl_exec(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                     size_t errlen)
{
    struct hvd_work *w = ws[0];
    struct hvd_nccl *g = NULL;
    ncclDataType_t t;
    size_t unit;
    int rc = get_comm(c, w->device_id, &g, err, errlen);
    if (rc)
        return rc;
    if (cudaSetDevice(g->device) != cudaSuccess ||
        nccl_type(w->dtype, &t, &unit))
        return HVD_EINVAL;
    switch (w->kind) {
    case HVD_OP_ALLREDUCE:
        /* nccl_can lets through only the types NCCL reduces. */
        return nccl_reduces(w->dtype) ? allreduce(c, g, ws, n, t, err, errlen)
                                      : HVD_EINVAL;
    case HVD_OP_BROADCAST:
        return run_group(c, g,
                         ncclBroadcast(w->recvbuf, w->recvbuf, w->count * unit,
                                       t, w->root, g->comm, g->stream),
                         "ncclBroadcast", err, errlen);
    case HVD_OP_ALLGATHER:
        return allgather(c, g, w, t, unit, err, errlen);
    default:
        return HVD_EINVAL;
    }
}

int hvd__nccl_version(void)
{
    return NCCL_VERSION_CODE;
}

/* Destroys the communicator (at shutdown). */
static void nccl_close(struct hvd_ctx *c)
{
    struct hvd_nccl *g = c->nccl;
    if (g == NULL)
        return;
    if (!g->broken)
        ncclCommDestroy(g->comm);
    cudaStreamDestroy(g->stream);
    cudaFree(g->fuse);
    free(g);
    c->nccl = NULL;
}

const struct hvd_gpu hvd__gpu_nccl = {
    .is_device = hvd__cuda_is_device,
    .copy = hvd__cuda_copy,
    .alloc = hvd__cuda_alloc,
    .free = hvd__cuda_free,
    .count = hvd__cuda_count,
    .mark = hvd__cuda_mark,
    .wait_mark = hvd__cuda_wait_mark,
    .can = nccl_can,
    .exec = nccl_exec,
    .staged_why = "NCCL has no such operation",
    .close = nccl_close,
};
