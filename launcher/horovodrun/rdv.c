/* Rendezvous server: authenticates ranks, hands out the peer table, and
 * relays failures so that every rank learns which peer died. */
#include "launcher/horovodrun/rdv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/hvd_err.h"
#include "launcher/lib/log.h"
#include "common/wire.h"

/*
 * Anyone who can reach the port can connect, so a connection gets little
 * until it has proved the job secret. A REGISTER frame is about 130 bytes
 * plus the rank's host name: 4 KiB fits any real name, and it is all an
 * unregistered peer can make the server buffer.
 */
#define PENDING_FRAME_MAX 4096u
/* A registered rank sends only REPORT (a one-line message) and BYE. */
#define RANK_FRAME_MAX (64u * 1024)
/* A rank registers as soon as it reads the challenge, milliseconds after
 * it connected; a connection still silent after this is not a rank. A
 * registered rank may then stay idle for the whole job. */
#define REGISTER_TIMEOUT_MS 5000
/* Unregistered connections held at once beyond one per rank; at the
 * limit the oldest goes, since a rank needs only milliseconds. */
#define PENDING_EXTRA_MAX 512
/* Refused peers named one by one; later ones are only counted, so that
 * a flood of connections cannot flood the terminal. */
#define REFUSALS_SHOWN 10

struct hr_rdv_conn {
    uv_tcp_t tcp;
    struct hr_rdv *srv;
    struct hvd_frame_reader reader;
    uint8_t nonce[HVD_NONCE_LEN];      /* our challenge */
    uint8_t rank_nonce[HVD_NONCE_LEN]; /* the rank's challenge to us */
    int rank; /* -1 until registered; its id in an elastic job */
    /* What it registered: its host (for messages) and where its peers
     * reach it. */
    char *host, *addr;
    uint32_t port;
    unsigned gen; /* the generation it joined */
    int closing;
    uint64_t deadline; /* loop time by which it must register */
    char from[80];     /* peer address for messages */
    /* Links of the pending list, until it registers. */
    struct hr_rdv_conn *prev, *next;
    /* A carried connection (hr_rdv_carried_open) has no socket here. */
    const struct hr_rdv_carrier *carrier;
    void *carrier_arg;
    uint32_t carrier_id;
    int carrier_gone; /* the carrier ended it: nothing to tell */
    int busy;         /* its bytes are being handled: free it after */
};

struct write_req {
    uv_write_t req;
    uint8_t *frame;
};

static void on_written(uv_write_t *req, int status)
{
    struct write_req *wr = (struct write_req *)req;
    (void)status; /* a dead rank is noticed when its connection closes */
    free(wr->frame);
    free(wr);
}

static void send_frame(struct hr_rdv_conn *c, uint8_t *frame, size_t len)
{
    if (c->carrier) {
        if (c->closing)
            free(frame);
        else
            c->carrier->send(c->carrier_arg, c->carrier_id, frame, len);
        return;
    }
    struct write_req *wr = malloc(sizeof(*wr));
    if (wr == NULL || c->closing) {
        free(wr);
        free(frame);
        return;
    }
    wr->frame = frame;
    uv_buf_t b = uv_buf_init((char *)frame, (unsigned)len);
    if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_written)) {
        free(frame);
        free(wr);
    }
}

static void send_note(struct hr_rdv_conn *c, uint8_t type, int rank,
                      const char *msg)
{
    uint8_t *f;
    size_t len;
    if (hvd_rdv_note_encode(type, rank, msg, &f, &len) == 0)
        send_frame(c, f, len);
}

static void pending_push(struct hr_rdv_conn *c)
{
    struct hr_rdv *r = c->srv;
    c->prev = r->pending_tail;
    c->next = NULL;
    if (r->pending_tail)
        r->pending_tail->next = c;
    else
        r->pending = c;
    r->pending_tail = c;
    r->npending++;
}

static void pending_unlink(struct hr_rdv_conn *c)
{
    struct hr_rdv *r = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        r->pending = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->pending_tail = c->prev;
    c->prev = c->next = NULL;
    r->npending--;
}

