/* libhvd's public API: the one global context and thin wrappers that hand
 * collectives to the background thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/engine.h"
#include "worker/exec.h"
#include "worker/failure.h"
#include "worker/gpu/device.h"
#include "worker/gpu/gpu.h"
#include "hvd_build.h"
#include "worker/api.h"
#include "worker/join.h"
#include "worker/setting.h"
#include "worker/transport/mpi_backend.h"
#include "worker/transport/ring.h"
#include "worker/transport/transport.h"

static struct hvd_ctx *g_ctx;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local char g_last_error[2 * HVD_ERRMSG];
/* The process set this thread's collectives go to (hvd_use_process_set). */
static _Thread_local int g_pset;
/* The CUDA stream that writes this thread's device buffers, if given. */
static _Thread_local int g_stream_on;
static _Thread_local void *g_stream;
/* hvd_next_shapes' tags for this thread's next call (0: none): of every
 * dimension, and of all but the first (for the gathers and scatters). */
static _Thread_local uint64_t g_shape_all, g_shape_rows;

struct hvd_ctx *hvd__api_ctx(void)
{
    return g_ctx;
}

int hvd__api_fail(int rc, const char *msg)
{
    snprintf(g_last_error, sizeof(g_last_error), "%s", msg);
    g_shape_all = g_shape_rows = 0; /* a failed call forgets the shapes */
    return rc;
}

static int fail(int rc, const char *msg)
{
    return hvd__api_fail(rc, msg);
}

/* FNV-1a over the 8 bytes of v. */
static uint64_t mix(uint64_t h, int64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)v >> (8 * i) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

HVD_EXPORT int hvd_next_shapes(const int64_t *dims, const int *ndims, int n)
{
    uint64_t all = 0xcbf29ce484222325ull, rows = all;
    if (n < 0 || (n > 0 && (ndims == NULL || dims == NULL)))
        return fail(HVD_EINVAL, "hvd_next_shapes: n must be 0 or more, with "
                                "dims and ndims given");
    all = mix(all, n);
    rows = mix(rows, n);
    for (int i = 0, k = 0; i < n; k += ndims[i++]) {
        if (ndims[i] < 0)
            return fail(HVD_EINVAL, "hvd_next_shapes: a negative number of "
                                    "dimensions");
        all = mix(all, ndims[i]);
        rows = mix(rows, ndims[i]);
        for (int d = 0; d < ndims[i]; d++) {
            all = mix(all, dims[k + d]);
            if (d > 0)
                rows = mix(rows, dims[k + d]);
        }
    }
    /* 0 means no shape: keep the tags off it. */
    g_shape_all = all | (all == 0);
    g_shape_rows = rows | (rows == 0);
    return 0;
}

/* Hands this thread's shape tags to op's parts and forgets them. */
static void take_shapes(struct hvd_request *op)
{
    for (int i = 0; i < op->nparts; i++) {
        enum hvd_op_kind k = op->parts[i].kind;
        op->parts[i].shape = k == HVD_OP_ALLGATHER || k == HVD_OP_ALLTOALL ||
                                     k == HVD_OP_REDUCESCATTER
                                 ? g_shape_rows
                             : k == HVD_OP_ALLREDUCE || k == HVD_OP_BROADCAST
                                 ? g_shape_all
                                 : 0;
    }
    g_shape_all = g_shape_rows = 0;
}

HVD_EXPORT const char *hvd_last_error(void)
{
    return g_last_error;
}

static void ctx_free(struct hvd_ctx *c)
{
    if (c == NULL)
        return;
    hvd__engine_stop(c);
    hvd__device_close(c);
    hvd__ring_close(&c->ring);
    hvd__ring_close(&c->xring);
    hvd__shm_close(&c->shm);
    hvd__mpi_close(c);
    hvd__pset_close(&c->psets);
    hvd__topo_close(&c->topo);
    if (c->rdv_fd >= 0)
        close(c->rdv_fd);
    hvd_frame_reader_close(&c->rdv_reader);
    memset(c->secret, 0, sizeof(c->secret));
    free(c);
}

