/* The background thread: owns the sockets, runs collectives in the order
 * they were submitted, and turns a peer's failure into errors. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "ctx.h"
#include "sock.h"

/* How long a collective may go on after another rank's failure was
 * announced, for data that was already on its way. */
#define ABORT_GRACE_MS 2000
/* How long a rank that lost a neighbour waits to hear of an earlier
 * failure before it reports its own view. */
#define ECHO_WAIT_MS 300

static void set_failed(struct hvd_ctx *c, int rc, const char *msg)
{
    if (c->failed)
        return;
    c->failed = 1;
    c->fail_rc = rc;
    snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
}

/* Reads what the rendezvous server sent: an ABORT names a failed rank and
 * makes the runtime fail; a closed server means horovodrun is gone. */
static void read_rdv(struct hvd_ctx *c)
{
    uint8_t buf[4096];
    struct hvd_frame f;
    ssize_t n;

    if (c->rdv_fd < 0)
        return;
    while ((n = recv(c->rdv_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
        if (hvd_frame_reader_push(&c->rdv_reader, buf, (size_t)n) != 0)
            break;
    while (hvd_frame_reader_next(&c->rdv_reader, &f) == 1) {
        int32_t who;
        char *msg = NULL;
        if (f.type == HVD_RDV_ABORT &&
            hvd_rdv_note_decode(f.payload, f.len, &who, &msg) == 0)
            set_failed(c, HVD_EPEER, msg);
        free(msg);
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        set_failed(c, HVD_EPEER,
                   "lost the connection to horovodrun's "
                   "rendezvous server");
        close(c->rdv_fd);
        c->rdv_fd = c->ring.abort_fd = -1;
    }
}

/* The ring's abort hook: a running collective fails once a failure was
 * announced and the grace for data already on its way has passed. */
static int check_abort(void *vctx, char *err, size_t errlen)
{
    struct hvd_ctx *c = vctx;
    read_rdv(c);
    if (!c->failed)
        return 0;
    if (c->ring.abort_deadline == 0)
        c->ring.abort_deadline = hvd__now_ms() + ABORT_GRACE_MS;
    if (hvd__now_ms() < c->ring.abort_deadline)
        return 0;
    snprintf(err, errlen, "%s", c->fail_msg);
    return c->fail_rc;
}

/* A dropped neighbour is often only the echo of a failure elsewhere: give
 * the server a moment to name the rank that failed first. */
static void await_abort(struct hvd_ctx *c, int ms)
{
    int64_t deadline = hvd__now_ms() + ms;
    while (!c->failed && c->rdv_fd >= 0 && hvd__now_ms() < deadline) {
        struct pollfd p = {.fd = c->rdv_fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - hvd__now_ms())) > 0)
            read_rdv(c);
    }
}

/* Tells the server (and so every rank) that this rank saw a failure. */
static void report(struct hvd_ctx *c, const char *msg)
{
    uint8_t *f;
    size_t len;
    if (c->rdv_fd < 0 ||
        hvd_rdv_note_encode(HVD_RDV_REPORT, c->rank, msg, &f, &len) != 0)
        return;
    hvd__sock_send_all(c->rdv_fd, f, len, hvd__now_ms() + 1000);
    free(f);
}

static int do_allgather(struct hvd_ctx *c, struct hvd_work *w)
{
    size_t es = hvd_dtype_size(w->dtype);
    size_t *bytes = calloc((size_t)c->size, sizeof(*bytes));
    uint64_t *counts = calloc((size_t)c->size, sizeof(*counts));
    uint8_t *out = NULL;
    int rc = HVD_ENOMEM;

    if (bytes == NULL || counts == NULL)
        goto out;
    /* First everyone's count, then the data. */
    for (int i = 0; i < c->size; i++)
        bytes[i] = sizeof(uint64_t);
    counts[c->rank] = w->count;
    rc = hvd__ring_allgatherv(&c->ring, &counts[c->rank], counts, bytes, w->err,
                              sizeof(w->err));
    if (rc)
        goto out;
    size_t total = 0;
    for (int i = 0; i < c->size; i++) {
        w->counts[i] = (size_t)counts[i];
        bytes[i] = (size_t)counts[i] * es;
        total += bytes[i];
    }
    if (total > 0 && (out = malloc(total)) == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    rc = hvd__ring_allgatherv(&c->ring, w->sendbuf, out, bytes, w->err,
                              sizeof(w->err));
out:
    if (rc == 0) {
        *w->gathered = out;
    } else {
        free(out);
    }
    free(bytes);
    free(counts);
    return rc;
}

static int run_work(struct hvd_ctx *c, struct hvd_work *w)
{
    uint8_t token[1] = {1};
    uint8_t *all;
    size_t *ones;
    int rc;

    if (c->failed) {
        snprintf(w->err, sizeof(w->err), "%s", c->fail_msg);
        return c->fail_rc;
    }
    c->ring.abort_deadline = 0;
    switch (w->kind) {
    case HVD_OP_ALLREDUCE:
        rc = hvd__ring_allreduce(&c->ring, w->sendbuf, w->recvbuf, w->count,
                                 w->dtype, w->op, w->err, sizeof(w->err));
        break;
    case HVD_OP_BROADCAST:
        rc = hvd__ring_broadcast(&c->ring, w->recvbuf,
                                 w->count * hvd_dtype_size(w->dtype), w->root,
                                 w->err, sizeof(w->err));
        break;
    case HVD_OP_ALLGATHER:
        rc = do_allgather(c, w);
        break;
    case HVD_OP_BARRIER:
        /* Every rank's byte must arrive everywhere: nobody leaves early. */
        all = malloc((size_t)c->size);
        ones = malloc((size_t)c->size * sizeof(*ones));
        rc = HVD_ENOMEM;
        if (all && ones) {
            for (int i = 0; i < c->size; i++)
                ones[i] = 1;
            rc = hvd__ring_allgatherv(&c->ring, token, all, ones, w->err,
                                      sizeof(w->err));
        }
        free(all);
        free(ones);
        break;
    default:
        rc = HVD_EINVAL;
    }
    if (rc == HVD_EPEER && !c->failed)
        await_abort(c, ECHO_WAIT_MS);
    if (rc == HVD_EPEER && c->failed) {
        snprintf(w->err, sizeof(w->err), "%s", c->fail_msg);
    } else if (rc == HVD_EPEER) {
        /* We saw it first: say so, so the other ranks stop waiting. */
        set_failed(c, rc, w->err);
        report(c, w->err);
    } else if (rc == HVD_EPEER || rc == HVD_ESYS) {
        set_failed(c, rc, w->err);
    }
    return rc;
}

static struct hvd_work *take(struct hvd_ctx *c)
{
    pthread_mutex_lock(&c->mu);
    struct hvd_work *w = c->head;
    if (w) {
        c->head = w->next;
        if (c->head == NULL)
            c->tail = NULL;
        atomic_fetch_sub(&c->pending, 1);
    }
    pthread_mutex_unlock(&c->mu);
    return w;
}

static struct hvd_work *next_work(struct hvd_ctx *c)
{
    for (;;) {
        struct hvd_work *w = take(c);
        if (w)
            return w;
        /* Training loops submit back to back: look for a while before
         * going to sleep. */
        int64_t until = hvd__now_us() + c->spin_us;
        while (c->spin_us > 0 && atomic_load(&c->pending) == 0 &&
               hvd__now_us() < until)
            ;
        if (atomic_load(&c->pending) > 0)
            continue;
        /* Idle: wait for work, and keep hearing about failures. The flag
         * is set before the last look, so a submitter either sees it or
         * its work is seen here. */
        atomic_store(&c->sleeping, 1);
        if (atomic_load(&c->pending) > 0) {
            atomic_store(&c->sleeping, 0);
            continue;
        }
        struct pollfd p[2] = {{.fd = c->wake_fd, .events = POLLIN},
                              {.fd = c->rdv_fd, .events = POLLIN}};
        int n = poll(p, c->rdv_fd >= 0 ? 2 : 1, -1);
        atomic_store(&c->sleeping, 0);
        if (n < 0)
            continue;
        if (p[0].revents) {
            uint64_t v;
            while (read(c->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR)
                ;
        }
        if (c->rdv_fd >= 0 && p[1].revents)
            read_rdv(c);
    }
}

static void *thread_main(void *arg)
{
    struct hvd_ctx *c = arg;
    for (;;) {
        struct hvd_work *w = next_work(c);
        int stop = w->kind == HVD_OP_SHUTDOWN;
        w->rc = stop ? 0 : run_work(c, w);
        if (stop && c->rdv_fd >= 0) {
            uint8_t *f;
            size_t len;
            if (hvd_rdv_note_encode(HVD_RDV_BYE, c->rank, "", &f, &len) == 0) {
                hvd__sock_send_all(c->rdv_fd, f, len, hvd__now_ms() + 1000);
                free(f);
            }
        }
        pthread_mutex_lock(&c->mu);
        atomic_store(&w->done, 1);
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        if (stop)
            return NULL;
    }
}

int hvd__engine_start(struct hvd_ctx *c)
{
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->wake_fd < 0)
        return HVD_ESYS;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    /* Spinning pays only while every spinning thread has a CPU: one
     * background thread per rank spins, callers sleep (measured on two
     * cores: callers that spin too slow everything down). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv("HOROVOD_SPIN_US");
    int spin = v ? atoi(v) : 20;
    c->spin_us = c->local_size <= cpus && spin > 0 ? spin : 0;
    c->ring.spin_us = c->spin_us;
    c->ring.abort_fd = c->rdv_fd;
    c->ring.check_abort = check_abort;
    c->ring.abort_ctx = c;
    if (pthread_create(&c->thread, NULL, thread_main, c) != 0)
        return HVD_ESYS;
    c->thread_started = 1;
    return 0;
}

int hvd__engine_submit(struct hvd_ctx *c, struct hvd_work *w)
{
    uint64_t one = 1;
    atomic_store(&w->done, 0);
    w->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = w;
    else
        c->head = w;
    c->tail = w;
    atomic_fetch_add(&c->pending, 1);
    pthread_mutex_unlock(&c->mu);
    if (atomic_load(&c->sleeping))
        while (write(c->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
            ;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&w->done))
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return w->rc;
}

void hvd__engine_stop(struct hvd_ctx *c)
{
    if (c->thread_started) {
        struct hvd_work w = {.kind = HVD_OP_SHUTDOWN};
        hvd__engine_submit(c, &w);
        pthread_join(c->thread, NULL);
        c->thread_started = 0;
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
    }
    if (c->wake_fd > 0)
        close(c->wake_fd);
    c->wake_fd = -1;
}
