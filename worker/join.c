/* hvd_init's meeting: read the env contract, register with the
 * rendezvous server, and connect the ring of data sockets. */
#include "worker/join.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "common/secret.h"
#include "worker/ctx.h"
#include "hvd_build.h"
#include "worker/sock.h"
#include "worker/transport/transport.h"
#include "worker/wait.h"

/* Hellos on the ring of all ranks and on the ring of host leaders. */
#define PEER_MAGIC 0x48564450u  /* "HVDP" */
#define CROSS_MAGIC 0x48564458u /* "HVDX" */

/*
 * horovodrun's contract wins over mpirun's variables, which a rank may
 * inherit when horovodrun itself runs under mpirun; HOROVOD_CONTROLLER=mpi
 * wins over both (hvd__mpi_join checks that MPI then sees the job
 * horovodrun started, if any).
 */
int hvd__join_kind(char *err, size_t errlen)
{
    const char *ctl = getenv(HVD_ENV_CONTROLLER);
    const char *osize = getenv(HVD_ENV_OMPI_SIZE);
    int forced = ctl != NULL && strcmp(ctl, "mpi") == 0;
    int mpirun = osize != NULL && getenv(HVD_ENV_OMPI_RANK) != NULL;

    if (!forced && getenv(HVD_ENV_RANK) != NULL)
        return HVD_JOIN_HOROVODRUN;
    if (!forced && !mpirun)
        return HVD_JOIN_ALONE;
    if (HVD_HAVE_MPI)
        return HVD_JOIN_MPI;
    /* mpirun -np 1 needs nobody else; more would be jobs of one each. */
    if (!forced && atoi(osize) <= 1)
        return HVD_JOIN_ALONE;
    if (forced)
        snprintf(err, errlen,
                 "%s=mpi, but this libhvd was built without MPI "
                 "(horovodrun --check-build says what it has)",
                 HVD_ENV_CONTROLLER);
    else
        snprintf(err, errlen,
                 "started by mpirun (%s=%s), but this libhvd was built "
                 "without MPI: start the job with horovodrun, or rebuild "
                 "libhvd with -Dmpi=enabled",
                 HVD_ENV_OMPI_SIZE, osize);
    return HVD_ENOTSUP;
}

/* Reads an integer variable of the contract; HVD_EENV if absent or bad. */
static int env_int(const char *name, int lo, int hi, int *out, char *err,
                   size_t errlen)
{
    const char *v = getenv(name);
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v == NULL || v[0] == '\0' || *end != '\0' || n < lo || n > hi) {
        snprintf(err, errlen,
                 "%s is %s%s%s; is this process started by "
                 "horovodrun?",
                 name, v ? "'" : "not set", v ? v : "",
                 v ? "', not a valid value" : "");
        return HVD_EENV;
    }
    *out = (int)n;
    return 0;
}

static int read_env(struct hvd_ctx *c, char *err, size_t errlen)
{
    int rc;
    if ((rc = env_int(HVD_ENV_SIZE, 1, 1 << 24, &c->size, err, errlen)) ||
        (rc = env_int(HVD_ENV_RANK, 0, c->size - 1, &c->rank, err, errlen)) ||
        (rc = env_int(HVD_ENV_LOCAL_SIZE, 1, c->size, &c->local_size, err,
                      errlen)) ||
        (rc = env_int(HVD_ENV_LOCAL_RANK, 0, c->local_size - 1, &c->local_rank,
                      err, errlen)) ||
        (rc = env_int(HVD_ENV_CROSS_SIZE, 1, c->size, &c->cross_size, err,
                      errlen)) ||
        (rc = env_int(HVD_ENV_CROSS_RANK, 0, c->cross_size - 1, &c->cross_rank,
                      err, errlen)))
        return rc;
    if (hvd_hex_decode(getenv(HVD_ENV_SECRET), c->secret, sizeof(c->secret)) !=
        0) {
        snprintf(err, errlen,
                 "%s is missing or not 64 hex digits; is this "
                 "process started by horovodrun?",
                 HVD_ENV_SECRET);
        return HVD_EENV;
    }
    return 0;
}

