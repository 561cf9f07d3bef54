/* Remote-exec agents: the connection an agent makes back to horovodrun,
 * and the challenge that binds it to the agent's host (see rsh.h). */
#include "launcher/link/rsh.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
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

/* Longest proof line taken from a connection. */
#define PROOF_MAX 400

struct conn {
    uv_tcp_t tcp;
    struct hr_rsh_server *srv; /* NULL once bound to a host */
    struct hr_agent *agent;    /* bound both ways: its agent */
    int end_check; /* closing: the agent may have ended (from the loop) */
    char challenge[CHALLENGE_HEX + 2]; /* hex and '\n', as sent */
    char line[PROOF_MAX];              /* a proof line, as it arrives */
    size_t nline;
};

struct hr_rsh_server {
    uv_tcp_t listener;
    int port;
    struct conn *pending[PENDING_MAX];
    int npending;
    struct hr_rsh *all; /* every host's state, for proofs naming a host */
    /* The job's token, in a file of the working directory that agents on
     * a shared file system can read; "" when none could be written. */
    char token_path[PATH_MAX];
    uint8_t token[HVD_CONNECT_TOKEN_LEN];
};

struct queued {
    struct queued *next;
    uint8_t *frame;
    size_t len;
};

struct hr_rsh {
    struct hr_rsh_server *srv;
    struct hr_rsh *next; /* in srv->all */
    struct hr_agent *a;
    struct conn *conn; /* bound, until the hang-up */
    int duplex;        /* the agent's frames come on conn, not stdout */
    int conn_reading;  /* duplex: conn not at its end yet */
    int hung_up;
    struct queued *head, **tail; /* frames before the bind */
    char line[PREAMBLE_MAX];
    size_t nline, seen;
};

static void conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (c->end_check)
        hr_link_check_end(c->agent);
    free(c);
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
    static char chunk[65536];
    (void)h, (void)hint;
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static int bind_conn(struct hr_rsh *r, struct conn *c, int duplex);

/* A proof line from a connection: the host it names, if the MAC over the
 * challenge sent on this connection is right, takes it both ways. */
static int take_proof(struct conn *c)
{
    const size_t plen = sizeof(HVD_CONNECT_PROOF) - 1;
    uint8_t want[HVD_MAC_LEN], got[HVD_MAC_LEN];
    char *host, *mac;

    c->line[c->nline] = '\0';
    if (!c->srv->token_path[0] || strncmp(c->line, HVD_CONNECT_PROOF, plen))
        return -1;
    host = c->line + plen;
    if ((mac = strchr(host, ' ')) == NULL)
        return -1;
    *mac++ = '\0';
    if (hvd_hex_decode(mac, got, sizeof(got)) != 0 || strlen(mac) != 64 ||
        hvd_connect_proof(c->srv->token, c->challenge, host, want) != 0 ||
        !hvd_mac_equal(want, got))
        return -1;
    for (struct hr_rsh *r = c->srv->all; r; r = r->next)
        if (strcmp(r->a->name, host) == 0 && !r->conn && !r->hung_up)
            return bind_conn(r, c, 1);
    return -1;
}

static void close_pending(struct conn *c)
{
    for (int i = 0; i < c->srv->npending; i++)
        if (c->srv->pending[i] == c) {
            drop_pending(c->srv, i);
            conn_close(c);
            return;
        }
}

/* A pending connection may send a proof; a duplex one, the agent's
 * frames; others send nothing worth reading. */
static void on_conn_data(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = st->data;
    ssize_t i = 0;
    if (n < 0) {
        uv_read_stop(st);
        if (c->agent) {
            /* The agent is gone: its link ends once its command did. */
            struct hr_rsh *r = c->agent->rsh;
            r->conn_reading = 0;
            r->conn = NULL;
            c->end_check = 1;
            conn_close(c);
        } else if (c->srv) {
            close_pending(c);
        }
        return;
    }
    if (c->srv) {
        while (i < n && buf->base[i] != '\n' && c->nline < PROOF_MAX - 1)
            c->line[c->nline++] = buf->base[i++];
        if (i == n)
            return;
        if (buf->base[i] != '\n' || take_proof(c) != 0) {
            close_pending(c);
            return;
        }
        i++;
    }
    if (c->agent && n > i)
        c->agent->cb->bytes(c->agent, buf->base + i, (size_t)(n - i));
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

/*
 * Writes the job's token (hex) to a new file of the working directory,
 * readable by this user only, for agents whose command hands back no
 * output: on a shared file system they read it and prove it. Without a
 * writable directory there is none, and such agents cannot connect.
 */
static void write_token(struct hr_rsh_server *s)
{
    char cwd[PATH_MAX - 64], hex[2 * HVD_CONNECT_TOKEN_LEN + 2];
    uint8_t raw[HVD_SECRET_LEN];
    int fd = -1, n;

    _Static_assert(HVD_SECRET_LEN == HVD_CONNECT_TOKEN_LEN, "token size");
    if (getcwd(cwd, sizeof(cwd)) == NULL || hvd_secret_new(raw) != 0 ||
        hvd_secret_new(s->token) != 0)
        return;
    hvd_hex_encode(raw, 4, hex);
    snprintf(s->token_path, sizeof(s->token_path), "%s/.hvd-rsh-%d-%.8s", cwd,
             (int)getpid(), hex);
    hvd_hex_encode(s->token, sizeof(s->token), hex);
    n = (int)strlen(hex);
    hex[n++] = '\n';
    fd = open(s->token_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, hex, (size_t)n) != n) {
        hvd_log_info("no token file for agents without output (%s: %s)",
                     s->token_path, strerror(errno));
        if (fd >= 0)
            unlink(s->token_path);
        s->token_path[0] = '\0';
    }
    if (fd >= 0)
        close(fd);
    memset(hex, 0, sizeof(hex));
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
    write_token(s);
    return s;
}