HVD_EXPORT int hvd_init(void)
{
    char err[HVD_ERRMSG] = "";
    int rc = 0;

    pthread_mutex_lock(&g_init_mu);
    if (g_ctx) {
        rc = fail(HVD_EINIT, "hvd_init() was already called");
        goto out;
    }
    /* Logs should stream, not arrive in blocks when a pipe is stdout. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct hvd_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        rc = fail(HVD_ENOMEM, "out of memory");
        goto out;
    }
    c->rdv_fd = c->eng.wake_fd = c->tl.fd = c->elastic_id = -1;
    c->tp = &hvd__transport_ring;
    c->force_staging = hvd__env_flag(HVD_ENV_FORCE_GPU_STAGING, 0);
    hvd__ring_init(&c->ring, 0, 1);
    hvd__ring_init(&c->xring, 0, 1);
    hvd__host_notice_take(NULL);
    int kind = hvd__join_kind(err, sizeof(err));
    if (kind == HVD_JOIN_ALONE) {
        /* Started by nobody: a job of one, as in Horovod. */
        c->standalone = 1;
        c->size = c->local_size = c->cross_size = 1;
        rc = hvd__pset_init(&c->psets, 1, 0);
    } else {
        /* Read by the ring and shared-memory waits, the engine's
         * heartbeat and NCCL's waits; MPI's own collectives have no
         * timeout (a rank hung there is mpirun's business). */
        const char *t = getenv(HVD_ENV_PEER_TIMEOUT);
        c->peer_timeout_s = t && atoi(t) > 0 ? atoi(t) : 30;
        rc = kind < 0               ? kind
             : kind == HVD_JOIN_MPI ? hvd__mpi_join(c, err, sizeof(err))
                                    : hvd__join(c, err, sizeof(err));
        if (rc == 0)
            rc = hvd__pset_init(&c->psets, c->size, c->rank);
        if (rc == 0)
            rc = hvd__engine_start(c);
    }
    if (rc != 0) {
        char msg[HVD_ERRMSG + 64];
        snprintf(msg, sizeof(msg), "hvd_init on rank %d: %s", c->rank,
                 err[0] ? err
                 : rc == HVD_ESYS
                     ? "cannot start the background thread or open the "
                       "HOROVOD_TIMELINE file"
                     : hvd_strerror(rc));
        fail(rc, msg);
        ctx_free(c);
        goto out;
    }
    hvd__coll_log(c);
    g_ctx = c;
out:
    pthread_mutex_unlock(&g_init_mu);
    return rc;
}

HVD_EXPORT int hvd_host_updates(uint64_t *timestamp)
{
    return hvd__host_notice_take(timestamp);
}

HVD_EXPORT int hvd_shutdown(void)
{
    pthread_mutex_lock(&g_init_mu);
    struct hvd_ctx *c = g_ctx;
    g_ctx = NULL;
    pthread_mutex_unlock(&g_init_mu);
    if (c == NULL)
        return fail(HVD_ENOTINIT, "hvd_shutdown() before hvd_init()");
    ctx_free(c);
    return 0;
}

#define GETTER(fn, field)                                                      \
    HVD_EXPORT int fn(void)                                                    \
    {                                                                          \
        struct hvd_ctx *c = g_ctx;                                             \
        return c ? c->field : HVD_ENOTINIT;                                    \
    }
GETTER(hvd_rank, rank)
GETTER(hvd_size, size)
GETTER(hvd_local_rank, local_rank)
GETTER(hvd_local_size, local_size)
GETTER(hvd_cross_rank, cross_rank)
GETTER(hvd_cross_size, cross_size)
#undef GETTER

HVD_EXPORT int hvd_built(const char *feature)
{
    if (feature == NULL)
        return 0;
    if (strcmp(feature, "mpi") == 0)
        return HVD_HAVE_MPI;
    if (strcmp(feature, "cuda") == 0)
        return HVD_HAVE_CUDA;
#if HVD_HAVE_NCCL
    if (strcmp(feature, "nccl") == 0)
        return hvd__nccl_version();
#endif
    return 0;
}

