/* Remote-exec agents: the connection an agent makes back to horovodrun,
 * and the challenge that binds it to the agent's host (see rsh.h). */
#include "launcher/link/rsh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secret.h"
#include "launcher/lib/errmsg.h"
#include "launcher/lib/log.h"
#include "launcher/lib/net.h"
#include "launcher/lib/proto.h"
#include "launcher/link/link.h"

/* Connections waiting for their challenge to come back; more close the
 * oldest (nobody but a stranger opens them without a host to bind). */
#define PENDING_MAX 256
/* Output before the greeting that we wait through (shell banners). */
#define PREAMBLE_MAX 4096
/* Addresses handed to an agent to try. */
#define ADDRS_MAX 8
#define CHALLENGE_HEX HVD_CONNECT_CHALLENGE_HEX
_Static_assert(CHALLENGE_HEX == 2 * HVD_SECRET_LEN, "challenge size");

struct conn {
    uv_tcp_t tcp;
    struct hr_rsh_server *srv;         /* NULL once bound to a host */
    char challenge[CHALLENGE_HEX + 2]; /* hex and '\n', as sent */
};

struct hr_rsh_server {
    uv_tcp_t listener;
    int port;
    struct conn *pending[PENDING_MAX];
    int npending;
};

struct queued {
    struct queued *next;
    uint8_t *frame;
    size_t len;
    int notify;
};

struct hr_rsh {
    struct hr_rsh_server *srv;
    struct conn *conn; /* bound, until the hang-up */
    int hung_up;
    struct queued *head, **tail; /* frames before the bind */
    char line[PREAMBLE_MAX];
    size_t nline, seen;
};

static void conn_closed(uv_handle_t *h)
{
    free(h->data);
}

static void conn_close(struct conn *c)
{
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void drop_pending(struct hr_rsh_server *s, int i)
{
    s->pending[i] = s->pending[--s->npending];
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char sink[512];
    (void)h, (void)hint;
    *buf = uv_buf_init(sink, sizeof(sink));
}

/* Agents send nothing on the connection: bytes are dropped; its end, for
 * one still waiting for its challenge to come back, closes it. */
static void on_conn_data(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = st->data;
    (void)buf;
    if (n >= 0)
        return;
    uv_read_stop(st);
    if (c->srv == NULL)
        return; /* bound: the agent's end is the link's to notice */
    for (int i = 0; i < c->srv->npending; i++)
        if (c->srv->pending[i] == c) {
            drop_pending(c->srv, i);
            conn_close(c);
            return;
        }
}

static void challenge_sent(uv_write_t *req, int status)
{
    (void)status; /* a failed one never comes back */
    free(req);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct hr_rsh_server *s = server->data;
    uint8_t raw[HVD_SECRET_LEN];
    struct conn *c;
    uv_write_t *w;

    if (status != 0 || (c = calloc(1, sizeof(*c))) == NULL)
        return;
    uv_tcp_init(server->loop, &c->tcp);
    c->tcp.data = c;
    c->srv = s;
    w = malloc(sizeof(*w));
    if (w == NULL || uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        hvd_secret_new(raw) != 0) {
        free(w);
        conn_close(c);
        return;
    }
    hvd_hex_encode(raw, sizeof(raw), c->challenge);
    c->challenge[CHALLENGE_HEX] = '\n';
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->npending == PENDING_MAX) {
        conn_close(s->pending[0]);
        drop_pending(s, 0);
    }
    s->pending[s->npending++] = c;
    uv_buf_t b = uv_buf_init(c->challenge, CHALLENGE_HEX + 1);
    if (uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, challenge_sent) != 0)
        free(w);
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_conn_data);
}