/* Set once this process has reached the rendezvous server: the server
 * listens until the job ends, so a refusal after that means it has ended
 * and there is nothing to wait for. */
static atomic_int g_rdv_reached;

static double start_timeout(void)
{
    const char *v = getenv(HVD_ENV_START_TIMEOUT);
    double t = v ? atof(v) : 0;
    return t > 0 ? t : 30;
}

/* Registers and waits for the peer table (or the server's verdict). */
static int rendezvous(struct hvd_ctx *c, int data_port,
                      struct hvd_rdv_peers *peers, int64_t deadline, char *err,
                      size_t errlen)
{
    const char *addr = getenv(HVD_ENV_RDV_ADDR);
    int port = 0, rc;
    struct hvd_frame f;
    uint8_t *out = NULL;
    size_t outlen;
    char ip[64];

    if (addr == NULL || addr[0] == '\0') {
        snprintf(err, errlen, "%s is not set", HVD_ENV_RDV_ADDR);
        return HVD_EENV;
    }
    if ((rc = env_int(HVD_ENV_RDV_PORT, 1, 65535, &port, err, errlen)))
        return rc;
    int again = atomic_load(&g_rdv_reached);
    c->rdv_fd = hvd__sock_connect(addr, port, deadline, !again);
    if (c->rdv_fd < 0) {
        rc = c->rdv_fd;
        if (again && errno == ECONNREFUSED)
            snprintf(err, errlen,
                     "the rendezvous server at %s:%d has closed: horovodrun "
                     "has ended the job, or is no longer running",
                     addr, port);
        else
            snprintf(err, errlen,
                     "cannot reach the rendezvous server at %s:%d: %s "
                     "(is horovodrun running, and %s right?)",
                     addr, port, strerror(errno), HVD_ENV_RDV_ADDR);
        return rc;
    }
    rc = hvd__sock_recv_frame(c->rdv_fd, &c->rdv_reader, &f, deadline);
    if (rc < 0 || f.type != HVD_RDV_CHALLENGE || f.len != 4 + HVD_NONCE_LEN) {
        snprintf(err, errlen,
                 "the rendezvous server at %s:%d did not send "
                 "its challenge",
                 addr, port);
        return rc < 0 ? rc : HVD_EPROTO;
    }
    uint8_t server_nonce[HVD_NONCE_LEN];
    memcpy(server_nonce, f.payload + 4, HVD_NONCE_LEN);
    atomic_store(&g_rdv_reached, 1);

    struct hvd_rdv_register reg = {
        .rank = (uint32_t)c->rank,
        .size = (uint32_t)c->size,
        .host = getenv(HVD_ENV_HOSTNAME) ? getenv(HVD_ENV_HOSTNAME) : "?",
        .addr = ip,
        .port = (uint32_t)data_port,
    };
    /* Peers reach us where we reached the server from. */
    if ((rc = hvd__sock_local_ip(c->rdv_fd, ip, sizeof(ip))) ||
        (rc = hvd_secret_new(reg.nonce)) ||
        (rc = hvd_rdv_register_encode(&reg, c->secret, sizeof(c->secret),
                                      server_nonce, &out, &outlen)) ||
        (rc = hvd__sock_send_all(c->rdv_fd, out, outlen, deadline))) {
        snprintf(err, errlen,
                 "cannot register with the rendezvous server: "
                 "%s",
                 hvd_strerror(rc));
        goto out;
    }
    /* The server waits for all ranks, up to its own start timeout; wait a
     * little longer so that its verdict, not ours, is what we report. */
    rc = hvd__sock_recv_frame(c->rdv_fd, &c->rdv_reader, &f, deadline + 5000);
    if (rc == 1 && f.type == HVD_RDV_FAIL) {
        int32_t who;
        char *msg = NULL;
        hvd_rdv_note_decode(f.payload, f.len, &who, &msg);
        snprintf(err, errlen, "the rendezvous server refused: %s",
                 msg ? msg : "no reason given");
        free(msg);
        /* The server says why: a timeout, or a refusal of our proof. */
        rc = who == HVD_EAUTH || who == HVD_EPROTO ? who : HVD_ETIMEDOUT;
        goto out;
    }
    if (rc == 1 && f.type == HVD_RDV_ABORT) {
        /* A rank of the generation before failed while we re-joined. */
        int32_t who;
        char *msg = NULL;
        hvd_rdv_note_decode(f.payload, f.len, &who, &msg);
        snprintf(err, errlen, "%s", msg ? msg : "another rank failed");
        free(msg);
        rc = HVD_EPEER;
        goto out;
    }
    if (rc == HVD_ETIMEDOUT) {
        snprintf(err, errlen,
                 "no answer from the rendezvous server within "
                 "the start timeout");
        goto out;
    }
    if (rc < 0 || f.type != HVD_RDV_PEERS) {
        snprintf(err, errlen,
                 "lost the rendezvous server while waiting for "
                 "the other ranks");
        rc = rc < 0 ? rc : HVD_EPROTO;
        goto out;
    }
    rc = hvd_rdv_peers_decode(peers, f.payload, f.len, c->secret,
                              sizeof(c->secret), reg.nonce);
    if (rc == 0 && peers->n != (uint32_t)c->size)
        rc = HVD_EPROTO;
    if (rc)
        snprintf(err, errlen, "the rendezvous server's peer table is %s",
                 rc == HVD_EAUTH ? "not signed with the job secret"
                                 : "malformed");
out:
    free(out);
    return rc;
}