HVD_EXPORT const char *hvd_transport(void)
{
    struct hvd_ctx *c = g_ctx;
    return c ? c->tp->name : "";
}

/* Starts (path non-NULL) or stops rank 0's timeline through the background
 * thread, which writes it; other ranks, and a job of one, which has no
 * background thread and records no timeline, do nothing. */
static int timeline(const char *what, const char *path, int mark_cycles)
{
    char err[HVD_ERRMSG] = "", msg[HVD_ERRMSG + 64];
    struct hvd_ctx *c = g_ctx;
    if (c == NULL) {
        snprintf(msg, sizeof(msg), "%s() before hvd_init()", what);
        return fail(HVD_ENOTINIT, msg);
    }
    if (c->rank != 0 || c->standalone)
        return 0;
    int rc = hvd__engine_timeline(c, path, mark_cycles, err, sizeof(err));
    if (rc) {
        snprintf(msg, sizeof(msg), "%s on rank 0: %s", what,
                 err[0] ? err : hvd_strerror(rc));
        fail(rc, msg);
    }
    return rc;
}

HVD_EXPORT int hvd_start_timeline(const char *path, int mark_cycles)
{
    if (g_ctx && (path == NULL || path[0] == '\0'))
        return fail(HVD_EINVAL, "hvd_start_timeline: no file path");
    return timeline("hvd_start_timeline", path, mark_cycles);
}

HVD_EXPORT int hvd_stop_timeline(void)
{
    return timeline("hvd_stop_timeline", NULL, 0);
}

HVD_EXPORT int hvd_device(void)
{
    struct hvd_ctx *c = g_ctx;
    if (c == NULL)
        return HVD_ENOTINIT;
    return hvd__gpu_device(c);
}

/* A job of one gathers its own elements. */
static int local_allgather(struct hvd_work *w)
{
    size_t bytes = w->count * hvd_dtype_size(w->dtype);
    w->counts[0] = w->count;
    if (bytes == 0)
        return 0;
    if ((*w->gathered = malloc(bytes)) == NULL)
        return HVD_ENOMEM;
    memcpy(*w->gathered, w->sendbuf, bytes);
    return 0;
}

struct hvd_request *hvd__api_new_op(int nparts)
{
    struct hvd_request *op =
        calloc(1, sizeof(*op) + (size_t)nparts * sizeof(op->parts[0]));
    if (op == NULL)
        return NULL;
    op->nparts = nparts;
    for (int i = 0; i < nparts; i++) {
        op->parts[i].op = op;
        op->parts[i].prescale = op->parts[i].postscale = 1;
    }
    return op;
}

/* Names a part: the caller's name (with a suffix for groups), or the next
 * of this rank's sequence, which pairs unnamed calls in call order. */
static int set_name(struct hvd_ctx *c, struct hvd_work *w, const char *name,
                    int index)
{
    int n;
    if (name == NULL)
        n = snprintf(w->name, sizeof(w->name), "noname.%llu",
                     (unsigned long long)atomic_fetch_add(&c->noname, 1));
    else if (index >= 0)
        n = snprintf(w->name, sizeof(w->name), "%s.%d", name, index);
    else
        n = snprintf(w->name, sizeof(w->name), "%s", name);
    return n > 0 && (size_t)n < sizeof(w->name) ? 0 : HVD_EINVAL;
}

HVD_EXPORT int hvd_use_cuda_stream(int on, void *stream)
{
    g_stream_on = on != 0;
    g_stream = on ? stream : NULL;
    return 0;
}

HVD_EXPORT int hvd_use_process_set(int id)
{
    if (id < 0)
        return fail(HVD_EINVAL, "hvd_use_process_set: a process set id is "
                                "0 or more");
    int prev = g_pset;
    g_pset = id;
    return prev;
}

