/* Failures of other ranks: heard from the rendezvous server, seen on the
 * ring, and told to the server so that every rank learns of them. */
#include "worker/failure.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "worker/ctx.h"
#include "worker/sock.h"
#include "worker/wait.h"

/* How long a collective may go on after another rank's failure was
 * announced, for data that was already on its way. An elastic job gives
 * little: its ranks restore the last commit and reset anyway, and the
 * sooner they do, the sooner training goes on. */
#define ABORT_GRACE_MS 2000
#define ELASTIC_ABORT_GRACE_MS 100
/* How long a rank that lost a neighbour waits to hear of an earlier
 * failure before it reports its own view. */
#define ECHO_WAIT_MS 300

/* Notices of host changes not taken yet: the latest timestamp (seconds)
 * shifted left by 8, or'ed with every change since the last take. One
 * word, so that the engine thread adds and any thread takes without a
 * lock. */
static _Atomic uint64_t g_host_notice;

static void add_host_notice(uint64_t ts, uint8_t changes)
{
    uint64_t old = atomic_load(&g_host_notice), next;
    do {
        uint64_t prev_ts = old >> 8;
        next = (ts > prev_ts ? ts : prev_ts) << 8 | (old & 0xff) | changes;
    } while (!atomic_compare_exchange_weak(&g_host_notice, &old, next));
}

int hvd__host_notice_take(uint64_t *timestamp)
{
    uint64_t v = atomic_exchange(&g_host_notice, 0);
    if (timestamp)
        *timestamp = v >> 8;
    return (int)(v & 0xff);
}

void hvd__set_failed(struct hvd_ctx *c, int rc, const char *msg)
{
    if (c->failed)
        return;
    c->failed = 1;
    c->fail_rc = rc;
    snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
}

/* Reads what the rendezvous server sent: an ABORT names a failed rank and
 * makes the runtime fail; a closed server means horovodrun is gone. */
void hvd__read_rdv(struct hvd_ctx *c)
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
        uint64_t ts;
        uint8_t changes;
        if (f.type == HVD_RDV_ABORT &&
            hvd_rdv_note_decode(f.payload, f.len, &who, &msg) == 0)
            hvd__set_failed(c, HVD_EPEER, msg);
        else if (f.type == HVD_RDV_HOSTS &&
                 hvd_rdv_hosts_decode(f.payload, f.len, &ts, &changes) == 0)
            add_host_notice(ts, changes);
        free(msg);
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        hvd__set_failed(c, HVD_EPEER,
                        "lost the connection to horovodrun's "
                        "rendezvous server");
        close(c->rdv_fd);
        c->rdv_fd = c->abort.fd = -1;
    }
}

/* The ring's abort hook: a running collective fails once a failure was
 * announced and the grace for data already on its way has passed. */
int hvd__check_abort(void *vctx, char *err, size_t errlen)
{
    struct hvd_ctx *c = vctx;
    hvd__read_rdv(c);
    if (!c->failed)
        return 0;
    if (c->abort.deadline == 0)
        c->abort.deadline =
            hvd__now_ms() +
            (c->elastic_id >= 0 ? ELASTIC_ABORT_GRACE_MS : ABORT_GRACE_MS);
    if (hvd__now_ms() < c->abort.deadline)
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
            hvd__read_rdv(c);
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

/* A failure seen on the ring: prefer the server's account of the first
 * failure; if we saw it first, say so, so the other ranks stop waiting. */
int hvd__ring_failed(struct hvd_ctx *c, int rc, const char *err)
{
    if (rc == HVD_EPEER && !c->failed)
        await_abort(c, ECHO_WAIT_MS);
    if (!c->failed) {
        hvd__set_failed(c, rc, err);
        if (rc == HVD_EPEER || rc == HVD_ETIMEDOUT)
            report(c, err);
    }
    return c->fail_rc;
}
