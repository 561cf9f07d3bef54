/* The MPI backend: joins a job that mpirun started and runs the host
 * collectives with MPI, as the MPI transport. */
#include "worker/transport/mpi_backend.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/buf.h"
#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/kernels/reduce.h"
#include "worker/setting.h"
#include "worker/transport/transport.h"

/* Any tag will do: the communicator is libhvd's own. */
#define BELL_TAG 1
/* The idle thread's sleeps between looks for bells grow from the first
 * to the last (see mpi_idle_us). */
#define IDLE_MIN_US 50
#define IDLE_MAX_US 1000
/* MPI counts are int: larger buffers go in pieces of this many elements
 * (or bytes). */
#define PIECE (1 << 30)

struct hvd_mpi {
    /* libhvd's duplicate of MPI_COMM_WORLD: its messages never meet the
     * program's own. */
    MPI_Comm comm;
    int rank, size;
    int finalize; /* libhvd initialized MPI, so it finalizes it */
    int level;    /* the thread level MPI provides */
    MPI_Op ops[HVD_PRODUCT + 1]; /* libhvd's kernels, by hvd_op */
    int *counts, *displs;        /* allgatherv's, one per rank */
    uint8_t *acc; /* float32 accumulator for float16 and bfloat16 */
    size_t acc_cap;
    uint64_t next; /* number of the next negotiation cycle */
    int called;    /* a bell for cycle next has arrived */
    uint64_t bell; /* what this rank's bells carry, until they complete */
    MPI_Request *reqs;
    int nreqs;
    int64_t idle_us; /* the next idle sleep */
    char lib[64];    /* the MPI library's name and version */
};

static int fail(int e, const char *what, char *err, size_t errlen)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(e, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", e);
    snprintf(err, errlen, "%s failed: %s", what, msg);
    return HVD_EPEER;
}

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

/* The dtype of an MPI type that mpi_allreduce hands to MPI. */
static hvd_dtype dtype_of(MPI_Datatype t)
{
    return t == MPI_INT8_T    ? HVD_INT8
           : t == MPI_INT16_T ? HVD_INT16
           : t == MPI_INT32_T ? HVD_INT32
           : t == MPI_INT64_T ? HVD_INT64
           : t == MPI_FLOAT   ? HVD_FLOAT32
           : t == MPI_DOUBLE  ? HVD_FLOAT64
                              : HVD_UINT8;
}

/*
 * libhvd's kernels as MPI ops, for what MPI's own ops get wrong or leave
 * undefined: Open MPI's op/avx saturates 8- and 16-bit integer sums
 * (open-mpi/ompi#8045, "wontfix"), C leaves signed overflow undefined,
 * and Open MPI's MPI_MIN and MPI_MAX keep or drop a float NaN depending
 * on which rank holds it, where libhvd's always keep it. MPI hands them
 * distinct in and inout buffers.
 */
#define USER_OP(name, op)                                                      \
    static void name(void *in, void *inout, int *len, MPI_Datatype *t)         \
    {                                                                          \
        hvd__reduce(inout, in, (size_t)*len, dtype_of(*t), op);                \
    }
USER_OP(op_sum, HVD_SUM)
USER_OP(op_min, HVD_MIN)
USER_OP(op_max, HVD_MAX)
USER_OP(op_prod, HVD_PRODUCT)
#undef USER_OP

/* MPI up, at a thread level that lets the background thread call it. */
static int start_mpi(struct hvd_mpi *m, char *err, size_t errlen)
{
    int inited = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) {
        snprintf(err, errlen,
                 "MPI was already finalized (by an earlier hvd_shutdown() "
                 "or by the program), and MPI starts only once per process");
        return HVD_ENOTSUP;
    }
    MPI_Initialized(&inited);
    if (!inited) {
        /*
         * libhvd alone needs MPI_THREAD_SERIALIZED: MPI starts here, on
         * the caller's thread, and ends in hvd_shutdown after the
         * background thread, the only caller in between, was joined.
         * MULTIPLE also lets the program call MPI from its own threads
         * meanwhile.
         */
        int want = hvd__env_flag(HVD_ENV_MPI_THREADS_DISABLE, 0)
                       ? MPI_THREAD_SERIALIZED
                       : MPI_THREAD_MULTIPLE;
        int e = MPI_Init_thread(NULL, NULL, want, &m->level);
        if (e != MPI_SUCCESS)
            return fail(e, "MPI_Init_thread", err, errlen);
        m->finalize = 1;
    } else {
        MPI_Query_thread(&m->level);
    }
    if (m->level < MPI_THREAD_SERIALIZED) {
        snprintf(err, errlen,
                 "MPI runs at %s, but libhvd calls MPI from its background "
                 "thread: initialize MPI with MPI_Init_thread and "
                 "MPI_THREAD_MULTIPLE (or MPI_THREAD_SERIALIZED if the "
                 "program makes no MPI calls while libhvd runs), or let "
                 "hvd_init initialize it",
                 level_name(m->level));
        return HVD_ENOTSUP;
    }
    return 0;
}

