/* hvd_init's meeting: read the env contract, register with the
 * rendezvous server, choose the transport and have it connect. */
#include "worker/join.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "common/rdvproto.h"
#include "common/secret.h"
#include "common/wire.h"
#include "worker/ctx.h"
#include "worker/failure.h"
#include "hvd_build.h"
#include "worker/sock.h"
#include "worker/transport/connect.h"
#include "worker/transport/topo.h"
#include "worker/transport/transport.h"
#include "worker/wait.h"

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
    /* An elastic process learns its place from the server at each join;
     * the variables above are those of its first. */
    const char *el = getenv(HVD_ENV_ELASTIC);
    if (el && strcmp(el, "1") == 0 &&
        (rc = env_int(HVD_ENV_ELASTIC_ID, 0, INT32_MAX, &c->elastic_id, err,
                      errlen)))
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

static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    double t = v ? atof(v) : 0;
    return t > 0 ? t : dflt;
}

/* How long hvd_init waits for the other ranks: the start timeout, and in
 * an elastic job also the elastic timeout, for which horovodrun may wait
 * for enough hosts before it hands out the new assignment. */
static double start_timeout(const struct hvd_ctx *c)
{
    double t = env_seconds(HVD_ENV_START_TIMEOUT, 30);
    if (c->elastic_id >= 0)
        t += env_seconds(HVD_ENV_ELASTIC_TIMEOUT, 600);
    return t;
}

/* ASSIGN: where this process is in the generation forming. */
static int take_assign(struct hvd_ctx *c, const struct hvd_frame *f,
                       const uint8_t nonce[HVD_NONCE_LEN], char *err,
                       size_t errlen)
{
    struct hvd_rdv_assign a;
    int rc = hvd_rdv_assign_decode(&a, f->payload, f->len, c->secret,
                                   sizeof(c->secret), nonce);
    if (rc) {
        snprintf(err, errlen, "the rendezvous server's assignment is %s",
                 rc == HVD_EAUTH ? "not signed with the job secret"
                                 : "malformed");
        return rc;
    }
    c->rank = (int)a.rank;
    c->size = (int)a.size;
    c->local_rank = (int)a.local_rank;
    c->local_size = (int)a.local_size;
    c->cross_rank = (int)a.cross_rank;
    c->cross_size = (int)a.cross_size;
    return 0;
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
    struct hvd_rbuf vr;
    hvd_rbuf_init(&vr, f.payload, 4);
    uint32_t version = hvd_rbuf_u32(&vr);
    if (version != HVD_RDV_VERSION) {
        snprintf(err, errlen,
                 "the rendezvous server at %s:%d speaks protocol version "
                 "%u and this libhvd %u: run the horovodrun of the same "
                 "build as libhvd",
                 addr, port, version, HVD_RDV_VERSION);
        return HVD_EPROTO;
    }
    uint8_t server_nonce[HVD_NONCE_LEN];
    memcpy(server_nonce, f.payload + 4, HVD_NONCE_LEN);
    atomic_store(&g_rdv_reached, 1);

    int elastic = c->elastic_id >= 0;
    struct hvd_rdv_register reg = {
        .rank = (uint32_t)(elastic ? c->elastic_id : c->rank),
        .size = elastic ? 0 : (uint32_t)c->size,
        .host = getenv(HVD_ENV_HOSTNAME) ? getenv(HVD_ENV_HOSTNAME) : "?",
        .addr = ip,
        .port = (uint32_t)data_port,
    };
    /* Peers reach us where we reached the server from, unless the agent
     * that carries the rendezvous said where. */
    const char *data_addr = getenv(HVD_ENV_DATA_ADDR);
    rc = 0;
    if (data_addr && data_addr[0])
        snprintf(ip, sizeof(ip), "%s", data_addr);
    else
        rc = hvd__sock_local_ip(c->rdv_fd, ip, sizeof(ip));
    if (rc || (rc = hvd_secret_new(reg.nonce)) ||
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
    /* Notices of host changes before the assignment are already taken
     * into account by it. */
    while (elastic && rc == 1 && f.type == HVD_RDV_HOSTS)
        rc = hvd__sock_recv_frame(c->rdv_fd, &c->rdv_reader, &f,
                                  deadline + 5000);
    if (elastic && rc == 1 && f.type == HVD_RDV_ASSIGN) {
        if ((rc = take_assign(c, &f, reg.nonce, err, errlen)))
            goto out;
        hvd__ring_init(&c->ring, c->rank, c->size);
        rc = hvd__sock_recv_frame(c->rdv_fd, &c->rdv_reader, &f,
                                  deadline + 5000);
    } else if (elastic && rc == 1 && f.type == HVD_RDV_PEERS) {
        snprintf(err, errlen,
                 "the rendezvous server sent no assignment: is horovodrun "
                 "running an elastic job?");
        rc = HVD_EPROTO;
        goto out;
    }
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
    if (rc == 0 && peers->size != (uint32_t)c->size)
        rc = HVD_EPROTO;
    if (rc)
        snprintf(err, errlen, "the rendezvous server's peer table is %s",
                 rc == HVD_EAUTH ? "not signed with the job secret"
                                 : "malformed");
out:
    free(out);
    return rc;
}

/* Picks the transport from who shares a host, and connects it. */
static int connect_peers(struct hvd_ctx *c, int lfd,
                         const struct hvd_rdv_peers *pt, int64_t deadline,
                         char *err, size_t errlen)
{
    struct hvd_link link = {lfd, pt, deadline};
    struct hvd_rdv_layout layout;
    int rc = hvd_rdv_layout_from_runs(&layout, pt->size, pt->runs, pt->nruns);

    if (rc == 0)
        rc = hvd__topo_build(&c->topo, &layout, c->rank);
    hvd_rdv_layout_close(&layout);
    if (rc)
        return rc;
    c->tp = hvd__topo_choose(&c->topo, c->size);
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
    int64_t deadline = hvd__now_ms() + (int64_t)(start_timeout(c) * 1000);
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
    /* What came right behind the peer table (a host notice, another
     * rank's failure) may already sit in the reader, where no poll of the
     * socket would find it. */
    if (rc == 0)
        hvd__read_rdv(c);
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
