/* The connections a transport makes once the rendezvous has given every
 * rank's address: authenticated TCP rings, and the host's shared memory. */
#include "worker/transport/connect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "worker/ctx.h"
#include "worker/sock.h"
#include "worker/transport/ring.h"
#include "worker/transport/shm.h"

/* Hellos on the ring of all ranks and on the ring of host leaders. */
#define PEER_MAGIC 0x48564450u  /* "HVDP" */
#define CROSS_MAGIC 0x48564458u /* "HVDX" */

/* The hello a rank sends on its connection to the next rank. */
static int peer_hello(const struct hvd_ctx *c, uint32_t magic, uint32_t from,
                      uint32_t to, uint8_t out[8 + HVD_MAC_LEN])
{
    uint32_t words[3] = {htonl(magic), htonl(from), htonl(to)};
    struct hvd_mac_part parts[] = {{"hvd-peer", 8}, {words, sizeof(words)}};
    memcpy(out, words, 8);
    return hvd_hmac(c->secret, sizeof(c->secret), parts, 2, out + 8);
}

static void describe(char *out, size_t len, const struct hvd_rdv_peer *p,
                     int rank)
{
    snprintf(out, len, "rank %d (host %s)", rank, p->host);
}

/* The entry of a rank this one needs: the server sends every such one. */
static const struct hvd_rdv_peer *need(const struct hvd_rdv_peers *pt, int rank,
                                       char *err, size_t errlen)
{
    const struct hvd_rdv_peer *p = hvd_rdv_peers_find(pt, (uint32_t)rank);
    if (p == NULL)
        snprintf(err, errlen,
                 "the rendezvous server's peer table lacks rank %d: is "
                 "horovodrun of the same build as libhvd?",
                 rank);
    return p;
}

/* Member i of a ring, as a global rank. */
static int member(const int *global, int n, int i)
{
    i = (i % n + n) % n;
    return global ? global[i] : i;
}

/* Connecting first cannot deadlock: the kernel completes it from the
 * listen queue. Then the links from behind are taken in any order. */
int hvd__connect_ring(struct hvd_ctx *c, struct hvd_ring *r, int cross,
                      const int *global, const struct hvd_link *l, char *err,
                      size_t errlen)
{
    uint8_t hello[HVD_RING_LINKS][8 + HVD_MAC_LEN], got[8 + HVD_MAC_LEN];
    uint8_t ack = 'K';
    uint32_t magic = cross ? CROSS_MAGIC : PEER_MAGIC;
    const struct hvd_rdv_peers *pt = l->pt;
    int64_t deadline = l->deadline;
    int n = r->size, me = member(global, n, r->rank), rc, missing = 0;

    r->nlinks = hvd_rdv_ring_links(n);
    for (int k = 0; k < r->nlinks; k++) {
        struct hvd_chan *to = &r->to[k];
        int next = member(global, n, r->rank + (1 << k));
        int prev = member(global, n, r->rank - (1 << k));
        const struct hvd_rdv_peer *np = need(pt, next, err, errlen);
        const struct hvd_rdv_peer *pp = need(pt, prev, err, errlen);
        if (np == NULL || pp == NULL)
            return HVD_EPROTO;
        describe(to->desc, sizeof(to->desc), np, next);
        describe(r->from[k].desc, sizeof(r->from[k].desc), pp, prev);
        to->fd = hvd__sock_connect(np->addr, (int)np->port, deadline, 1);
        if (to->fd < 0) {
            snprintf(err, errlen, "cannot connect to %s at %s:%u: %s", to->desc,
                     np->addr, np->port, strerror(errno));
            return to->fd;
        }
        if ((rc = peer_hello(c, magic, (uint32_t)me, (uint32_t)next,
                             hello[k])) ||
            (rc = hvd__sock_send_all(to->fd, hello[k], sizeof(hello[k]),
                                     deadline))) {
            snprintf(err, errlen, "cannot greet %s", to->desc);
            return rc;
        }
        /* From now on hello[k] is the one expected from prev. */
        if ((rc = peer_hello(c, magic, (uint32_t)prev, (uint32_t)me, hello[k])))
            return rc;
        missing++;
    }
    while (missing > 0) {
        int fd = hvd__sock_accept(l->lfd, deadline), k = 0;
        if (fd < 0) {
            for (k = 0; r->from[k].fd >= 0; k++)
                ;
            snprintf(err, errlen, "%s did not connect", r->from[k].desc);
            return fd;
        }
        /* Anyone can knock; only a rank behind, proving the secret, gets
         * in. */
        if (hvd__sock_recv_all(fd, got, sizeof(got), deadline) == 0)
            while (k < r->nlinks && (r->from[k].fd >= 0 ||
                                     !hvd_mac_equal(got + 8, hello[k] + 8) ||
                                     memcmp(got, hello[k], 8) != 0))
                k++;
        else
            k = r->nlinks;
        if (k < r->nlinks && hvd__sock_send_all(fd, &ack, 1, deadline) == 0) {
            r->from[k].fd = fd;
            missing--;
        } else {
            close(fd);
        }
    }
    for (int k = 0; k < r->nlinks; k++) {
        rc = hvd__sock_recv_all(r->to[k].fd, &ack, 1, deadline);
        if (rc) {
            snprintf(err, errlen, "%s did not accept our connection",
                     r->to[k].desc);
            return rc;
        }
        hvd__sock_tune(r->to[k].fd, c->peer_timeout_s);
        hvd__sock_tune(r->from[k].fd, c->peer_timeout_s);
    }
    return 0;
}

int hvd__connect_shm(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                     size_t errlen)
{
    const struct hvd_topo *t = &c->topo;
    int first = t->first[t->host], n = t->count[t->host], rc;
    if (n < 2)
        return 0;
    const struct hvd_rdv_peer *me = need(l->pt, c->rank, err, errlen);
    if (me == NULL)
        return HVD_EPROTO;
    int *ranks = malloc((size_t)n * sizeof(*ranks));
    if (ranks == NULL)
        return HVD_ENOMEM;
    for (int i = 0; i < n; i++)
        ranks[i] = first + i;
    rc = hvd__shm_setup(&c->shm, c->secret, sizeof(c->secret), ranks, n,
                        c->rank - first, me->host, l->deadline, err, errlen);
    free(ranks);
    return rc;
}
