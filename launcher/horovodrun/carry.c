/* horovodrun's side of the carried rendezvous: an agent's streams, each
 * a connection of the rendezvous server. */
#include "launcher/horovodrun/carry.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/hvd_err.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"

struct carry_entry {
    uint32_t id;
    struct hr_rdv_conn *conn;
};

struct hr_carry {
    struct hr_rdv *rdv;
    uint32_t next_id; /* the agent opens ids in order, never twice */
    struct carry_entry *v;
    size_t n, cap;
};

static struct carry_entry *find(struct hr_carry *c, uint32_t id)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id)
            return &c->v[i];
    return NULL;
}

static void forget(struct hr_carry *c, struct carry_entry *e)
{
    *e = c->v[--c->n];
}

/* What the server says on stream id goes down the agent's channel. */
static void tell(struct hr_agent *a, uint8_t type, uint32_t id,
                 const uint8_t *p, size_t n)
{
    uint8_t *f;
    size_t len;
    if (a->running && !a->ended &&
        hvd_relay_wrap(type, id, p, n, &f, &len) == 0)
        a->link->send(a, f, len);
}

static void carrier_send(void *arg, uint32_t id, uint8_t *frame, size_t len)
{
    tell(arg, HVD_MSG_RDV_DATA, id, frame, len);
    free(frame);
}

static void carrier_close(void *arg, uint32_t id)
{
    struct hr_agent *a = arg;
    struct carry_entry *e = find(a->carry, id);
    if (e)
        forget(a->carry, e);
    tell(a, HVD_MSG_RDV_CLOSE, id, NULL, 0);
}

static const struct hr_rdv_carrier carrier = {
    .send = carrier_send,
    .close = carrier_close,
};

int hr_carry_new(struct hr_agent *a, struct hr_rdv *r)
{
    if (a->carry == NULL && (a->carry = calloc(1, sizeof(*a->carry))) == NULL)
        return HVD_ENOMEM;
    a->carry->rdv = r;
    return 0;
}

static int open_stream(struct hr_agent *a, uint32_t id)
{
    struct hr_carry *c = a->carry;
    char from[80];
    if (id < c->next_id || c->n >= a->nranks + HVD_CARRY_EXTRA)
        return HVD_EPROTO;
    c->next_id = id + 1;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct carry_entry *v = realloc(c->v, cap * sizeof(*v));
        if (v == NULL) {
            tell(a, HVD_MSG_RDV_CLOSE, id, NULL, 0);
            return 0;
        }
        c->v = v;
        c->cap = cap;
    }
    snprintf(from, sizeof(from), "host %s, through its agent", a->name);
    struct hr_rdv_conn *conn =
        hr_rdv_carried_open(c->rdv, &carrier, a, id, from);
    if (conn)
        c->v[c->n++] = (struct carry_entry){id, conn};
    else
        tell(a, HVD_MSG_RDV_CLOSE, id, NULL, 0);
    return 0;
}

int hr_carry_frame(struct hr_agent *a, const struct hvd_frame *f)
{
    const uint8_t *p;
    size_t n;
    uint32_t id;
    if (a->carry == NULL || hvd_relay_unwrap(f->payload, f->len, &id, &p, &n))
        return HVD_EPROTO;
    if (f->type == HVD_MSG_RDV_OPEN)
        return n == 0 ? open_stream(a, id) : HVD_EPROTO;
    struct carry_entry *e = find(a->carry, id);
    /* The server may have closed it while the agent wrote. */
    if (e == NULL)
        return id < a->carry->next_id ? 0 : HVD_EPROTO;
    if (f->type == HVD_MSG_RDV_DATA) {
        hr_rdv_carried_bytes(e->conn, p, n);
        return 0;
    }
    if (n > 0)
        return HVD_EPROTO;
    struct hr_rdv_conn *conn = e->conn;
    forget(a->carry, e);
    hr_rdv_carried_end(conn);
    return 0;
}

void hr_carry_end(struct hr_agent *a)
{
    struct hr_carry *c = a->carry;
    while (c && c->n > 0) {
        struct hr_rdv_conn *conn = c->v[c->n - 1].conn;
        c->n--;
        hr_rdv_carried_end(conn);
    }
}

void hr_carry_free(struct hr_carry *c)
{
    if (c == NULL)
        return;
    free(c->v);
    free(c);
}