static void conn_free(struct hr_rdv_conn *c)
{
    hvd_frame_reader_close(&c->reader);
    free(c->host);
    free(c->addr);
    free(c);
}

static void conn_closed(uv_handle_t *h)
{
    conn_free(h->data);
}

static void close_conn(struct hr_rdv_conn *c)
{
    struct hr_rdv *r = c->srv;
    if (c->closing)
        return;
    c->closing = 1;
    if (c->rank < 0)
        pending_unlink(c);
    else if (r->ranks[c->rank] == c)
        r->ranks[c->rank] = NULL;
    if (c->carrier == NULL) {
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    if (!c->carrier_gone)
        c->carrier->close(c->carrier_arg, c->carrier_id);
    if (!c->busy)
        conn_free(c);
}

/* Says how many refusals went unnamed since the last such line. */
static void tell_refusals(struct hr_rdv *r)
{
    unsigned long n = r->refusals - r->refusals_told;
    if (n == 0)
        return;
    hvd_log_warn("rendezvous: refused %lu more connection%s (not named one by "
                 "one)",
                 n, n > 1 ? "s" : "");
    r->refusals_told = r->refusals;
}

/* The FAIL note carries the error code the rank's hvd_init returns. Each
 * message is one line naming the peer's address and what it did wrong. */
static void refuse(struct hr_rdv_conn *c, int code, const char *why)
{
    struct hr_rdv *r = c->srv;
    if (++r->refusals <= REFUSALS_SHOWN) {
        hvd_log_warn("rendezvous: refused a connection from %s: %s", c->from,
                     why);
        r->refusals_told = r->refusals;
        if (r->refusals == REFUSALS_SHOWN)
            hvd_log_warn("rendezvous: further refused connections are only "
                         "counted");
    }
    send_note(c, HVD_RDV_FAIL, code, why);
    close_conn(c);
}

/* Tells every other registered rank that rank failed (first report wins:
 * later ones are consequences). */
static void broadcast_abort(struct hr_rdv *r, const struct hr_rdv_conn *from,
                            int rank, const char *msg)
{
    if (r->aborted)
        return;
    r->aborted = 1;
    for (int i = 0; i < r->cap; i++) {
        struct hr_rdv_conn *c = r->ranks[i];
        /* An elastic process that joined the generation forming has left
         * the old one's collectives: the failure is not its. */
        if (c == NULL || c == from ||
            (r->size == 0 && r->forming && c->gen == r->gen))
            continue;
        send_note(c, HVD_RDV_ABORT, rank, msg);
    }
}

/* The rank of id in the plan of the generation formed or forming, or -1:
 * in an elastic job, a process that horovodrun is stopping. */
static int plan_rank(const struct hr_rdv *r, int id)
{
    for (int i = 0; i < r->plan_n; i++)
        if (r->plan_ids[i] == id)
            return i;
    return -1;
}

/* Whether id has registered in the generation forming. */
static int in_gen(const struct hr_rdv *r, int id)
{
    return id >= 0 && id < r->cap && r->ranks[id] &&
           r->ranks[id]->gen == r->gen;
}

int hr_rdv_registered(const struct hr_rdv *r, int id)
{
    return in_gen(r, id);
}

/* What rank i of the plan needs from the peer table: the layout, and the
 * addresses of the ranks it connects to or hears from (wanted). */
static void send_rank_peers(struct hr_rdv *r, struct hvd_rdv_run *runs,
                            uint32_t nruns, const struct hvd_rdv_layout *l,
                            int i)
{
    int wanted[HVD_RDV_WANTED_MAX];
    struct hvd_rdv_peer peers[HVD_RDV_WANTED_MAX];
    struct hvd_rdv_peers table = {(uint32_t)r->plan_n, nruns, runs, 0, peers};
    struct hr_rdv_conn *c = r->ranks[r->plan_ids[i]];
    uint8_t *f;
    size_t len;

    table.n = (uint32_t)hvd_rdv_layout_wanted(l, i, wanted);
    for (uint32_t k = 0; k < table.n; k++) {
        const struct hr_rdv_conn *p = r->ranks[r->plan_ids[wanted[k]]];
        peers[k] = (struct hvd_rdv_peer){(uint32_t)wanted[k], p->host, p->addr,
                                         p->port};
    }
    if (r->size == 0 &&
        hvd_rdv_assign_encode(&r->plan_assign[i], r->secret, sizeof(r->secret),
                              c->rank_nonce, &f, &len) == 0)
        send_frame(c, f, len);
    if (hvd_rdv_peers_encode(&table, r->secret, sizeof(r->secret),
                             c->rank_nonce, &f, &len) == 0)
        send_frame(c, f, len);
}

/* Every rank of the plan gets its part of the peer table (an elastic
 * process first its place in it), built from what each registered. */
static void send_peers(struct hr_rdv *r)
{
    struct hvd_rdv_layout l = {0};
    struct hvd_rdv_run *runs = NULL;
    uint32_t nruns = 0;
    const char **hosts =
        r->plan_n > 0 ? malloc((size_t)r->plan_n * sizeof(*hosts)) : NULL;
    if (hosts == NULL)
        return; /* the start timeout reports it */
    for (int i = 0; i < r->plan_n; i++)
        hosts[i] = r->ranks[r->plan_ids[i]]->host;
    int err = hvd_rdv_layout_from_hosts(&l, r->plan_n, hosts);
    free(hosts);
    if (err || hvd_rdv_layout_runs(&l, &runs, &nruns)) {
        hvd_rdv_layout_close(&l);
        return;
    }
    r->forming = 0;
    uv_timer_stop(&r->timer);
    for (int i = 0; i < r->plan_n; i++)
        send_rank_peers(r, runs, nruns, &l, i);
    free(runs);
    hvd_rdv_layout_close(&l);
    if (r->gen == 0)
        hvd_log_info("rendezvous: all %d ranks registered", r->plan_n);
    else
        hvd_log_info("rendezvous: all %d ranks registered again "
                     "(initialisation %u)",
                     r->plan_n, r->gen + 1);
    if (r->size == 0) {
        r->plan_ready = 0;
        if (r->cb && r->cb->formed)
            r->cb->formed(r->cb_arg, r->gen);
    }
}

/* The generation forms once its plan is known and all of it registered. */
static void maybe_form(struct hr_rdv *r)
{
    if (!r->forming || !r->plan_ready)
        return;
    for (int i = 0; i < r->plan_n; i++)
        if (!in_gen(r, r->plan_ids[i]))
            return;
    send_peers(r);
}

/* The first registration after a complete generation starts the next. */
static void next_gen(struct hr_rdv *r)
{
    if (r->forming)
        return;
    r->forming = 1;
    r->gen++;
    r->joined = 0;
    r->aborted = 0;
}

static void on_start_timeout(uv_timer_t *t)
{
    struct hr_rdv *r = t->data;
    char list[400] = "", msg[512];
    int n = 0, missing = 0;

    if (r->size == 0) {
        if (r->cb && r->cb->timeout)
            r->cb->timeout(r->cb_arg);
        return;
    }
    for (int i = 0; i < r->size; i++) {
        if (in_gen(r, i))
            continue;
        if (missing++ < 16 && n < (int)sizeof(list))
            n += snprintf(list + n, sizeof(list) - (size_t)n, "%s%d",
                          missing > 1 ? ", " : "", i);
    }
    if (missing > 16 && n < (int)sizeof(list))
        snprintf(list + n, sizeof(list) - (size_t)n, " and %d more",
                 missing - 16);
    snprintf(msg, sizeof(msg),
             "rank%s %s did not call hvd_init within %g s (--start-timeout)",
             missing > 1 ? "s" : "", list, r->start_timeout);
    r->failed = 1;
    hvd_log_error("rendezvous: %s", msg);
    for (int i = 0; i < r->size; i++)
        if (in_gen(r, i))
            send_note(r->ranks[i], HVD_RDV_FAIL, HVD_ETIMEDOUT, msg);
}

static void on_pending_timeout(uv_timer_t *t);

/* One timer serves every waiting connection: it is due when the oldest
 * one's time is up. */
static void arm_pending_timer(struct hr_rdv *r)
{
    if (r->pending == NULL || uv_is_active((uv_handle_t *)&r->pending_timer))
        return;
    uint64_t now = uv_now(r->loop), due = r->pending->deadline;
    uv_timer_start(&r->pending_timer, on_pending_timeout,
                   due > now ? due - now : 0, 0);
}

/* Closes the connections that did not register in time; the list is in
 * the order they came, so the expired ones are at its head. */
static void on_pending_timeout(uv_timer_t *t)
{
    struct hr_rdv *r = t->data;
    uint64_t now = uv_now(r->loop);
    char why[80];

    snprintf(why, sizeof(why), "it did not register within %d s",
             REGISTER_TIMEOUT_MS / 1000);
    while (r->pending && r->pending->deadline <= now)
        refuse(r->pending, HVD_ETIMEDOUT, why);
    arm_pending_timer(r);
}

static void handle_register(struct hr_rdv_conn *c, const struct hvd_frame *f)
{
    struct hr_rdv *r = c->srv;
    struct hvd_rdv_register m = {0};
    char why[160];
    /* The MAC is checked before anything is decoded: a peer without the
     * secret cannot make the server allocate. Our nonce is new for each
     * connection, so a REGISTER recorded elsewhere does not verify. */
    int err = hvd_rdv_register_decode(&m, f->payload, f->len, r->secret,
                                      sizeof(r->secret), c->nonce);
    if (err == HVD_EAUTH) {
        refuse(c, HVD_EAUTH, "it did not prove the job secret");
        goto out;
    }
    if (err) {
        refuse(c, HVD_EPROTO, "malformed registration");
        goto out;
    }
    if (r->size == 0 && m.size != 0) {
        snprintf(why, sizeof(why),
                 "rank %u of %u registered as in a fixed-size job, but this "
                 "job is elastic",
                 m.rank, m.size);
        refuse(c, HVD_EPROTO, why);
        goto out;
    }
    if (r->size > 0 && m.size == 0) {
        snprintf(why, sizeof(why),
                 "process %u registered as in an elastic job, but this job "
                 "has a fixed size of %d",
                 m.rank, r->size);
        refuse(c, HVD_EPROTO, why);
        goto out;
    }
    if (r->size == 0 ? m.rank >= (uint32_t)r->cap
                     : m.size != (uint32_t)r->size || m.rank >= m.size) {
        if (r->size == 0)
            snprintf(why, sizeof(why), "process %u is not one this job started",
                     m.rank);
        else
            snprintf(why, sizeof(why),
                     "rank %u of %u does not fit this job of %d", m.rank,
                     m.size, r->size);
        refuse(c, HVD_EPROTO, why);
        goto out;
    }
    if (r->failed) {
        refuse(c, HVD_ETIMEDOUT, "the start timeout passed");
        goto out;
    }
    /* A rank that shut down said goodbye first, which freed its slot. */
    if (r->ranks[m.rank]) {
        snprintf(why, sizeof(why),
                 "rank %u registered again while its first connection is "
                 "open (two processes with one rank?)",
                 m.rank);
        refuse(c, HVD_EPROTO, why);
        goto out;
    }
    next_gen(r);
    pending_unlink(c);
    c->rank = (int)m.rank;
    c->gen = r->gen;
    c->reader.max = RANK_FRAME_MAX;
    memcpy(c->rank_nonce, m.nonce, HVD_NONCE_LEN);
    r->ranks[m.rank] = c;
    c->host = m.host;
    c->addr = m.addr;
    c->port = m.port;
    m.host = m.addr = NULL;
    /* An elastic plan's timeout runs from hr_rdv_form. */
    if (r->joined++ == 0 && r->size > 0)
        uv_timer_start(&r->timer, on_start_timeout,
                       (uint64_t)(r->start_timeout * 1000), 0);
    hvd_log_info("rendezvous: %s %d registered from %s",
                 r->size ? "rank" : "process", c->rank, c->from);
    if (r->size == 0 && r->cb && r->cb->registered)
        r->cb->registered(r->cb_arg, c->rank);
    maybe_form(r);
out:
    hvd_rdv_register_close(&m);
}

static void handle_frame(struct hr_rdv_conn *c, const struct hvd_frame *f)
{
    struct hr_rdv *r = c->srv;
    if (c->rank < 0) {
        if (f->type == HVD_RDV_REGISTER)
            handle_register(c, f);
        else
            refuse(c, HVD_EPROTO, "it spoke before registering");
        return;
    }
    if (f->type == HVD_RDV_BYE) {
        /* The rank waits for this close before it may register again, so
         * its next registration finds its slot free. */
        if (r->forming && c->gen == r->gen)
            r->joined--;
        close_conn(c);
    } else if (f->type == HVD_RDV_REPORT) {
        int32_t rank;
        char *msg;
        if (hvd_rdv_note_decode(f->payload, f->len, &rank, &msg) == 0) {
            broadcast_abort(r, c, rank, msg);
            free(msg);
        }
    }
}

/* A registered rank's connection ended (or broke the protocol). */
static void rank_lost(struct hr_rdv_conn *c)
{
    struct hr_rdv *r = c->srv;
    if (r->forming && c->gen == r->gen) {
        /* It left during start-up: its slot is free again. */
        r->joined--;
    } else if (plan_rank(r, c->rank) >= 0) {
        /* Not one horovodrun is stopping after a reset: its peers must
         * hear of it. */
        char msg[256];
        int rank = plan_rank(r, c->rank);
        snprintf(msg, sizeof(msg), "rank %d (host %s) disconnected", rank,
                 c->host);
        broadcast_abort(r, c, rank, msg);
    }
    close_conn(c);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char chunk[65536];
    struct hr_rdv_conn *c = h->data;
    (void)hint;
    /* One frame's worth at a time before registration, so that what an
     * unregistered peer makes us hold stays within a few KiB. */
    *buf = uv_buf_init(chunk, c->rank < 0 ? PENDING_FRAME_MAX + HVD_FRAME_HDR
                                          : sizeof(chunk));
}

/* The connection ended, or its bytes could not be held. */
static void conn_ended(struct hr_rdv_conn *c)
{
    /* An unregistered peer that hangs up has cost nothing. */
    if (c->rank >= 0)
        rank_lost(c);
    else
        close_conn(c);
}

static void conn_bytes(struct hr_rdv_conn *c, const void *p, size_t n)
{
    struct hvd_frame f;
    char why[120];
    int rc = 0;

    if (hvd_frame_reader_push(&c->reader, p, n) != 0) {
        conn_ended(c);
        return;
    }
    while (!c->closing && (rc = hvd_frame_reader_next(&c->reader, &f)) == 1)
        handle_frame(c, &f);
    if (rc >= 0 || c->closing)
        return;
    if (c->rank >= 0) {
        hvd_log_warn("rendezvous: rank %d (from %s) sent a malformed frame; "
                     "its connection is closed",
                     c->rank, c->from);
        rank_lost(c);
    } else if (rc == HVD_ETOOBIG) {
        snprintf(why, sizeof(why),
                 "it announced a frame over the %u-byte limit before "
                 "registering",
                 PENDING_FRAME_MAX);
        refuse(c, HVD_EPROTO, why);
    } else {
        refuse(c, HVD_EPROTO, "it does not speak the rendezvous protocol");
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct hr_rdv_conn *c = s->data;
    if (n < 0)
        conn_ended(c);
    else
        conn_bytes(c, buf->base, (size_t)n);
}

static void describe_peer(struct hr_rdv_conn *c)
{
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    char ip[64] = "";

    snprintf(c->from, sizeof(c->from), "an unknown address");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) != 0)
        return;
    uv_ip_name((struct sockaddr *)&ss, ip, sizeof(ip));
    /* sin_port and sin6_port sit at the same offset. */
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        snprintf(c->from, sizeof(c->from), "[%s]:%d", ip, port);
    else
        snprintf(c->from, sizeof(c->from), "%s:%d", ip, port);
}