int hvd__api_set(struct hvd_ctx *c, const char *what, int root, int *n, int *me)
{
    char msg[192] = "";
    int rc = 0;
    pthread_mutex_lock(&c->psets.mu);
    const struct hvd_pset *s = hvd__pset_get(&c->psets, g_pset);
    if (s == NULL) {
        snprintf(msg, sizeof(msg),
                 "%s: there is no process set %d (hvd_use_process_set)", what,
                 g_pset);
        rc = HVD_EINVAL;
    } else if (s->me < 0) {
        snprintf(msg, sizeof(msg), "%s: rank %d is not in process set %d", what,
                 c->rank, g_pset);
        rc = HVD_ENOTMEMBER;
    } else if (root >= 0 && hvd__pset_place(s, root) < 0) {
        snprintf(msg, sizeof(msg), "%s: root rank %d is not in process set %d",
                 what, root, g_pset);
        rc = HVD_EINVAL;
    } else {
        if (n)
            *n = s->n;
        if (me)
            *me = s->me;
    }
    pthread_mutex_unlock(&c->psets.mu);
    return rc ? fail(rc, msg) : g_pset;
}

/* Set while a synchronous call (hvd_allreduce, ...) starts its work: its
 * caller waits at once, so the engine leaves the work to it (engine.c). */
static _Thread_local int t_sync;

/* Hands op to the background thread (or runs it here, for a job of one). */
int hvd__api_start(struct hvd_request *op, hvd_handle *handle)
{
    struct hvd_ctx *c = g_ctx;
    char msg[HVD_ERRMSG + HVD_NAME_MAX + 8], why[HVD_ERRMSG] = "";
    take_shapes(op);
    for (int i = 0; i < op->nparts; i++) {
        struct hvd_work *w = &op->parts[i];
        int rc = hvd__device_classify(w, why, sizeof(why));
        /* Device buffers are read after what the caller's stream has
         * queued so far, and this thread does not wait for it. */
        if (rc == 0 && w->device && g_stream_on)
            rc = hvd__gpu_mark(g_stream, w->device_id, &w->mark, why,
                               sizeof(why));
        if (rc != 0) {
            snprintf(msg, sizeof(msg), "'%s': %s", w->name, why);
            for (int k = 0; k <= i; k++)
                hvd__gpu_wait_mark(&op->parts[k].mark, why, sizeof(why));
            free(op);
            return fail(rc, msg);
        }
    }
    *handle = op;
    op->sync |= t_sync;
    if (!c->standalone) {
        hvd__engine_submit(c, op);
        return 0;
    }
    for (int i = 0; i < op->nparts && op->rc == 0; i++) {
        struct hvd_work *w = &op->parts[i];
        w->set_size = 1; /* the only process set of a job of one */
        w->set_ranks = c->psets.all.ranks;
        if (w->device) {
            op->rc = hvd__device_exec(c, &w, 1, why, sizeof(why));
            snprintf(w->err, sizeof(w->err), "%s", why);
        } else if (w->kind == HVD_OP_ALLREDUCE && !w->compress &&
                   w->op_kind != HVD_ADASUM && w->prescale == 1 &&
                   w->postscale == 1)
            op->rc = hvd__ring_allreduce(&c->ring, w->sendbuf, w->recvbuf,
                                         w->count, w->dtype, w->op_kind, w->err,
                                         sizeof(w->err));
        else if (w->kind == HVD_OP_ALLGATHER)
            op->rc = local_allgather(w);
        else if (w->kind == HVD_OP_ALLREDUCE ||
                 w->kind == HVD_OP_REDUCESCATTER || w->kind == HVD_OP_ALLTOALL)
            op->rc = hvd__exec(c, w); /* on the ring of one, with options */
        if (op->rc) {
            /* Cut to fit op->err. */
            snprintf(op->err, sizeof(op->err), "'%.200s': %.300s", w->name,
                     w->err[0] ? w->err : hvd_strerror(op->rc));
        }
    }
    atomic_store(&op->done, 1);
    return 0;
}

