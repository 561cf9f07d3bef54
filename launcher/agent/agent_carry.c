/* The carried rendezvous (JOB's carry_rdv): the agent listens on loopback,
 * its ranks register there, and each connection travels to horovodrun's
 * rendezvous server as a stream of RDV frames on the agent's channel. So
 * horovodrun holds one channel per agent it started, not one connection
 * per rank. The agent reads nothing in those bytes: the ranks prove the
 * job secret to the server end to end, as they would directly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "launcher/agent/agent.h"
#include "launcher/lib/net.h"
#include "launcher/lib/relayproto.h"

struct carry_stream {
    uv_tcp_t tcp;
    struct agent *ag;
    uint32_t id;
    struct carry_stream *prev, *next;
};

struct agent_carry {
    uv_tcp_t listener;
    char rdv_addr[64];  /* where the ranks register: loopback */
    char rdv_port[8];   /* the listener's port */
    char data_addr[64]; /* where their peers reach them */
    uint32_t next_id;   /* ids are never reused */
    uint32_t live;
    struct carry_stream *streams;
    char buf[16384];
};

struct carry_write {
    uv_write_t req;
    char *bytes;
};

static void stream_closed(uv_handle_t *h)
{
    struct carry_stream *s = h->data;
    struct agent_carry *c = s->ag->carry;
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    c->live--;
    free(s);
}

/* Closes stream s; tell says horovodrun has not closed it already. */
static void stream_close(struct carry_stream *s, int tell)
{
    uint8_t *f;
    size_t len;
    if (uv_is_closing((uv_handle_t *)&s->tcp))
        return;
    if (tell &&
        hvd_relay_wrap(HVD_MSG_RDV_CLOSE, s->id, NULL, 0, &f, &len) == 0)
        agent_send(s->ag, f, len);
    uv_close((uv_handle_t *)&s->tcp, stream_closed);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct carry_stream *s = h->data;
    (void)hint;
    *buf = uv_buf_init(s->ag->carry->buf, sizeof(s->ag->carry->buf));
}

static void on_read(uv_stream_t *t, ssize_t n, const uv_buf_t *buf)
{
    struct carry_stream *s = t->data;
    uint8_t *f;
    size_t len;
    if (n < 0) {
        stream_close(s, 1);
        return;
    }
    if (n > 0 && hvd_relay_wrap(HVD_MSG_RDV_DATA, s->id, buf->base, (size_t)n,
                                &f, &len) == 0)
        agent_send(s->ag, f, len);
}

static void on_connection(uv_stream_t *l, int status)
{
    struct agent *ag = l->data;
    struct agent_carry *c = ag->carry;
    struct carry_stream *s = status == 0 ? calloc(1, sizeof(*s)) : NULL;
    uint8_t *f;
    size_t len;
    if (s == NULL)
        return;
    s->ag = ag;
    s->id = c->next_id++;
    uv_tcp_init(ag->loop, &s->tcp);
    s->tcp.data = s;
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    c->live++;
    /* One a rank, of every JOB and RANKS, and a few more. */
    if (uv_accept(l, (uv_stream_t *)&s->tcp) != 0 ||
        c->live > ag->job.nranks + HVD_CARRY_EXTRA) {
        stream_close(s, 0);
        return;
    }
    uv_tcp_nodelay(&s->tcp, 1);
    if (hvd_relay_wrap(HVD_MSG_RDV_OPEN, s->id, NULL, 0, &f, &len) != 0) {
        stream_close(s, 0);
        return;
    }
    agent_send(ag, f, len);
    if (!ag->paused)
        uv_read_start((uv_stream_t *)&s->tcp, alloc_cb, on_read);
}

/* Listens on the loopback address of the server's family. 0 or a libuv
 * error. */
static int carry_listen(struct agent *ag, struct agent_carry *c, int v6)
{
    struct sockaddr_storage ss;
    int namelen = sizeof(ss), err;
    snprintf(c->rdv_addr, sizeof(c->rdv_addr), "%s", v6 ? "::1" : "127.0.0.1");
    err = v6 ? uv_ip6_addr(c->rdv_addr, 0, (struct sockaddr_in6 *)&ss)
             : uv_ip4_addr(c->rdv_addr, 0, (struct sockaddr_in *)&ss);
    if (err || (err = uv_tcp_init(ag->loop, &c->listener)))
        return err;
    c->listener.data = ag;
    ag->carry = c;
    if ((err = uv_tcp_bind(&c->listener, (struct sockaddr *)&ss, 0)) ||
        (err = uv_listen((uv_stream_t *)&c->listener, 128, on_connection)) ||
        (err = uv_tcp_getsockname(&c->listener, (struct sockaddr *)&ss,
                                  &namelen)))
        return err;
    snprintf(c->rdv_port, sizeof(c->rdv_port), "%d",
             ntohs(((struct sockaddr_in *)&ss)->sin_port));
    return 0;
}

static void listener_closed(uv_handle_t *h)
{
    free((struct agent_carry *)h); /* its first member */
}