/* Rank and size in MPI_Comm_split's result, which is then freed. */
static int split_place(MPI_Comm comm, int type, int color, int key, int *rank,
                       int *size)
{
    MPI_Comm sub;
    int e = type >= 0
                ? MPI_Comm_split_type(comm, type, key, MPI_INFO_NULL, &sub)
                : MPI_Comm_split(comm, color, key, &sub);
    if (e != MPI_SUCCESS)
        return e;
    MPI_Comm_rank(sub, rank);
    MPI_Comm_size(sub, size);
    MPI_Comm_free(&sub);
    return MPI_SUCCESS;
}

int hvd__mpi_join(struct hvd_ctx *c, char *err, size_t errlen)
{
    struct hvd_mpi *m = calloc(1, sizeof(*m));
    int e, len = 0, rc;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];

    if (m == NULL)
        return HVD_ENOMEM;
    m->comm = MPI_COMM_NULL;
    for (int i = 0; i <= HVD_PRODUCT; i++)
        m->ops[i] = MPI_OP_NULL;
    m->idle_us = IDLE_MIN_US;
    c->mpi = m;
    if ((rc = start_mpi(m, err, errlen)))
        return rc;
    if ((e = MPI_Comm_dup(MPI_COMM_WORLD, &m->comm)) != MPI_SUCCESS)
        return fail(e, "MPI_Comm_dup", err, errlen);
    /* A failed collective returns its code, to fail like a lost peer. */
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    c->rank = m->rank;
    c->size = m->size;
    /* HOROVOD_CONTROLLER=mpi in the ranks of horovodrun: MPI would see
     * jobs of one, each rank alone. */
    const char *hs = getenv(HVD_ENV_SIZE);
    if (hs != NULL && atoi(hs) != m->size) {
        snprintf(err, errlen,
                 "%s=mpi, but MPI sees %d rank%s where %s is %s: start the "
                 "job with mpirun, or unset %s under horovodrun",
                 HVD_ENV_CONTROLLER, m->size, m->size == 1 ? "" : "s",
                 HVD_ENV_SIZE, hs, HVD_ENV_CONTROLLER);
        return HVD_EENV;
    }
    /* As horovodrun's plan: local ranks share a host; cross_rank is the
     * place among the ranks of the same local rank. */
    if ((e = split_place(m->comm, MPI_COMM_TYPE_SHARED, 0, c->rank,
                         &c->local_rank, &c->local_size)) != MPI_SUCCESS)
        return fail(e, "MPI_Comm_split_type", err, errlen);
    if ((e = split_place(m->comm, -1, c->local_rank, c->rank, &c->cross_rank,
                         &c->cross_size)) != MPI_SUCCESS)
        return fail(e, "MPI_Comm_split", err, errlen);
    if ((e = MPI_Op_create(op_sum, 1, &m->ops[HVD_SUM])) != MPI_SUCCESS ||
        (e = MPI_Op_create(op_min, 1, &m->ops[HVD_MIN])) != MPI_SUCCESS ||
        (e = MPI_Op_create(op_max, 1, &m->ops[HVD_MAX])) != MPI_SUCCESS ||
        (e = MPI_Op_create(op_prod, 1, &m->ops[HVD_PRODUCT])) != MPI_SUCCESS)
        return fail(e, "MPI_Op_create", err, errlen);
    m->counts = calloc((size_t)m->size, sizeof(*m->counts));
    m->displs = calloc((size_t)m->size, sizeof(*m->displs));
    m->reqs = calloc((size_t)m->size, sizeof(*m->reqs));
    if (m->counts == NULL || m->displs == NULL || m->reqs == NULL)
        return HVD_ENOMEM;
    if (MPI_Get_library_version(ver, &len) == MPI_SUCCESS) {
        ver[strcspn(ver, ",\n")] = '\0';
        snprintf(m->lib, sizeof(m->lib), "%.*s", (int)sizeof(m->lib) - 1, ver);
    }
    c->tp = &hvd__transport_mpi;
    return 0;
}