/* Checks what every call needs and makes a one-part op. */
static int prepare(const char *what, hvd_dtype dtype, const char *name,
                   struct hvd_request **out)
{
    char msg[128];
    struct hvd_ctx *c = g_ctx;
    *out = NULL;
    if (c == NULL)
        return fail(HVD_ENOTINIT, "hvd_init() has not been called");
    if (hvd_dtype_size(dtype) == 0) {
        snprintf(msg, sizeof(msg), "%s: unknown dtype %d", what, (int)dtype);
        return fail(HVD_EINVAL, msg);
    }
    int pset = hvd__api_set(c, what, -1, NULL, NULL);
    if (pset < 0)
        return pset;
    struct hvd_request *op = hvd__api_new_op(1);
    if (op == NULL)
        return fail(HVD_ENOMEM, "out of memory");
    op->parts[0].pset = pset;
    if (set_name(c, &op->parts[0], name, -1) != 0) {
        free(op);
        snprintf(msg, sizeof(msg), "%s: the name is longer than %d bytes", what,
                 HVD_NAME_MAX - 1);
        return fail(HVD_EINVAL, msg);
    }
    op->parts[0].dtype = dtype;
    *out = op;
    return 0;
}

/* Horovod's conditions for Adasum (hvd_op); 0 or an error. */
static int adasum_check(const char *what, hvd_dtype dtype, int comp)
{
    char msg[256];
    struct hvd_ctx *c = g_ctx;
    int is_float = dtype == HVD_FLOAT16 || dtype == HVD_BFLOAT16 ||
                   dtype == HVD_FLOAT32 || dtype == HVD_FLOAT64;
    const char *why =
        strcmp(what, "hvd_reducescatter") == 0 ? "reduces only in allreduces"
        : !is_float                            ? "takes floating-point tensors"
        : comp != HVD_COMPRESS_NONE            ? "takes no compression"
        : g_pset != 0 ? "runs among every rank only (process set 0)"
        : c && (c->size & (c->size - 1)) != 0
            ? "needs a power-of-two number of ranks"
            : NULL;
    if (why == NULL)
        return 0;
    snprintf(msg, sizeof(msg), "%s: Adasum %s", what, why);
    return fail(HVD_EINVAL, msg);
}

/* Checks an allreduce's or reducescatter's arguments and makes its op,
 * the options set; recvbuf may be NULL when this rank receives nothing
 * (recv_count 0). */
static int prepare_reduce(const char *what, const void *sendbuf, void *recvbuf,
                          size_t count, size_t recv_count, hvd_dtype dtype,
                          hvd_op op, const char *name,
                          const hvd_allreduce_opts *opts, hvd_handle *handle,
                          struct hvd_request **out)
{
    char msg[256];
    double pre = opts && opts->prescale != 0 ? opts->prescale : 1;
    double post = opts && opts->postscale != 0 ? opts->postscale : 1;
    int comp = opts ? opts->compression : HVD_COMPRESS_NONE;
    *out = NULL;
    if ((int)op < HVD_SUM || op > HVD_ADASUM || handle == NULL ||
        (count > 0 && sendbuf == NULL) || (recv_count > 0 && recvbuf == NULL)) {
        snprintf(msg, sizeof(msg), "%s: bad buffer, op or handle", what);
        return fail(HVD_EINVAL, msg);
    }
    if (op == HVD_ADASUM && adasum_check(what, dtype, comp) != 0)
        return HVD_EINVAL;
    if ((comp != HVD_COMPRESS_NONE &&
         (comp != HVD_COMPRESS_FP16 || dtype != HVD_FLOAT32)) ||
        ((pre != 1 || post != 1) && op != HVD_SUM && op != HVD_AVERAGE)) {
        snprintf(msg, sizeof(msg),
                 "%s: fp16 compression takes float32 tensors, scale factors "
                 "tensors summed or averaged",
                 what);
        return fail(HVD_EINVAL, msg);
    }
    int rc = prepare(what, dtype, name, out);
    if (rc)
        return rc;
    struct hvd_work *w = &(*out)->parts[0];
    w->sendbuf = sendbuf;
    w->recvbuf = recvbuf;
    w->count = count;
    w->op_kind = op;
    w->compress = comp;
    w->prescale = pre;
    w->postscale = post;
    return 0;
}