static struct hr_rdv_conn *conn_new(struct hr_rdv *r)
{
    struct hr_rdv_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->srv = r;
    c->rank = -1;
    hvd_frame_reader_init(&c->reader, PENDING_FRAME_MAX);
    return c;
}

/* A new connection waits to register: it gets its challenge, and the
 * oldest waiting one goes if too many wait. 0, or -1 once it is closed. */
static int conn_admit(struct hr_rdv *r, struct hr_rdv_conn *c)
{
    char why[120];
    /* The oldest waiting connection has had the longest to register. */
    if (r->npending >= r->pending_max) {
        snprintf(why, sizeof(why),
                 "it was the oldest of %d connections waiting to register",
                 r->npending);
        refuse(r->pending, HVD_ETIMEDOUT, why);
    }
    pending_push(c);
    c->deadline = uv_now(r->loop) + REGISTER_TIMEOUT_MS;
    /* Without a fresh nonce a recorded REGISTER could be replayed. */
    if (hvd_secret_new(c->nonce) != 0) {
        hvd_log_error("rendezvous: no random bytes for the challenge to %s",
                      c->from);
        close_conn(c);
        return -1;
    }
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, HVD_RDV_VERSION);
    hvd_wbuf_raw(&w, c->nonce, HVD_NONCE_LEN);
    if (hvd_wbuf_finish(&w, HVD_RDV_CHALLENGE, &f, &len) == 0)
        send_frame(c, f, len);
    arm_pending_timer(r);
    return 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct hr_rdv *r = server->data;
    struct hr_rdv_conn *c = status < 0 ? NULL : conn_new(r);
    if (c == NULL)
        return;
    uv_tcp_init(r->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    describe_peer(c);
    if (conn_admit(r, c) == 0)
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

struct hr_rdv_conn *hr_rdv_carried_open(struct hr_rdv *r,
                                        const struct hr_rdv_carrier *carrier,
                                        void *arg, uint32_t id,
                                        const char *from)
{
    struct hr_rdv_conn *c = r->listening ? conn_new(r) : NULL;
    if (c == NULL)
        return NULL;
    c->carrier = carrier;
    c->carrier_arg = arg;
    c->carrier_id = id;
    snprintf(c->from, sizeof(c->from), "%s", from);
    /* Admitted, it is the carrier's until one side ends it. */
    c->busy = 1;
    int rc = conn_admit(r, c);
    c->busy = 0;
    if (rc == 0)
        return c;
    conn_free(c);
    return NULL;
}

void hr_rdv_carried_bytes(struct hr_rdv_conn *c, const void *p, size_t n)
{
    c->busy = 1;
    conn_bytes(c, p, n);
    c->busy = 0;
    if (c->closing)
        conn_free(c);
}

void hr_rdv_carried_end(struct hr_rdv_conn *c)
{
    c->carrier_gone = 1;
    c->busy = 1;
    conn_ended(c);
    c->busy = 0;
    conn_free(c);
}

/* One waiting connection per rank, plus room for strangers: 512, or a
 * quarter of the descriptors horovodrun may open if that is less. */
static int pending_limit(int size)
{
    struct rlimit rl;
    long extra = PENDING_EXTRA_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (long)(rl.rlim_cur / 4) < extra)
        extra = (long)(rl.rlim_cur / 4);
    return size + (int)(extra > 16 ? extra : 16);
}