void hvd__mpi_close(struct hvd_ctx *c)
{
    struct hvd_mpi *m = c->mpi;
    if (m == NULL)
        return;
    /* Bells are 8 bytes and go eagerly: these are complete by now. */
    if (m->nreqs > 0)
        MPI_Waitall(m->nreqs, m->reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i <= HVD_PRODUCT; i++)
        if (m->ops[i] != MPI_OP_NULL)
            MPI_Op_free(&m->ops[i]);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    if (m->finalize)
        MPI_Finalize();
    free(m->counts);
    free(m->displs);
    free(m->reqs);
    free(m->acc);
    free(m);
    c->mpi = NULL;
}

static MPI_Datatype mpi_type(hvd_dtype dt)
{
    switch (dt) {
    case HVD_INT8:
        return MPI_INT8_T;
    case HVD_INT16:
        return MPI_INT16_T;
    case HVD_INT32:
        return MPI_INT32_T;
    case HVD_INT64:
        return MPI_INT64_T;
    case HVD_FLOAT32:
        return MPI_FLOAT;
    case HVD_FLOAT64:
        return MPI_DOUBLE;
    default:
        return MPI_UINT8_T;
    }
}

/* MPI's own op only where its result is IEEE 754's, the same as libhvd's
 * kernels give: float sums and products, the common case. An average is
 * a sum here, divided later. */
static MPI_Op mpi_op(const struct hvd_mpi *m, hvd_dtype dt, hvd_op op)
{
    if (op == HVD_AVERAGE)
        op = HVD_SUM;
    if (dt == HVD_FLOAT32 || dt == HVD_FLOAT64) {
        if (op == HVD_SUM)
            return MPI_SUM;
        if (op == HVD_PRODUCT)
            return MPI_PROD;
    }
    return m->ops[op];
}

/* MPI_Allreduce of count elements of accumulator type dt, in pieces that
 * fit an int; sendbuf may be MPI_IN_PLACE. */
static int allreduce_acc(struct hvd_mpi *m, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op, char *err,
                         size_t errlen)
{
    MPI_Datatype t = mpi_type(dt);
    MPI_Op o = mpi_op(m, dt, op);
    size_t es = hvd_dtype_size(dt);
    for (size_t at = 0; at < count;) {
        int n = count - at > PIECE ? PIECE : (int)(count - at);
        const void *s = sendbuf == MPI_IN_PLACE
                            ? MPI_IN_PLACE
                            : (const uint8_t *)sendbuf + at * es;
        int e =
            MPI_Allreduce(s, (uint8_t *)recvbuf + at * es, n, t, o, m->comm);
        if (e != MPI_SUCCESS)
            return fail(e, "MPI_Allreduce", err, errlen);
        at += (size_t)n;
    }
    return 0;
}

/*
 * float16 and bfloat16, which MPI cannot add, are widened to float32 here
 * and reduced as float32 by MPI itself (MPI_SUM and MPI_PROD are native
 * there, min and max are libhvd's kernels); each element is rounded once,
 * at the end. That is libhvd's rule for every transport, and the traffic
 * scales like any float32 allreduce (gathering every rank's input instead
 * would grow with the number of ranks). An average is summed, then
 * divided once, by hvd__finish.
 */
static int mpi_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         size_t count, hvd_dtype dt, hvd_op op, char *err,
                         size_t errlen)
{
    struct hvd_mpi *m = c->mpi;
    hvd_dtype acc_dt = hvd__acc_dtype(dt);
    int rc;

    if (count == 0)
        return 0;
    if (acc_dt != dt) {
        if (hvd__grow(&m->acc, &m->acc_cap, count * hvd_dtype_size(acc_dt)) !=
            0)
            return HVD_ENOMEM;
        hvd__widen(m->acc, sendbuf, count, dt);
        rc = allreduce_acc(m, MPI_IN_PLACE, m->acc, count, acc_dt, op, err,
                           errlen);
        if (rc == 0)
            hvd__finish(recvbuf, m->acc, count, dt, op, c->size);
        return rc;
    }
    rc = allreduce_acc(m, sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf,
                       count, dt, op, err, errlen);
    if (rc == 0 && op == HVD_AVERAGE)
        hvd__finish(recvbuf, recvbuf, count, dt, op, c->size);
    return rc;
}