HVD_EXPORT int hvd_allreduce_ex_async(const void *sendbuf, void *recvbuf,
                                      size_t count, hvd_dtype dtype, hvd_op op,
                                      const char *name,
                                      const hvd_allreduce_opts *opts,
                                      hvd_handle *handle)
{
    struct hvd_request *o;
    int rc = prepare_reduce("hvd_allreduce", sendbuf, recvbuf, count, count,
                            dtype, op, name, opts, handle, &o);
    if (rc)
        return rc;
    o->parts[0].kind = HVD_OP_ALLREDUCE;
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_reducescatter_async(const void *sendbuf, void *recvbuf,
                                       size_t count, size_t row,
                                       hvd_dtype dtype, hvd_op op,
                                       const char *name,
                                       const hvd_allreduce_opts *opts,
                                       hvd_handle *handle)
{
    struct hvd_request *o;
    if (row == 0 || count % row != 0)
        return fail(HVD_EINVAL, "hvd_reducescatter: the row size must be at "
                                "least 1 and divide the count");
    /* This rank's rows, as the transports split them; none may come with
     * a NULL recvbuf. */
    struct hvd_ctx *c = g_ctx;
    size_t rows = count / row, mine = rows;
    int n = 1, me = 0;
    int ps = c ? hvd__api_set(c, "hvd_reducescatter", -1, &n, &me) : 0;
    if (ps < 0)
        return ps;
    if (c)
        mine = hvd__ring_seg_first(rows, n, me + 1) -
               hvd__ring_seg_first(rows, n, me);
    int rc = prepare_reduce("hvd_reducescatter", sendbuf, recvbuf, count,
                            mine * row, dtype, op, name, opts, handle, &o);
    if (rc)
        return rc;
    o->parts[0].kind = HVD_OP_REDUCESCATTER;
    o->parts[0].row = row;
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_alltoall_async(const void *sendbuf, const size_t *sendcounts,
                                  hvd_dtype dtype, void **recvbuf,
                                  size_t *recvcounts, const char *name,
                                  hvd_handle *handle)
{
    struct hvd_ctx *c = g_ctx;
    struct hvd_request *o;
    size_t total = 0;
    if (recvbuf == NULL || sendcounts == NULL || recvcounts == NULL ||
        handle == NULL)
        return fail(HVD_EINVAL, "hvd_alltoall: bad buffer, counts or handle");
    int n = 0, ps = c ? hvd__api_set(c, "hvd_alltoall", -1, &n, NULL) : 0;
    if (ps < 0)
        return ps;
    for (int r = 0; r < n; r++)
        total += sendcounts[r];
    if (total > 0 && sendbuf == NULL)
        return fail(HVD_EINVAL, "hvd_alltoall: bad buffer, counts or handle");
    int rc = prepare("hvd_alltoall", dtype, name, &o);
    if (rc)
        return rc;
    *recvbuf = NULL;
    struct hvd_work *w = &o->parts[0];
    w->kind = HVD_OP_ALLTOALL;
    w->sendbuf = sendbuf;
    w->count = total;
    w->sendcounts = sendcounts;
    w->gathered = recvbuf;
    w->counts = recvcounts;
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_allreduce_async(const void *sendbuf, void *recvbuf,
                                   size_t count, hvd_dtype dtype, hvd_op op,
                                   const char *name, hvd_handle *handle)
{
    return hvd_allreduce_ex_async(sendbuf, recvbuf, count, dtype, op, name,
                                  NULL, handle);
}

HVD_EXPORT int hvd_broadcast_async(void *buf, size_t count, hvd_dtype dtype,
                                   int root, const char *name,
                                   hvd_handle *handle)
{
    struct hvd_ctx *c = g_ctx;
    struct hvd_request *o;
    if (c && (root < 0 || root >= c->size))
        return fail(HVD_EINVAL, "hvd_broadcast: root is not a rank");
    int ps = c ? hvd__api_set(c, "hvd_broadcast", root, NULL, NULL) : 0;
    if (ps < 0)
        return ps;
    if ((count > 0 && buf == NULL) || handle == NULL)
        return fail(HVD_EINVAL, "hvd_broadcast: bad buffer or handle");
    int rc = prepare("hvd_broadcast", dtype, name, &o);
    if (rc)
        return rc;
    struct hvd_work *w = &o->parts[0];
    w->kind = HVD_OP_BROADCAST;
    w->recvbuf = buf;
    w->count = count;
    w->root = root;
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_allgather_async(const void *sendbuf, size_t count,
                                   hvd_dtype dtype, void **recvbuf,
                                   size_t *counts, const char *name,
                                   hvd_handle *handle)
{
    struct hvd_request *o;
    if (recvbuf == NULL || counts == NULL || handle == NULL ||
        (count > 0 && sendbuf == NULL))
        return fail(HVD_EINVAL, "hvd_allgather: bad buffer or handle");
    int rc = prepare("hvd_allgather", dtype, name, &o);
    if (rc)
        return rc;
    *recvbuf = NULL;
    struct hvd_work *w = &o->parts[0];
    w->kind = HVD_OP_ALLGATHER;
    w->sendbuf = sendbuf;
    w->count = count;
    w->gathered = recvbuf;
    w->counts = counts;
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_grouped_allreduce_async(const void *const *sendbufs,
                                           void *const *recvbufs,
                                           const size_t *counts, int n,
                                           hvd_dtype dtype, hvd_op op,
                                           const char *name, hvd_handle *handle)
{
    struct hvd_ctx *c = g_ctx;
    if (c == NULL)
        return fail(HVD_ENOTINIT, "hvd_init() has not been called");
    if (n < 1 || name == NULL || sendbufs == NULL || recvbufs == NULL ||
        counts == NULL || handle == NULL || hvd_dtype_size(dtype) == 0 ||
        (int)op < HVD_SUM || op > HVD_ADASUM)
        return fail(HVD_EINVAL, "hvd_grouped_allreduce: bad arguments (a "
                                "group needs a name and at least one tensor)");
    if (op == HVD_ADASUM &&
        adasum_check("hvd_grouped_allreduce", dtype, HVD_COMPRESS_NONE) != 0)
        return HVD_EINVAL;
    int ps = hvd__api_set(c, "hvd_grouped_allreduce", -1, NULL, NULL);
    if (ps < 0)
        return ps;
    struct hvd_request *o = hvd__api_new_op(n);
    if (o == NULL)
        return fail(HVD_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        struct hvd_work *w = &o->parts[i];
        if (set_name(c, w, name, i) != 0 ||
            (counts[i] > 0 && (sendbufs[i] == NULL || recvbufs[i] == NULL))) {
            free(o);
            return fail(HVD_EINVAL, "hvd_grouped_allreduce: a tensor has no "
                                    "buffer, or the name is too long");
        }
        w->kind = HVD_OP_ALLREDUCE;
        w->sendbuf = sendbufs[i];
        w->recvbuf = recvbufs[i];
        w->count = counts[i];
        w->dtype = dtype;
        w->op_kind = op;
        w->pset = ps;
    }
    return hvd__api_start(o, handle);
}

HVD_EXPORT int hvd_grouped_allgather_async(const void *const *sendbufs,
                                           const size_t *counts, int n,
                                           hvd_dtype dtype, void **recvbufs,
                                           size_t *recvcounts, const char *name,
                                           hvd_handle *handle)
{
    struct hvd_ctx *c = g_ctx;
    int m = 0;
    if (c == NULL)
        return fail(HVD_ENOTINIT, "hvd_init() has not been called");
    if (n < 1 || name == NULL || sendbufs == NULL || counts == NULL ||
        recvbufs == NULL || recvcounts == NULL || handle == NULL ||
        hvd_dtype_size(dtype) == 0)
        return fail(HVD_EINVAL, "hvd_grouped_allgather: bad arguments (a "
                                "group needs a name and at least one tensor)");
    int ps = hvd__api_set(c, "hvd_grouped_allgather", -1, &m, NULL);
    if (ps < 0)
        return ps;
    struct hvd_request *o = hvd__api_new_op(n);
    if (o == NULL)
        return fail(HVD_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        struct hvd_work *w = &o->parts[i];
        if (set_name(c, w, name, i) != 0 ||
            (counts[i] > 0 && sendbufs[i] == NULL)) {
            free(o);
            return fail(HVD_EINVAL, "hvd_grouped_allgather: a tensor has no "
                                    "buffer, or the name is too long");
        }
        recvbufs[i] = NULL;
        w->kind = HVD_OP_ALLGATHER;
        w->sendbuf = sendbufs[i];
        w->count = counts[i];
        w->dtype = dtype;
        w->gathered = &recvbufs[i];
        w->counts = recvcounts + (size_t)i * (size_t)m;
        w->pset = ps;
    }
    return hvd__api_start(o, handle);
}

/* The end of a synchronous call, which started its _async twin with
 * t_sync set. */
static int wait_sync(int rc, hvd_handle h)
{
    t_sync = 0;
    return rc ? rc : hvd_wait(h);
}

HVD_EXPORT int hvd_grouped_allgather(const void *const *sendbufs,
                                     const size_t *counts, int n,
                                     hvd_dtype dtype, void **recvbufs,
                                     size_t *recvcounts, const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_grouped_allgather_async(sendbufs, counts, n, dtype, recvbufs,
                                         recvcounts, name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_poll(hvd_handle handle)
{
    if (handle == NULL)
        return fail(HVD_EINVAL, "hvd_poll: no handle");
    return atomic_load(&handle->done) ? 1 : 0;
}

HVD_EXPORT int hvd_wait(hvd_handle handle)
{
    struct hvd_ctx *c = g_ctx;
    char msg[HVD_ERRMSG + 64];
    if (handle == NULL)
        return fail(HVD_EINVAL, "hvd_wait: no handle");
    int rc = c && !c->standalone ? hvd__engine_wait(c, handle) : handle->rc;
    if (rc != 0) {
        snprintf(msg, sizeof(msg), "%s on rank %d", handle->err,
                 c ? c->rank : -1);
        fail(rc, msg);
    }
    free(handle);
    return rc;
}

HVD_EXPORT int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             hvd_dtype dtype, hvd_op op, const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_allreduce_async(sendbuf, recvbuf, count, dtype, op, name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root,
                             const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_broadcast_async(buf, count, dtype, root, name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype,
                             void **recvbuf, size_t *counts, const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc =
        hvd_allgather_async(sendbuf, count, dtype, recvbuf, counts, name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_reducescatter(const void *sendbuf, void *recvbuf,
                                 size_t count, size_t row, hvd_dtype dtype,
                                 hvd_op op, const char *name,
                                 const hvd_allreduce_opts *opts)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_reducescatter_async(sendbuf, recvbuf, count, row, dtype, op,
                                     name, opts, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_alltoall(const void *sendbuf, const size_t *sendcounts,
                            hvd_dtype dtype, void **recvbuf, size_t *recvcounts,
                            const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_alltoall_async(sendbuf, sendcounts, dtype, recvbuf, recvcounts,
                                name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_grouped_allreduce(const void *const *sendbufs,
                                     void *const *recvbufs,
                                     const size_t *counts, int n,
                                     hvd_dtype dtype, hvd_op op,
                                     const char *name)
{
    hvd_handle h;
    t_sync = 1;
    int rc = hvd_grouped_allreduce_async(sendbufs, recvbufs, counts, n, dtype,
                                         op, name, &h);
    return wait_sync(rc, h);
}

HVD_EXPORT int hvd_barrier(void)
{
    struct hvd_request *o;
    hvd_handle h;
    int rc = prepare("hvd_barrier", HVD_UINT8, NULL, &o);
    if (rc)
        return rc;
    o->parts[0].kind = HVD_OP_BARRIER;
    o->sync = 1;
    rc = hvd__api_start(o, &h);
    return rc ? rc : hvd_wait(h);
}

/* libhvd's buffers come from malloc (see hvd_allgather): the same free(). */
HVD_EXPORT void hvd_free(void *ptr)
{
    free(ptr);
}