int hr_rdv_start(struct hr_rdv *r, uv_loop_t *loop, int bind_any,
                 const char *addr, const uint8_t secret[HVD_SECRET_LEN],
                 int size, double start_timeout)
{
    struct sockaddr_storage ss;
    int namelen = sizeof(ss);
    int err;

    memset(r, 0, sizeof(*r));
    r->loop = loop;
    memcpy(r->secret, secret, HVD_SECRET_LEN);
    r->size = size;
    r->start_timeout = start_timeout;
    r->forming = 1;
    r->pending_max = pending_limit(size);
    if (size > 0) {
        r->cap = r->plan_n = size;
        r->plan_ready = 1;
        r->ranks = calloc((size_t)size, sizeof(*r->ranks));
        r->plan_ids = calloc((size_t)size, sizeof(*r->plan_ids));
        if (r->ranks == NULL || r->plan_ids == NULL)
            return UV_ENOMEM;
        for (int i = 0; i < size; i++)
            r->plan_ids[i] = i;
    }
    int v6 = strchr(addr, ':') != NULL;
    const char *bind_to = bind_any ? (v6 ? "::" : "0.0.0.0") : addr;
    if (v6)
        err = uv_ip6_addr(bind_to, 0, (struct sockaddr_in6 *)&ss);
    else
        err = uv_ip4_addr(bind_to, 0, (struct sockaddr_in *)&ss);
    if (err)
        return err;
    if ((err = uv_tcp_init(loop, &r->tcp)))
        return err;
    uv_timer_init(loop, &r->timer);
    uv_timer_init(loop, &r->pending_timer);
    r->tcp.data = r->timer.data = r->pending_timer.data = r;
    r->open = r->listening = 1;
    if ((err = uv_tcp_bind(&r->tcp, (struct sockaddr *)&ss, 0)) ||
        (err = uv_listen((uv_stream_t *)&r->tcp, 512, on_connection)) ||
        (err = uv_tcp_getsockname(&r->tcp, (struct sockaddr *)&ss, &namelen)))
        return err;
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    r->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

void hr_rdv_set_cb(struct hr_rdv *r, const struct hr_rdv_cb *cb, void *arg)
{
    r->cb = cb;
    r->cb_arg = arg;
}

int hr_rdv_form(struct hr_rdv *r, const int *ids,
                const struct hvd_rdv_assign *assign, int n)
{
    int cap = r->cap;
    for (int i = 0; i < n; i++)
        if (ids[i] >= cap)
            cap = ids[i] + 1;
    if (cap > r->cap) {
        struct hr_rdv_conn **g = realloc(r->ranks, (size_t)cap * sizeof(*g));
        if (g == NULL)
            return HVD_ENOMEM;
        memset(g + r->cap, 0, (size_t)(cap - r->cap) * sizeof(*g));
        r->ranks = g;
        r->cap = cap;
    }
    int *pi = malloc((size_t)n * sizeof(*pi));
    struct hvd_rdv_assign *pa = malloc((size_t)n * sizeof(*pa));
    if (pi == NULL || pa == NULL) {
        free(pi);
        free(pa);
        return HVD_ENOMEM;
    }
    memcpy(pi, ids, (size_t)n * sizeof(*pi));
    memcpy(pa, assign, (size_t)n * sizeof(*pa));
    free(r->plan_ids);
    free(r->plan_assign);
    r->plan_ids = pi;
    r->plan_assign = pa;
    r->plan_n = n;
    r->plan_ready = 1;
    next_gen(r);
    uv_timer_start(&r->timer, on_start_timeout,
                   (uint64_t)(r->start_timeout * 1000), 0);
    maybe_form(r);
    return 0;
}

void hr_rdv_notify_hosts(struct hr_rdv *r, uint64_t timestamp, uint8_t changes)
{
    for (int i = 0; i < r->cap; i++) {
        uint8_t *f;
        size_t len;
        if (r->ranks[i] &&
            hvd_rdv_hosts_encode(timestamp, changes, &f, &len) == 0)
            send_frame(r->ranks[i], f, len);
    }
}

void hr_rdv_close(struct hr_rdv *r)
{
    if (r == NULL)
        return;
    while (r->pending)
        close_conn(r->pending);
    for (int i = 0; r->ranks && i < r->cap; i++)
        if (r->ranks[i])
            close_conn(r->ranks[i]);
    tell_refusals(r);
    if (r->listening) {
        uv_close((uv_handle_t *)&r->tcp, NULL);
        r->listening = 0;
    }
    if (r->open) {
        uv_close((uv_handle_t *)&r->timer, NULL);
        uv_close((uv_handle_t *)&r->pending_timer, NULL);
        r->open = 0;
    }
    free(r->ranks);
    r->ranks = NULL;
    free(r->plan_ids);
    free(r->plan_assign);
    r->plan_ids = NULL;
    r->plan_assign = NULL;
    explicit_bzero(r->secret, sizeof(r->secret));
}