static int mpi_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                         char *err, size_t errlen)
{
    for (size_t at = 0; at < bytes;) {
        int n = bytes - at > PIECE ? PIECE : (int)(bytes - at);
        int e = MPI_Bcast((uint8_t *)buf + at, n, MPI_BYTE, root, c->mpi->comm);
        if (e != MPI_SUCCESS)
            return fail(e, "MPI_Bcast", err, errlen);
        at += (size_t)n;
    }
    return 0;
}

static int mpi_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                          const size_t *bytes, char *err, size_t errlen)
{
    struct hvd_mpi *m = c->mpi;
    uint8_t *out = recvbuf;
    size_t total = 0, mine = 0;
    int e;

    for (int r = 0; r < m->size; r++) {
        if (r == m->rank)
            mine = total;
        total += bytes[r];
    }
    if (total == 0)
        return 0;
    const void *send = sendbuf;
    if (out + mine == sendbuf) {
        send = MPI_IN_PLACE;
    } else if (hvd__overlap(sendbuf, bytes[m->rank], out, total)) {
        memmove(out + mine, sendbuf, bytes[m->rank]);
        send = MPI_IN_PLACE;
    }
    if (total <= INT_MAX) {
        for (int r = 0, at = 0; r < m->size; r++) {
            m->counts[r] = (int)bytes[r];
            m->displs[r] = at;
            at += (int)bytes[r];
        }
        e = MPI_Allgatherv(send, m->counts[m->rank], MPI_BYTE, recvbuf,
                           m->counts, m->displs, MPI_BYTE, m->comm);
        return e == MPI_SUCCESS ? 0 : fail(e, "MPI_Allgatherv", err, errlen);
    }
    /* Offsets past an int: each rank's block as a broadcast from it. */
    if (send != MPI_IN_PLACE)
        memcpy(out + mine, sendbuf, bytes[m->rank]);
    for (int r = 0, rc; r < m->size; r++) {
        if ((rc = mpi_broadcast(c, out, bytes[r], r, err, errlen)))
            return rc;
        out += bytes[r];
    }
    return 0;
}

/*
 * MPI_Reduce_scatter for integers, whose reductions (wrapping, as libhvd's
 * kernels do) give the same bits in any order, so that MPI's order cannot
 * part from its allreduce's. Floats, whose bits depend on the order, and
 * counts past an int take the allreduce and keep its slice.
 */
static int mpi_reducescatter(struct hvd_ctx *c, const void *sendbuf,
                             void *recvbuf, size_t count, hvd_dtype dt,
                             hvd_op op, const size_t *bounds, char *err,
                             size_t errlen)
{
    struct hvd_mpi *m = c->mpi;
    size_t es = hvd_dtype_size(dt);
    size_t mine = bounds[m->rank + 1] - bounds[m->rank];
    int ints = dt == HVD_UINT8 || dt == HVD_INT8 || dt == HVD_INT16 ||
               dt == HVD_INT32 || dt == HVD_INT64;

    if (count == 0)
        return 0;
    if (!ints || count > INT_MAX ||
        hvd__overlap(sendbuf, count * es, recvbuf, mine * es))
        return hvd__coll_reducescatter_by_allreduce(
            c, sendbuf, recvbuf, count, dt, op, bounds, err, errlen);
    for (int r = 0; r < m->size; r++)
        m->counts[r] = (int)(bounds[r + 1] - bounds[r]);
    int e = MPI_Reduce_scatter(sendbuf, recvbuf, m->counts, mpi_type(dt),
                               mpi_op(m, dt, op), m->comm);
    if (e != MPI_SUCCESS)
        return fail(e, "MPI_Reduce_scatter", err, errlen);
    if (op == HVD_AVERAGE)
        hvd__finish(recvbuf, recvbuf, mine, dt, op, c->size);
    return 0;
}

