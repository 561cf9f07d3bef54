/* libhvd's public API: the one global context and thin wrappers that hand
 * collectives to the background thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "ctx.h"

static struct hvd_ctx *g_ctx;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local char g_last_error[2 * HVD_ERRMSG];

static int fail(int rc, const char *msg)
{
    snprintf(g_last_error, sizeof(g_last_error), "%s", msg);
    return rc;
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
    hvd__ring_close(&c->ring);
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
    c->rdv_fd = c->wake_fd = -1;
    if (getenv(HVD_ENV_RANK) == NULL) {
        /* Not started by horovodrun: a job of one, as in Horovod. */
        c->standalone = 1;
        c->size = c->local_size = c->cross_size = 1;
        hvd__ring_init(&c->ring, 0, 1);
    } else if ((rc = hvd__join(c, err, sizeof(err))) != 0 ||
               (rc = hvd__engine_start(c)) != 0) {
        char msg[HVD_ERRMSG + 64];
        snprintf(msg, sizeof(msg), "hvd_init on rank %d: %s", c->rank,
                 err[0] ? err : hvd_strerror(rc));
        fail(rc, msg);
        ctx_free(c);
        goto out;
    }
    g_ctx = c;
out:
    pthread_mutex_unlock(&g_init_mu);
    return rc;
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

/* Runs w on the background thread (or here, for a job of one). */
static int submit(struct hvd_work *w, const char *what)
{
    struct hvd_ctx *c = g_ctx;
    char msg[HVD_ERRMSG + 128];
    int rc;

    if (c == NULL)
        return fail(HVD_ENOTINIT, "hvd_init() has not been called");
    w->err[0] = '\0';
    if (c->standalone) {
        rc = 0;
        if (w->kind == HVD_OP_ALLREDUCE)
            rc = hvd__ring_allreduce(&c->ring, w->sendbuf, w->recvbuf, w->count,
                                     w->dtype, w->op, w->err, sizeof(w->err));
        else if (w->kind == HVD_OP_ALLGATHER)
            rc = local_allgather(w);
    } else {
        rc = hvd__engine_submit(c, w);
    }
    if (rc != 0) {
        snprintf(msg, sizeof(msg), "%s '%s' on rank %d: %s", what,
                 w->name ? w->name : "(unnamed)", c->rank,
                 w->err[0] ? w->err : hvd_strerror(rc));
        fail(rc, msg);
    }
    return rc;
}

static int check_dtype(hvd_dtype dt)
{
    return hvd_dtype_size(dt) ? 0 : fail(HVD_EINVAL, "unknown dtype");
}

HVD_EXPORT int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             hvd_dtype dtype, hvd_op op, const char *name)
{
    if (check_dtype(dtype) || (int)op < HVD_SUM || op > HVD_PRODUCT ||
        (count > 0 && (sendbuf == NULL || recvbuf == NULL)))
        return fail(HVD_EINVAL, "hvd_allreduce: bad buffer, dtype or op");
    struct hvd_work w = {.kind = HVD_OP_ALLREDUCE,
                         .sendbuf = sendbuf,
                         .recvbuf = recvbuf,
                         .count = count,
                         .dtype = dtype,
                         .op = op,
                         .name = name};
    return submit(&w, "allreduce");
}

HVD_EXPORT int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root,
                             const char *name)
{
    struct hvd_ctx *c = g_ctx;
    if (c && (root < 0 || root >= c->size))
        return fail(HVD_EINVAL, "hvd_broadcast: root is not a rank");
    if (check_dtype(dtype) || (count > 0 && buf == NULL))
        return fail(HVD_EINVAL, "hvd_broadcast: bad buffer or dtype");
    struct hvd_work w = {.kind = HVD_OP_BROADCAST,
                         .recvbuf = buf,
                         .count = count,
                         .dtype = dtype,
                         .root = root,
                         .name = name};
    return submit(&w, "broadcast");
}

HVD_EXPORT int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype,
                             void **recvbuf, size_t *counts, const char *name)
{
    if (check_dtype(dtype) || recvbuf == NULL || counts == NULL ||
        (count > 0 && sendbuf == NULL))
        return fail(HVD_EINVAL, "hvd_allgather: bad buffer or dtype");
    *recvbuf = NULL;
    struct hvd_work w = {.kind = HVD_OP_ALLGATHER,
                         .sendbuf = sendbuf,
                         .count = count,
                         .dtype = dtype,
                         .gathered = recvbuf,
                         .counts = counts,
                         .name = name};
    return submit(&w, "allgather");
}

HVD_EXPORT int hvd_barrier(void)
{
    struct hvd_work w = {.kind = HVD_OP_BARRIER, .name = "barrier"};
    return submit(&w, "barrier");
}
