/* Rendezvous server: authenticates ranks, hands out the peer table, and
 * relays failures so that every rank learns which peer died. */
#include "rdv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "common/log.h"
#include "common/wire.h"

struct hr_rdv_conn {
    uv_tcp_t tcp;
    struct hr_rdv *srv;
    struct hvd_frame_reader reader;
    uint8_t nonce[HVD_NONCE_LEN];      /* our challenge */
    uint8_t rank_nonce[HVD_NONCE_LEN]; /* the rank's challenge to us */
    int rank;                          /* -1 until registered */
    int bye;
    int closing;
    char from[80]; /* peer address for messages */
    struct hr_rdv_conn *next;
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

static void conn_closed(uv_handle_t *h)
{
    struct hr_rdv_conn *c = h->data;
    hvd_frame_reader_close(&c->reader);
    free(c);
}

static void close_conn(struct hr_rdv_conn *c)
{
    struct hr_rdv *r = c->srv;
    if (c->closing)
        return;
    c->closing = 1;
    for (struct hr_rdv_conn **p = &r->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->rank >= 0 && r->ranks[c->rank] == c)
        r->ranks[c->rank] = NULL;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* Tells every other registered rank that rank failed (first report wins:
 * later ones are consequences). */
static void broadcast_abort(struct hr_rdv *r, int rank, const char *msg)
{
    if (r->aborted)
        return;
    r->aborted = 1;
    for (int i = 0; i < r->size; i++)
        if (r->ranks[i] && i != rank)
            send_note(r->ranks[i], HVD_RDV_ABORT, rank, msg);
}

static void send_peers(struct hr_rdv *r)
{
    r->peers_sent = 1;
    uv_timer_stop(&r->timer);
    for (int i = 0; i < r->size; i++) {
        uint8_t *f;
        size_t len;
        struct hr_rdv_conn *c = r->ranks[i];
        if (hvd_rdv_peers_encode(&r->table, r->secret, sizeof(r->secret),
                                 c->rank_nonce, &f, &len) == 0)
            send_frame(c, f, len);
    }
    hvd_log_info("rendezvous: all %d ranks registered", r->size);
}

static void on_start_timeout(uv_timer_t *t)
{
    struct hr_rdv *r = t->data;
    char list[400] = "", msg[512];
    int n = 0, missing = 0;

    for (int i = 0; i < r->size; i++) {
        if (r->ranks[i])
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
        if (r->ranks[i])
            send_note(r->ranks[i], HVD_RDV_FAIL, HVD_ETIMEDOUT, msg);
}

/* The FAIL note carries the error code the rank's hvd_init returns. */
static void refuse(struct hr_rdv_conn *c, int code, const char *why)
{
    hvd_log_warn("rendezvous: refused a connection from %s: %s", c->from, why);
    send_note(c, HVD_RDV_FAIL, code, why);
    close_conn(c);
}

static void handle_register(struct hr_rdv_conn *c, const struct hvd_frame *f)
{
    struct hr_rdv *r = c->srv;
    struct hvd_rdv_register m = {0};
    char why[160];
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
    if (m.size != (uint32_t)r->size || m.rank >= m.size) {
        snprintf(why, sizeof(why), "rank %u of %u does not fit this job of %d",
                 m.rank, m.size, r->size);
        refuse(c, HVD_EPROTO, why);
        goto out;
    }
    if (r->ranks[m.rank] || r->peers_sent || r->failed) {
        snprintf(why, sizeof(why), "rank %u registered again", m.rank);
        refuse(c, r->failed ? HVD_ETIMEDOUT : HVD_EPROTO,
               r->failed ? "the start timeout passed" : why);
        goto out;
    }
    c->rank = (int)m.rank;
    memcpy(c->rank_nonce, m.nonce, HVD_NONCE_LEN);
    r->ranks[m.rank] = c;
    struct hvd_rdv_peer *p = &r->table.peers[m.rank];
    free(p->host);
    free(p->addr);
    p->host = m.host;
    p->addr = m.addr;
    p->port = m.port;
    m.host = m.addr = NULL;
    if (r->registered++ == 0)
        uv_timer_start(&r->timer, on_start_timeout,
                       (uint64_t)(r->start_timeout * 1000), 0);
    hvd_log_info("rendezvous: rank %d registered from %s", c->rank, c->from);
    if (r->registered == r->size)
        send_peers(r);
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
        c->bye = 1;
    } else if (f->type == HVD_RDV_REPORT) {
        int32_t rank;
        char *msg;
        if (hvd_rdv_note_decode(f->payload, f->len, &rank, &msg) == 0) {
            broadcast_abort(r, rank, msg);
            free(msg);
        }
    }
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char chunk[65536];
    (void)h, (void)hint;
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct hr_rdv_conn *c = s->data;
    struct hr_rdv *r = c->srv;
    struct hvd_frame f;
    int rc = 0;

    if (n < 0) {
        if (c->rank >= 0 && r->peers_sent && !c->bye) {
            char msg[256];
            snprintf(msg, sizeof(msg), "rank %d (host %s) disconnected",
                     c->rank, r->table.peers[c->rank].host);
            broadcast_abort(r, c->rank, msg);
        } else if (c->rank >= 0 && !r->peers_sent) {
            /* It left during start-up: its slot is free again. */
            r->registered--;
        }
        close_conn(c);
        return;
    }
    if (hvd_frame_reader_push(&c->reader, buf->base, (size_t)n) != 0) {
        close_conn(c);
        return;
    }
    while (!c->closing && (rc = hvd_frame_reader_next(&c->reader, &f)) == 1)
        handle_frame(c, &f);
    if (rc < 0 && !c->closing)
        refuse(c, HVD_EPROTO, "it sent a malformed frame");
}

static void on_connection(uv_stream_t *server, int status)
{
    struct hr_rdv *r = server->data;
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);

    if (status < 0)
        return;
    struct hr_rdv_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->srv = r;
    c->rank = -1;
    hvd_frame_reader_init(&c->reader, HVD_RDV_FRAME_MAX);
    uv_tcp_init(r->loop, &c->tcp);
    c->tcp.data = c;
    c->next = r->conns;
    r->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        close_conn(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    snprintf(c->from, sizeof(c->from), "an unknown address");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0) {
        char ip[64] = "";
        uv_ip_name((struct sockaddr *)&ss, ip, sizeof(ip));
        snprintf(c->from, sizeof(c->from), "%s:%d", ip,
                 ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_secret_new(c->nonce);
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, HVD_RDV_VERSION);
    hvd_wbuf_raw(&w, c->nonce, HVD_NONCE_LEN);
    if (hvd_wbuf_finish(&w, HVD_RDV_CHALLENGE, &f, &len) == 0)
        send_frame(c, f, len);
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
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
    r->ranks = calloc((size_t)size, sizeof(*r->ranks));
    r->table.peers = calloc((size_t)size, sizeof(*r->table.peers));
    r->table.n = (uint32_t)size;
    if (r->ranks == NULL || r->table.peers == NULL)
        return UV_ENOMEM;
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
    r->tcp.data = r->timer.data = r;
    r->open = 1;
    if ((err = uv_tcp_bind(&r->tcp, (struct sockaddr *)&ss, 0)) ||
        (err = uv_listen((uv_stream_t *)&r->tcp, 512, on_connection)) ||
        (err = uv_tcp_getsockname(&r->tcp, (struct sockaddr *)&ss, &namelen)))
        return err;
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    r->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

void hr_rdv_close(struct hr_rdv *r)
{
    if (r == NULL)
        return;
    while (r->conns)
        close_conn(r->conns);
    if (r->open) {
        uv_close((uv_handle_t *)&r->tcp, NULL);
        uv_close((uv_handle_t *)&r->timer, NULL);
        r->open = 0;
    }
    free(r->ranks);
    r->ranks = NULL;
    hvd_rdv_peers_close(&r->table);
}