struct hr_rsh_server *hr_rsh_server_new(uv_loop_t *loop, char *err,
                                        size_t errlen)
{
    struct hr_rsh_server *s = calloc(1, sizeof(*s));
    struct sockaddr_storage any;
    int len = sizeof(any), rc;

    if (s == NULL) {
        hvd_seterr(err, errlen, "out of memory");
        return NULL;
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    /* Every address: agents try this host's addresses in turn. */
    rc = uv_ip6_addr("::", 0, (struct sockaddr_in6 *)&any);
    if (rc == 0)
        rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&any, 0);
    if (rc != 0) {
        rc = uv_ip4_addr("0.0.0.0", 0, (struct sockaddr_in *)&any);
        if (rc == 0)
            rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&any, 0);
    }
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
    if (rc == 0)
        rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&any, &len);
    if (rc != 0) {
        hvd_seterr(err, errlen, "cannot listen for the agents' connections: %s",
                   uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        s->port = -1; /* freed after the loop ran the close */
        return s;
    }
    s->port = ntohs(((struct sockaddr_in6 *)&any)->sin6_port);
    hvd_log_info("waiting for agents started by the rsh agent on port %d",
                 s->port);
    return s;
}

void hr_rsh_server_close(struct hr_rsh_server *s)
{
    if (s == NULL)
        return;
    if (s->port >= 0)
        uv_close((uv_handle_t *)&s->listener, NULL);
    s->port = -1;
    while (s->npending > 0)
        conn_close(s->pending[--s->npending]);
}

void hr_rsh_server_free(struct hr_rsh_server *s)
{
    free(s);
}

/* Characters that pass through a remote shell's word splitting (kubexec.sh
 * runs `sh -c "$*"`) unchanged. */
static int shell_safe(const char *s)
{
    return s[0] != '\0' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-+=./,:@%") == strlen(s);
}

/* Appends cmd's words to argv. */
static int push_words(struct hvd_strvec *argv, const char *cmd)
{
    const char *sep = " \t";
    for (const char *p = cmd + strspn(cmd, sep); *p; p += strspn(p, sep)) {
        size_t n = strcspn(p, sep);
        if (hvd_strvec_pushn(argv, p, n) != 0)
            return -1;
        p += n;
    }
    return 0;
}

struct hr_rsh *hr_rsh_new(struct hr_agent *a, struct hr_rsh_server *s,
                          const char *cmd, const char *agent)
{
    struct hr_rsh *r = calloc(1, sizeof(*r));
    struct hvd_strvec addrs;
    int rc = r == NULL ? -1 : 0;

    if (s->port < 0) {
        snprintf(a->failure, sizeof(a->failure),
                 "horovodrun cannot listen for its agents");
        free(r);
        return NULL;
    }
    if (!shell_safe(agent) || !shell_safe(a->name)) {
        snprintf(a->failure, sizeof(a->failure),
                 "the rsh agent's remote shell would split '%.200s' or "
                 "'%.100s'; use a path and a host name without spaces or "
                 "quotes (--agent-path)",
                 agent, a->name);
        free(r);
        return NULL;
    }
    hvd_strvec_init(&addrs);
    if (rc == 0)
        rc = push_words(&a->argv, cmd);
    if (rc == 0)
        rc = hr_net_addrs_toward(a->name, &addrs, ADDRS_MAX);
    if (rc == 0 && (hvd_strvec_push(&a->argv, a->name) != 0 ||
                    hvd_strvec_push(&a->argv, agent) != 0 ||
                    hvd_strvec_push(&a->argv, "--connect") != 0 ||
                    hvd_strvec_pushf(&a->argv, "%d", s->port) != 0))
        rc = -1;
    for (size_t i = 0; rc == 0 && i < addrs.n; i++)
        rc = hvd_strvec_push(&a->argv, addrs.v[i]);
    hvd_strvec_close(&addrs);
    if (rc != 0) {
        snprintf(a->failure, sizeof(a->failure), "out of memory");
        free(r);
        return NULL;
    }
    r->srv = s;
    r->tail = &r->head;
    return r;
}

static void drop_queue(struct hr_rsh *r)
{
    while (r->head) {
        struct queued *q = r->head;
        r->head = q->next;
        free(q->frame);
        free(q);
    }
    r->tail = &r->head;
}

void hr_rsh_hangup(struct hr_rsh *r)
{
    if (r == NULL || r->hung_up)
        return;
    r->hung_up = 1;
    drop_queue(r);
    if (r->conn)
        conn_close(r->conn);
    r->conn = NULL;
}

void hr_rsh_free(struct hr_rsh *r)
{
    if (r == NULL)
        return;
    hr_rsh_hangup(r);
    free(r);
}