/* MPI_Alltoallv in bytes; offsets past an int take the fallback. */
static int mpi_alltoallv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                         const size_t *bytes, char *err, size_t errlen)
{
    struct hvd_mpi *m = c->mpi;
    size_t n = (size_t)m->size, me = (size_t)m->rank, sent = 0, got = 0;
    int *a = calloc(4 * n, sizeof(*a)), rc = 0;
    int *scounts = a, *sdispls = a + n, *rcounts = a + 2 * n,
        *rdispls = a + 3 * n;

    if (a == NULL)
        return HVD_ENOMEM;
    for (size_t j = 0; j < n; j++) {
        sent += bytes[me * n + j];
        got += bytes[j * n + me];
    }
    if (sent > INT_MAX || got > INT_MAX) {
        rc = hvd__coll_alltoallv_by_allgatherv(c, sendbuf, recvbuf, bytes, err,
                                               errlen);
        goto out;
    }
    for (size_t j = 0, s = 0, r = 0; j < n; j++) {
        scounts[j] = (int)bytes[me * n + j];
        sdispls[j] = (int)s;
        s += bytes[me * n + j];
        rcounts[j] = (int)bytes[j * n + me];
        rdispls[j] = (int)r;
        r += bytes[j * n + me];
    }
    int e = MPI_Alltoallv(sendbuf, scounts, sdispls, MPI_BYTE, recvbuf, rcounts,
                          rdispls, MPI_BYTE, m->comm);
    if (e != MPI_SUCCESS)
        rc = fail(e, "MPI_Alltoallv", err, errlen);
out:
    free(a);
    return rc;
}

/*
 * Bells. A negotiation cycle is an allgather every rank must join, and an
 * idle rank has no socket on which another rank's start would show. So a
 * rank that starts a cycle of its own sends every other rank a bell, an
 * 8-byte message with the cycle's number, and idle ranks look for bells
 * with MPI_Improbe. Every rank counts the cycles alike, so a bell for a
 * cycle this rank has already run (another rank rang for the same cycle)
 * is dropped, and a rank never starts a cycle nobody else joins.
 */
static int take_bells(struct hvd_mpi *m)
{
    while (!m->called) {
        int flag = 0;
        uint64_t n;
        MPI_Message msg;
        MPI_Status st;
        if (MPI_Improbe(MPI_ANY_SOURCE, BELL_TAG, m->comm, &flag, &msg, &st) !=
                MPI_SUCCESS ||
            !flag ||
            MPI_Mrecv(&n, 1, MPI_UINT64_T, &msg, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
            break;
        m->called = n >= m->next;
    }
    return m->called;
}

/* Whether another rank has rung this one into the next cycle. */
static int mpi_peer_started(struct hvd_ctx *c)
{
    return take_bells(c->mpi);
}

/* A cycle starts: rings the other ranks unless one of them rang first. */
static void mpi_cycle_start(struct hvd_ctx *c)
{
    struct hvd_mpi *m = c->mpi;
    if (!take_bells(m) && m->size > 1) {
        /* The last cycle's bells went eagerly (8 bytes): this does not
         * wait for their receivers. */
        if (m->nreqs > 0)
            MPI_Waitall(m->nreqs, m->reqs, MPI_STATUSES_IGNORE);
        m->nreqs = 0;
        m->bell = m->next;
        for (int r = 0; r < m->size; r++)
            if (r != m->rank &&
                MPI_Isend(&m->bell, 1, MPI_UINT64_T, r, BELL_TAG, m->comm,
                          &m->reqs[m->nreqs]) == MPI_SUCCESS)
                m->nreqs++;
    }
    m->called = 0;
    m->next++;
    m->idle_us = IDLE_MIN_US;
}

/*
 * Right after a cycle another is likely soon (a training step's tensors
 * come in bursts), so the first sleeps are short; a rank idle for long
 * looks a thousand times a second, which costs a system call and an
 * MPI_Improbe each time (well under 1% of a core) and delays an idle
 * rank's joining by at most a millisecond.
 */
static int64_t mpi_idle_us(struct hvd_ctx *c)
{
    struct hvd_mpi *m = c->mpi;
    int64_t us = m->idle_us;
    m->idle_us = us * 2 > IDLE_MAX_US ? IDLE_MAX_US : us * 2;
    return us;
}

static void mpi_describe(const struct hvd_ctx *c, char *out, size_t len)
{
    const struct hvd_mpi *m = c->mpi;
    snprintf(out, len, "MPI (%d rank%s; %s; %s)", m->size,
             m->size == 1 ? "" : "s", level_name(m->level),
             m->lib[0] ? m->lib : "unknown library");
}

const struct hvd_transport hvd__transport_mpi = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allgatherv = mpi_allgatherv,
    .reducescatter = mpi_reducescatter,
    .alltoallv = mpi_alltoallv,
    .describe = mpi_describe,
    .peer_started = mpi_peer_started,
    .cycle_start = mpi_cycle_start,
    .idle_us = mpi_idle_us,
};