/* The hello a rank sends on its connection to the next rank. */
static int peer_hello(const struct hvd_ctx *c, uint32_t magic, uint32_t from,
                      uint32_t to, uint8_t out[8 + HVD_MAC_LEN])
{
    uint32_t words[3] = {htonl(magic), htonl(from), htonl(to)};
    struct hvd_mac_part parts[] = {{"hvd-peer", 8}, {words, sizeof(words)}};
    memcpy(out, words, 8);
    return hvd_hmac(c->secret, sizeof(c->secret), parts, 2, out + 8);
}

static void describe(char *out, size_t len, const struct hvd_rdv_peers *pt,
                     int rank)
{
    snprintf(out, len, "rank %d (host %s)", rank, pt->peers[rank].host);
}

/* Member i of a ring, as a global rank. */
static int member(const int *global, int n, int i)
{
    i = (i % n + n) % n;
    return global ? global[i] : i;
}

/* Connecting first cannot deadlock: the kernel completes it from the
 * listen queue. Then the links from behind are taken in any order. */
int hvd__join_ring(struct hvd_ctx *c, struct hvd_ring *r, int cross,
                   const int *global, const struct hvd_link *l, char *err,
                   size_t errlen)
{
    uint8_t hello[HVD_RING_LINKS][8 + HVD_MAC_LEN], got[8 + HVD_MAC_LEN];
    uint8_t ack = 'K';
    uint32_t magic = cross ? CROSS_MAGIC : PEER_MAGIC;
    const struct hvd_rdv_peers *pt = l->pt;
    int64_t deadline = l->deadline;
    int n = r->size, me = member(global, n, r->rank), rc, missing = 0;

    r->nlinks = hvd__ring_links(n);
    for (int k = 0; k < r->nlinks; k++) {
        struct hvd_chan *to = &r->to[k];
        int next = member(global, n, r->rank + (1 << k));
        int prev = member(global, n, r->rank - (1 << k));
        describe(to->desc, sizeof(to->desc), pt, next);
        describe(r->from[k].desc, sizeof(r->from[k].desc), pt, prev);
        to->fd = hvd__sock_connect(pt->peers[next].addr,
                                   (int)pt->peers[next].port, deadline, 1);
        if (to->fd < 0) {
            snprintf(err, errlen, "cannot connect to %s at %s:%u: %s", to->desc,
                     pt->peers[next].addr, pt->peers[next].port,
                     strerror(errno));
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

int hvd__join_shm(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                  size_t errlen)
{
    const struct hvd_topo *t = &c->topo;
    int first = t->first[t->host], n = t->count[t->host], rc;
    if (n < 2)
        return 0;
    int *ranks = malloc((size_t)n * sizeof(*ranks));
    if (ranks == NULL)
        return HVD_ENOMEM;
    for (int i = 0; i < n; i++)
        ranks[i] = first + i;
    rc = hvd__shm_setup(&c->shm, c->secret, sizeof(c->secret), ranks, n,
                        c->rank - first, l->pt->peers[c->rank].host,
                        l->deadline, err, errlen);
    free(ranks);
    return rc;
}

/* Picks the transport from who shares a host, and connects it. */
static int connect_peers(struct hvd_ctx *c, int lfd,
                         const struct hvd_rdv_peers *pt, int64_t deadline,
                         char *err, size_t errlen)
{
    const char **hosts = malloc((size_t)c->size * sizeof(*hosts));
    struct hvd_link link = {lfd, pt, deadline};
    int rc = HVD_ENOMEM;

    if (hosts == NULL)
        return rc;
    for (int i = 0; i < c->size; i++)
        hosts[i] = pt->peers[i].host;
    rc = hvd__topo_build(&c->topo, c->size, c->rank, hosts);
    free(hosts);
    if (rc)
        return rc;
    c->tp = hvd__coll_choose(&c->topo, c->size);
    return c->tp->connect(c, &link, err, errlen);
}

int hvd__join(struct hvd_ctx *c, char *err, size_t errlen)
{
    struct hvd_rdv_peers peers = {0};
    int lfd = -1, port = 0, rc;

    if ((rc = read_env(c, err, errlen)))
        return rc;
    hvd__ring_init(&c->ring, c->rank, c->size);
    hvd_frame_reader_init(&c->rdv_reader, HVD_RDV_FRAME_MAX);
    int64_t deadline = hvd__now_ms() + (int64_t)(start_timeout() * 1000);
    const char *rdv = getenv(HVD_ENV_RDV_ADDR);
    lfd = hvd__sock_listen(rdv && strchr(rdv, ':') ? AF_INET6 : AF_INET, 64,
                           &port);
    if (lfd < 0) {
        snprintf(err, errlen, "cannot listen for peers: %s", strerror(errno));
        rc = lfd;
        goto out;
    }
    if ((rc = rendezvous(c, port, &peers, deadline, err, errlen)))
        goto out;
    if (c->size > 1) {
        hvd__sock_tune(c->rdv_fd, c->peer_timeout_s);
        rc = connect_peers(c, lfd, &peers, deadline + 5000, err, errlen);
    }
out:
    if (lfd >= 0)
        close(lfd);
    hvd_rdv_peers_close(&peers);
    return rc;
}

void hvd__join_leave(struct hvd_ctx *c)
{
    uint8_t *f, buf[4096];
    size_t len;
    int64_t deadline = hvd__now_ms() + 1000;

    if (c->rdv_fd < 0 ||
        hvd_rdv_note_encode(HVD_RDV_BYE, c->rank, "", &f, &len) != 0)
        return;
    int rc = hvd__sock_send_all(c->rdv_fd, f, len, deadline);
    free(f);
    /* Whatever the server still had to say no longer matters. */
    while (rc == 0 && hvd__now_ms() < deadline) {
        struct pollfd p = {.fd = c->rdv_fd, .events = POLLIN};
        int left = (int)(deadline - hvd__now_ms());
        if (poll(&p, 1, left > 0 ? left : 0) <= 0 ||
            recv(c->rdv_fd, buf, sizeof(buf), 0) <= 0)
            break;
    }
}