void hr_rsh_server_close(struct hr_rsh_server *s)
{
    if (s == NULL)
        return;
    if (s->token_path[0])
        unlink(s->token_path);
    s->token_path[0] = '\0';
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
                    hvd_strvec_push(&a->argv, agent) != 0))
        rc = -1;
    /* The token's path (not the token) for a command that hands back no
     * output; a path a remote shell would split is left out. */
    if (rc == 0 && s->token_path[0] && shell_safe(s->token_path) &&
        (hvd_strvec_push(&a->argv, "--token-file") != 0 ||
         hvd_strvec_push(&a->argv, s->token_path) != 0 ||
         hvd_strvec_push(&a->argv, "--host") != 0 ||
         hvd_strvec_push(&a->argv, a->name) != 0))
        rc = -1;
    if (rc == 0 && (hvd_strvec_push(&a->argv, "--connect") != 0 ||
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
    r->a = a;
    r->tail = &r->head;
    r->next = s->all;
    s->all = r;
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
    r->conn_reading = 0;
    drop_queue(r);
    if (r->conn) {
        r->conn->end_check = r->duplex;
        conn_close(r->conn);
    }
    r->conn = NULL;
}

void hr_rsh_free(struct hr_rsh *r)
{
    if (r == NULL)
        return;
    hr_rsh_hangup(r);
    for (struct hr_rsh **p = &r->srv->all; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    free(r);
}

int hr_rsh_duplex(const struct hr_rsh *r)
{
    return r != NULL && r->duplex;
}

int hr_rsh_reading(const struct hr_rsh *r)
{
    return r != NULL && r->conn_reading;
}

void hr_rsh_pause(struct hr_rsh *r, int pause)
{
    if (r == NULL || !r->conn_reading)
        return;
    if (pause)
        uv_read_stop((uv_stream_t *)&r->conn->tcp);
    else
        uv_read_start((uv_stream_t *)&r->conn->tcp, alloc_cb, on_conn_data);
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

static void write_frame(struct hr_agent *a, uint8_t *frame, size_t len)
{
    hr_link_write((uv_stream_t *)&a->rsh->conn->tcp, frame, len);
}

void hr_rsh_send(struct hr_agent *a, uint8_t *frame, size_t len)
{
    struct hr_rsh *r = a->rsh;
    struct queued *q;
    if (r->hung_up) {
        free(frame);
        return;
    }
    if (r->conn) {
        write_frame(a, frame, len);
        return;
    }
    if ((q = malloc(sizeof(*q))) == NULL) {
        free(frame);
        return;
    }
    *q = (struct queued){.frame = frame, .len = len};
    *r->tail = q;
    r->tail = &q->next;
}

/* Binds c to r's host: the agent's frames go out on it, and with duplex
 * its own come in on it. */
static int bind_conn(struct hr_rsh *r, struct conn *c, int duplex)
{
    struct hr_rsh_server *s = r->srv;
    for (int i = 0; i < s->npending; i++)
        if (s->pending[i] == c)
            drop_pending(s, i);
    c->srv = NULL;
    r->conn = c;
    r->duplex = duplex;
    if (duplex) {
        c->agent = r->a;
        r->conn_reading = 1;
    }
    r->a->stage = "waiting for hvd-agent's first message";
    while (r->head) {
        struct queued *q = r->head;
        r->head = q->next;
        write_frame(r->a, q->frame, q->len);
        free(q);
    }
    r->tail = &r->head;
    return 0;
}

/* The greeting's challenge names the connection to bind. */
static int bind_greeting(struct hr_agent *a, const char *hex, size_t n)
{
    struct hr_rsh_server *s = a->rsh->srv;
    for (int i = 0; i < s->npending; i++)
        if (n == CHALLENGE_HEX && memcmp(s->pending[i]->challenge, hex, n) == 0)
            return bind_conn(a->rsh, s->pending[i], 0);
    return -1;
}

ssize_t hr_rsh_preamble(struct hr_agent *a, const char *buf, size_t n)
{
    struct hr_rsh *r = a->rsh;
    const size_t glen = sizeof(HVD_CONNECT_GREETING) - 1;
    char quoted[HVD_QUOTE_MAX + 1];

    /* Bound: after the greeting, frames; with a proof, only what the
     * command itself prints, which is not the agent's. */
    if (r->conn)
        return r->duplex ? (ssize_t)n : 0;

    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (r->nline == sizeof(r->line))
                break;
            r->line[r->nline++] = buf[i];
            continue;
        }
        if (r->nline >= glen &&
            memcmp(r->line, HVD_CONNECT_GREETING, glen) == 0) {
            if (bind_greeting(a, r->line + glen, r->nline - glen) != 0) {
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