void agent_carry_start(struct agent *ag)
{
    const struct hvd_jobspec *js = &ag->job;
    const char *server = NULL;
    char why[128] = "out of memory";
    if (!js->carry_rdv || ag->carry || js->nranks == 0)
        return;
    for (size_t i = 0; i < js->ranks[0].env.n && server == NULL; i++)
        if (strncmp(js->ranks[0].env.v[i], HVD_ENV_RDV_ADDR "=",
                    sizeof(HVD_ENV_RDV_ADDR)) == 0)
            server = js->ranks[0].env.v[i] + sizeof(HVD_ENV_RDV_ADDR);
    struct agent_carry *c = calloc(1, sizeof(*c));
    int err = c == NULL || server == NULL;
    if (c && server == NULL)
        snprintf(why, sizeof(why), "the job names no %s", HVD_ENV_RDV_ADDR);
    /* The ranks' peers reach them where they would have reached the
     * server from. */
    if (!err &&
        (err = hr_net_route_addr(server, c->data_addr, sizeof(c->data_addr))))
        snprintf(why, sizeof(why), "no %s", c->data_addr);
    if (!err && (err = carry_listen(ag, c, strchr(server, ':') != NULL)))
        snprintf(why, sizeof(why), "cannot listen on %s: %s", c->rdv_addr,
                 uv_strerror(err));
    if (!err)
        return;
    /* Not carried: the ranks register with horovodrun themselves. */
    agent_note(ag, HVD_NOTE_WARN,
               "cannot carry the rendezvous (%s); the ranks reach horovodrun "
               "directly",
               why);
    if (ag->carry) {
        ag->carry = NULL;
        uv_close((uv_handle_t *)&c->listener, listener_closed);
    } else {
        free(c);
    }
}

int agent_carry_env(struct agent *ag, struct hvd_strvec *env)
{
    const struct agent_carry *c = ag->carry;
    char e[128];
    int err = 0;
    if (c == NULL)
        return 0;
    snprintf(e, sizeof(e), "%s=%s", HVD_ENV_RDV_ADDR, c->rdv_addr);
    err = hvd_strvec_setenv(env, e);
    snprintf(e, sizeof(e), "%s=%s", HVD_ENV_RDV_PORT, c->rdv_port);
    if (!err)
        err = hvd_strvec_setenv(env, e);
    snprintf(e, sizeof(e), "%s=%s", HVD_ENV_DATA_ADDR, c->data_addr);
    if (!err)
        err = hvd_strvec_setenv(env, e);
    return err;
}

static void on_written(uv_write_t *req, int status)
{
    struct carry_write *w = (struct carry_write *)req;
    (void)status; /* a rank that went away is noticed on its read side */
    free(w->bytes);
    free(w);
}

int agent_carry_frame(struct agent *ag, const struct hvd_frame *f)
{
    const uint8_t *p;
    size_t n;
    uint32_t id;
    int err = hvd_relay_unwrap(f->payload, f->len, &id, &p, &n);
    if (err)
        return err;
    if (ag->carry == NULL || (f->type == HVD_MSG_RDV_CLOSE && n > 0))
        return HVD_EPROTO;
    struct carry_stream *s = ag->carry->streams;
    while (s && s->id != id)
        s = s->next;
    /* A stream that closed here while horovodrun wrote to it. */
    if (s == NULL || uv_is_closing((uv_handle_t *)&s->tcp))
        return id < ag->carry->next_id ? 0 : HVD_EPROTO;
    if (f->type == HVD_MSG_RDV_CLOSE)
        stream_close(s, 0);
    if (f->type == HVD_MSG_RDV_CLOSE || n == 0)
        return 0;
    struct carry_write *w = malloc(sizeof(*w));
    char *bytes = n > 0 ? malloc(n) : NULL;
    if (w == NULL || bytes == NULL) {
        free(w);
        free(bytes);
        stream_close(s, 1);
        return 0;
    }
    memcpy(bytes, p, n);
    w->bytes = bytes;
    uv_buf_t b = uv_buf_init(bytes, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&s->tcp, &b, 1, on_written) != 0) {
        on_written(&w->req, 0);
        stream_close(s, 1);
    }
    return 0;
}

void agent_carry_pause(struct agent *ag, int pause)
{
    for (struct carry_stream *s = ag->carry ? ag->carry->streams : NULL; s;
         s = s->next) {
        if (uv_is_closing((uv_handle_t *)&s->tcp))
            continue;
        if (pause)
            uv_read_stop((uv_stream_t *)&s->tcp);
        else
            uv_read_start((uv_stream_t *)&s->tcp, alloc_cb, on_read);
    }
}

void agent_carry_free(struct agent *ag)
{
    struct agent_carry *c = ag->carry;
    if (c == NULL)
        return;
    while (c->streams) {
        struct carry_stream *s = c->streams;
        c->streams = s->next;
        free(s);
    }
    free(c);
    ag->carry = NULL;
}