int hr_rsh_bound(const struct hr_rsh *r)
{
    return r->conn != NULL;
}

int hr_rsh_addr(const struct hr_rsh *r, int local, char *out, size_t len)
{
    struct sockaddr_storage sa;
    int salen = sizeof(sa);
    if (r == NULL || r->conn == NULL ||
        (local
             ? uv_tcp_getsockname(&r->conn->tcp, (struct sockaddr *)&sa, &salen)
             : uv_tcp_getpeername(&r->conn->tcp, (struct sockaddr *)&sa,
                                  &salen)) != 0)
        return -1;
    if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&sa;
        /* An IPv4 agent on the dual-stack listener. */
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
            return uv_inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], out,
                                len) == 0
                       ? 0
                       : -1;
        return uv_ip6_name(s6, out, len) == 0 ? 0 : -1;
    }
    return uv_ip4_name((const struct sockaddr_in *)&sa, out, len) == 0 ? 0 : -1;
}

static void write_frame(struct hr_agent *a, uint8_t *frame, size_t len,
                        int notify)
{
    hr_link_write(a, (uv_stream_t *)&a->rsh->conn->tcp, frame, len, notify);
}

void hr_rsh_send(struct hr_agent *a, uint8_t *frame, size_t len, int notify)
{
    struct hr_rsh *r = a->rsh;
    struct queued *q;
    if (r->hung_up) {
        free(frame);
        return;
    }
    if (r->conn) {
        write_frame(a, frame, len, notify);
        return;
    }
    if ((q = malloc(sizeof(*q))) == NULL) {
        free(frame);
        return;
    }
    *q = (struct queued){.frame = frame, .len = len, .notify = notify};
    *r->tail = q;
    r->tail = &q->next;
}

/* The greeting's challenge names the connection to bind. */
static int bind_conn(struct hr_agent *a, const char *hex, size_t n)
{
    struct hr_rsh *r = a->rsh;
    struct hr_rsh_server *s = r->srv;
    for (int i = 0; i < s->npending; i++) {
        struct conn *c = s->pending[i];
        if (n != CHALLENGE_HEX || memcmp(c->challenge, hex, n) != 0)
            continue;
        drop_pending(s, i);
        c->srv = NULL;
        r->conn = c;
        a->stage = "waiting for hvd-agent's first message";
        while (r->head) {
            struct queued *q = r->head;
            r->head = q->next;
            write_frame(a, q->frame, q->len, q->notify);
            free(q);
        }
        r->tail = &r->head;
        return 0;
    }
    return -1;
}

ssize_t hr_rsh_preamble(struct hr_agent *a, const char *buf, size_t n)
{
    struct hr_rsh *r = a->rsh;
    const size_t glen = sizeof(HVD_CONNECT_GREETING) - 1;
    char quoted[HVD_QUOTE_MAX + 1];

    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (r->nline == sizeof(r->line))
                break;
            r->line[r->nline++] = buf[i];
            continue;
        }
        if (r->nline >= glen &&
            memcmp(r->line, HVD_CONNECT_GREETING, glen) == 0) {
            if (bind_conn(a, r->line + glen, r->nline - glen) != 0) {
                snprintf(a->failure, sizeof(a->failure),
                         "hvd-agent connected back, but not on a connection "
                         "that horovodrun can match to this host; check "
                         "that hvd-agent there is as new as horovodrun");
                return -1;
            }
            return (ssize_t)i + 1;
        }
        /* Anything the command printed first: a banner, an echo. */
        hvd_quote(quoted, r->line, r->nline);
        hvd_log_info("host %s: before hvd-agent: %s", a->name, quoted);
        r->seen += r->nline + 1;
        r->nline = 0;
    }
    if (r->nline == sizeof(r->line) || r->seen > PREAMBLE_MAX) {
        snprintf(a->failure, sizeof(a->failure),
                 "the rsh agent printed more than %d bytes without "
                 "hvd-agent's greeting; does the command run its arguments "
                 "on the host?",
                 PREAMBLE_MAX);
        return -1;
    }
    return (ssize_t)n;
}
