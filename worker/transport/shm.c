/* The shared-memory segment of one host's ranks: set-up over an abstract
 * Unix socket, and the sync that every shared-memory collective uses. */
#include "worker/transport/shm.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "worker/buf.h"
#include "common/auth.h"
#include "common/hvd_err.h"
#include "common/secret.h"
#include "worker/sock.h"
#include "worker/wait.h"

#define SHM_MAGIC 0x48565348u /* "HVSH" */
/* Bytes of one slot, and of all slots together at most. */
#define SLOT_MAX (1u << 20)
#define SEGMENT_DATA_MAX (64u << 20)
/* How often a sleeping wait looks at the clock without any event. */
#define WAIT_POLL_MS 1000
/* How many of the ranks a sleeping wait waits for it watches die. */
#define WATCH_MAX 4

struct hvd_shm_ctl {
    _Atomic uint64_t seq;
    _Atomic uint32_t sleeping;
    int32_t pid;
    _Atomic int64_t busy_ms; /* see hvd__shm_busy_ms */
    char pad[40];            /* one cache line per rank: no false sharing */
};

struct hvd_shm_hdr {
    uint32_t magic;
    uint32_t n;
    uint64_t slot;
    _Atomic uint32_t aborted;
    /* 1 + the global rank whose death or silence failed a wait, as the
     * first rank to see it tells the others (0: none). */
    _Atomic int32_t culprit;
    char pad[40];
    /* Arrivals of ranks other than the first at hvd__shm_arrive, ever:
     * its own cache line, as every arrival writes it. */
    _Atomic uint64_t arrived;
    char pad2[56];
    struct hvd_shm_ctl ctl[];
};

/* What a local rank sends the first one to join. */
struct hello {
    uint32_t magic;
    uint32_t rank;
    uint8_t mac[HVD_MAC_LEN];
};

static void shm_init(struct hvd_shm *s)
{
    memset(s, 0, sizeof(*s));
}

static size_t header_len(int n)
{
    size_t h =
        sizeof(struct hvd_shm_hdr) + (size_t)n * sizeof(struct hvd_shm_ctl);
    return (h + 4095) & ~(size_t)4095;
}

static size_t slot_len(int n)
{
    size_t slot = SEGMENT_DATA_MAX / (2 * ((size_t)n + 1));
    if (slot > SLOT_MAX)
        slot = SLOT_MAX;
    return slot & ~(size_t)4095;
}

/* The socket name: only ranks that hold the secret can compute it. */
static int sock_name(const uint8_t *secret, size_t secretlen, const char *host,
                     struct sockaddr_un *sa, socklen_t *salen)
{
    uint8_t mac[HVD_MAC_LEN];
    struct hvd_mac_part parts[] = {{"hvd-shm-name", 12}, {host, strlen(host)}};
    if (hvd_hmac(secret, secretlen, parts, 2, mac))
        return HVD_ESYS;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, "hvd-", 4);
    hvd_hex_encode(mac, 16, sa->sun_path + 5);
    *salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 5 + 32);
    return 0;
}

static int hello_mac(const uint8_t *secret, size_t secretlen,
                     const uint8_t nonce[HVD_NONCE_LEN], const char *host,
                     uint32_t rank, uint8_t out[HVD_MAC_LEN])
{
    struct hvd_mac_part parts[] = {{"hvd-shm-hello", 13},
                                   {nonce, HVD_NONCE_LEN},
                                   {host, strlen(host)},
                                   {&rank, sizeof(rank)}};
    return hvd_hmac(secret, secretlen, parts, 4, out);
}

/* Descriptors in one SCM_RIGHTS message (the kernel takes 253 at most). */
#define FDS_PER_MSG 200

/* Sends len bytes with nfd <= FDS_PER_MSG fds attached. */
static int send_fds(int fd, const void *p, size_t len, const int *fds, int nfd)
{
    char ctl[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
    struct iovec iov = {(void *)(uintptr_t)p, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    memset(ctl, 0, sizeof(ctl));
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
    ssize_t n;
    while ((n = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return n == (ssize_t)len ? 0 : HVD_ESYS;
}

/* Receives exactly len bytes (one message) and up to maxfd fds before the
 * deadline; *nfd says how many came. */
static int recv_fds(int fd, void *p, size_t len, int *fds, int maxfd, int *nfd,
                    int64_t deadline)
{
    char ctl[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
    struct iovec iov = {p, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int64_t left = deadline - hvd__now_ms();

    *nfd = 0;
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
        return HVD_ETIMEDOUT;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); n >= 0 && cm;
         cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *got = (int *)(void *)CMSG_DATA(cm);
        for (int i = 0; i < k; i++) {
            if (*nfd < maxfd)
                fds[(*nfd)++] = got[i];
            else
                close(got[i]);
        }
    }
    if (n != (ssize_t)len || (m.msg_flags & MSG_CTRUNC))
        return n == 0 ? HVD_EPEER : HVD_EPROTO;
    return 0;
}

/* Sends nfd fds, FDS_PER_MSG to a one-byte message. */
static int send_many(int fd, const int *fds, int nfd)
{
    for (int at = 0; at < nfd; at += FDS_PER_MSG) {
        int k = nfd - at < FDS_PER_MSG ? nfd - at : FDS_PER_MSG;
        if (send_fds(fd, "S", 1, fds + at, k))
            return HVD_ESYS;
    }
    return 0;
}

/* Receives the nfd fds that send_many sends; *got says how many came. */
static int recv_many(int fd, int *fds, int nfd, int *got, int64_t deadline)
{
    char ok;
    *got = 0;
    while (*got < nfd) {
        int want = nfd - *got < FDS_PER_MSG ? nfd - *got : FDS_PER_MSG, k = 0;
        int rc = recv_fds(fd, &ok, 1, fds + *got, want, &k, deadline);
        *got += k;
        if (rc)
            return rc;
        if (k != want)
            return HVD_EPROTO;
    }
    return 0;
}

static int index_of(const struct hvd_shm *s, uint32_t rank)
{
    for (int i = 0; i < s->n; i++)
        if ((uint32_t)s->ranks[i] == rank)
            return i;
    return -1;
}

/* The first rank: creates the segment, admits the others (each proves the
 * secret against a fresh nonce and sends its eventfd) and hands everyone
 * the segment and all eventfds. */
static int lead(struct hvd_shm *s, int lfd, int memfd, const uint8_t *secret,
                size_t secretlen, int64_t deadline, char *err, size_t errlen)
{
    int *conn = malloc((size_t)s->n * sizeof(*conn));
    int joined = 1, rc = HVD_ENOMEM;

    if (conn == NULL)
        return rc;
    for (int i = 0; i < s->n; i++)
        conn[i] = -1;
    while (joined < s->n) {
        int fd = hvd__sock_accept(lfd, deadline);
        if (fd < 0) {
            snprintf(err, errlen,
                     "shared memory: %d of the %d ranks on host %s did not "
                     "join in time",
                     s->n - joined, s->n, s->host);
            rc = fd;
            goto out;
        }
        uint8_t nonce[HVD_NONCE_LEN], mac[HVD_MAC_LEN];
        struct hello h;
        int efd = -1, nfd = 0, idx = -1;
        if (hvd_secret_new(nonce) == 0 &&
            hvd__sock_send_all(fd, nonce, sizeof(nonce), deadline) == 0 &&
            recv_fds(fd, &h, sizeof(h), &efd, 1, &nfd, deadline) == 0 &&
            nfd == 1 && h.magic == SHM_MAGIC &&
            (idx = index_of(s, h.rank)) > 0 && conn[idx] < 0 &&
            hello_mac(secret, secretlen, nonce, s->host, h.rank, mac) == 0 &&
            hvd_mac_equal(mac, h.mac)) {
            conn[idx] = fd;
            s->efd[idx] = efd;
            joined++;
            continue;
        }
        /* Anyone on this host can knock; only a rank of this job gets in. */
        if (nfd == 1)
            close(efd);
        close(fd);
    }
    int *fds = malloc(((size_t)s->n + 1) * sizeof(*fds));
    if (fds == NULL)
        goto out;
    fds[0] = memfd;
    memcpy(fds + 1, s->efd, (size_t)s->n * sizeof(int));
    rc = 0;
    for (int i = 1; i < s->n && rc == 0; i++)
        if ((rc = send_many(conn[i], fds, s->n + 1)))
            snprintf(err, errlen,
                     "shared memory: cannot hand the segment to rank %d: %s",
                     s->ranks[i], strerror(errno));
    free(fds);
out:
    for (int i = 0; i < s->n; i++)
        if (conn[i] >= 0)
            close(conn[i]);
    free(conn);
    return rc;
}

/* Any other rank: proves the secret to the first one and receives the
 * segment and every rank's eventfd. */
static int follow(struct hvd_shm *s, const struct sockaddr_un *sa,
                  socklen_t salen, int *memfd, const uint8_t *secret,
                  size_t secretlen, int64_t deadline, char *err, size_t errlen)
{
    int fd = -1, rc = HVD_ESYS, nfd = 0;
    int *fds = malloc(((size_t)s->n + 1) * sizeof(*fds));
    uint8_t nonce[HVD_NONCE_LEN];
    struct hello h = {SHM_MAGIC, (uint32_t)s->ranks[s->me], {0}};

    if (fds == NULL)
        return HVD_ENOMEM;
    /* The first rank may not listen yet: try again until the deadline. */
    for (;;) {
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            goto out;
        if (connect(fd, (const struct sockaddr *)sa, salen) == 0)
            break;
        close(fd);
        fd = -1;
        if (hvd__now_ms() >= deadline) {
            rc = HVD_ETIMEDOUT;
            goto out;
        }
        usleep(1000);
    }
    if ((rc = hvd__sock_recv_all(fd, nonce, sizeof(nonce), deadline)) ||
        (rc = hello_mac(secret, secretlen, nonce, s->host, h.rank, h.mac)) ||
        (rc = send_fds(fd, &h, sizeof(h), &s->efd[s->me], 1)) ||
        (rc = recv_many(fd, fds, s->n + 1, &nfd, deadline)))
        goto out;
    *memfd = fds[0];
    for (int i = 0; i < s->n; i++) {
        if (i == s->me)
            close(fds[i + 1]); /* our own, back again */
        else
            s->efd[i] = fds[i + 1];
    }
    nfd = 0;
out:
    for (int i = 0; i < nfd; i++)
        close(fds[i]);
    free(fds);
    if (fd >= 0)
        close(fd);
    if (rc)
        snprintf(err, errlen,
                 "shared memory: cannot join rank %d's segment on host %s: "
                 "%s",
                 s->ranks[0], s->host, hvd_strerror(rc));
    return rc;
}

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

int hvd__shm_setup(struct hvd_shm *s, const uint8_t *secret, size_t secretlen,
                   const int *ranks, int n, int me, const char *host,
                   int64_t deadline_ms, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    socklen_t salen;
    int lfd = -1, memfd = -1, rc = HVD_ENOMEM;

    shm_init(s);
    if (n < 2 || n > HVD_SHM_MAX)
        return HVD_EINVAL;
    s->n = n;
    s->me = me;
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->ranks = malloc((size_t)n * sizeof(int));
    s->efd = malloc((size_t)n * sizeof(int));
    s->pidfd = malloc((size_t)n * sizeof(int));
    if (s->ranks == NULL || s->efd == NULL || s->pidfd == NULL)
        goto out;
    memcpy(s->ranks, ranks, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        s->efd[i] = s->pidfd[i] = -1;
    s->slot = slot_len(n);
    s->len = header_len(n) + 2 * ((size_t)n + 1) * s->slot;
    rc = HVD_ESYS;
    s->efd[me] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->efd[me] < 0 || sock_name(secret, secretlen, host, &sa, &salen)) {
        snprintf(err, errlen, "shared memory: cannot create an eventfd: %s",
                 strerror(errno));
        goto out;
    }
    if (me == 0) {
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, salen) != 0 ||
            listen(lfd, n) != 0) {
            snprintf(err, errlen,
                     "shared memory: cannot listen on a Unix socket: %s",
                     strerror(errno));
            goto out;
        }
        memfd = memfd_create("hvd-shm", MFD_CLOEXEC);
        if (memfd < 0 || ftruncate(memfd, (off_t)s->len) != 0) {
            snprintf(err, errlen,
                     "shared memory: cannot create a %zu-byte segment: %s",
                     s->len, strerror(errno));
            goto out;
        }
        rc = lead(s, lfd, memfd, secret, secretlen, deadline_ms, err, errlen);
    } else {
        rc = follow(s, &sa, salen, &memfd, secret, secretlen, deadline_ms, err,
                    errlen);
    }
    if (rc)
        goto out;
    void *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED) {
        rc = HVD_ESYS;
        snprintf(err, errlen, "shared memory: cannot map %zu bytes: %s", s->len,
                 strerror(errno));
        goto out;
    }
    s->hdr = p;
    s->data = (uint8_t *)p + header_len(n);
    if (me == 0) {
        s->hdr->magic = SHM_MAGIC;
        s->hdr->n = (uint32_t)n;
        s->hdr->slot = s->slot;
    }
    s->hdr->ctl[me].pid = (int32_t)getpid();
    /* Once everyone is in, a rank that dies is seen through its pidfd. */
    s->deadline_ms = deadline_ms;
    rc = hvd__shm_sync(s, err, errlen);
    s->deadline_ms = 0;
    if (rc == 0 && (s->hdr->magic != SHM_MAGIC || s->hdr->n != (uint32_t)n ||
                    s->hdr->slot != s->slot))
        rc = HVD_EPROTO;
    for (int i = 0; rc == 0 && i < n; i++)
        if (i != me)
            s->pidfd[i] = pidfd_of(s->hdr->ctl[i].pid);
out:
    if (lfd >= 0)
        close(lfd);
    if (memfd >= 0)
        close(memfd);
    if (rc)
        hvd__shm_close(s);
    return rc;
}

void hvd__shm_close(struct hvd_shm *s)
{
    if (s == NULL)
        return;
    if (s->hdr)
        munmap(s->hdr, s->len);
    for (int i = 0; i < s->n; i++) {
        if (s->efd && s->efd[i] >= 0)
            close(s->efd[i]);
        if (s->pidfd && s->pidfd[i] >= 0)
            close(s->pidfd[i]);
    }
    free(s->ranks);
    free(s->efd);
    free(s->pidfd);
    free(s->tmp);
    shm_init(s);
}

uint8_t *hvd__shm_slot(const struct hvd_shm *s, int i)
{
    return s->data +
           ((size_t)s->set * ((size_t)s->n + 1) + (size_t)i) * s->slot;
}

void hvd__shm_flip(struct hvd_shm *s)
{
    s->set ^= 1;
}

uint8_t *hvd__shm_tmp(struct hvd_shm *s, size_t want)
{
    return hvd__grow(&s->tmp, &s->tmp_cap, want ? want : 1) ? NULL : s->tmp;
}

/* Wakes local rank i if it sleeps in one of the modes up to most, once:
 * the first waker takes its flag, so that a sleeper costs one write
 * however many ranks arrive. */
static void wake(const struct hvd_shm *s, int i, uint32_t most)
{
    uint64_t one = 1;
    uint32_t mode = atomic_load(&s->hdr->ctl[i].sleeping);
    /* A full counter (EAGAIN) already wakes the sleeper. */
    if (mode != HVD_SHM_AWAKE && mode <= most &&
        atomic_compare_exchange_strong(&s->hdr->ctl[i].sleeping, &mode,
                                       HVD_SHM_AWAKE))
        (void)!write(s->efd[i], &one, sizeof(one));
}

void hvd__shm_abort(struct hvd_shm *s)
{
    if (s->hdr == NULL)
        return;
    atomic_store(&s->hdr->aborted, 1);
    for (int i = 0; i < s->n; i++)
        if (i != s->me)
            wake(s, i, HVD_SHM_WAKE_LATE);
}

/* The loads of seq are sequentially consistent, like the stores of seq and
 * sleeping: a rank that marks itself sleeping and then finds no one ahead
 * or behind is certain to be woken by the next store of seq (an acquire
 * load could be ordered before the store of sleeping, and the wake-up
 * lost). On x86 both are plain loads. */
int hvd__shm_peer_ahead(const struct hvd_shm *s)
{
    for (int i = 0; i < s->n; i++)
        if (atomic_load(&s->hdr->ctl[i].seq) > s->seq)
            return 1;
    return 0;
}

void hvd__shm_set_sleeping(struct hvd_shm *s, int mode)
{
    if (s->hdr == NULL)
        return;
    atomic_store(&s->hdr->ctl[s->me].sleeping, (uint32_t)mode);
}

_Atomic int64_t *hvd__shm_busy_ms(struct hvd_shm *s)
{
    return s->hdr ? &s->hdr->ctl[s->me].busy_ms : NULL;
}

void hvd__shm_drain(struct hvd_shm *s)
{
    uint64_t v;
    if (s->hdr == NULL)
        return;
    while (read(s->efd[s->me], &v, sizeof(v)) > 0)
        ;
}

/* The first local rank behind this one's count, or -1. A rank's count
 * only grows, so each look resumes where the last one stopped (passed,
 * reset at each sync): a wait loads each count once, not once a look. */
static int laggard(struct hvd_shm *s)
{
    for (; s->passed < s->upto; s->passed++)
        if (atomic_load(&s->hdr->ctl[s->passed].seq) < s->seq)
            return s->passed;
    return -1;
}

/* The first other local rank from i on (below upto) that is behind this
 * one's count, or -1: with laggard(s) as the start, the ranks a wait
 * waits for. */
static int behind_from(const struct hvd_shm *s, int i)
{
    for (; i >= 0 && i < s->upto; i++)
        if (i != s->me && atomic_load(&s->hdr->ctl[i].seq) < s->seq)
            return i;
    return -1;
}

/* Wakes the ranks behind that sleep in the modes up to most. */
static void wake_behind(struct hvd_shm *s, uint32_t most)
{
    for (int i = behind_from(s, laggard(s)); i >= 0; i = behind_from(s, i + 1))
        wake(s, i, most);
}

/* Names local rank i as the one that failed this host's waits, unless
 * another rank named one first. */
static void blame(struct hvd_shm *s, int i)
{
    int32_t none = 0;
    atomic_compare_exchange_strong(&s->hdr->culprit, &none, s->ranks[i] + 1);
}

/* The rank that a wait that ran out of time waits for: the first one
 * behind, or for a wait for rank 0's release (hvd__shm_release) once rank
 * 0 arrived, the first rank that rank 0 still waits for. */
static int late_one(struct hvd_shm *s)
{
    int k = laggard(s);
    if (s->upto != 1 || k != 0 || atomic_load(&s->hdr->ctl[0].seq) + 1 < s->seq)
        return k;
    for (int i = 1; i < s->n; i++)
        if (atomic_load(&s->hdr->ctl[i].seq) + 1 < s->seq)
            return i;
    return k;
}

/* Sleeps until woken, a peer dies, the abort channel speaks or a second
 * passes; returns a negative code when the wait must end in failure. A
 * deadline from progress_ms moves on while the rank waited for moves data
 * elsewhere. */
static int sleep_once(struct hvd_shm *s, int64_t *deadline, int64_t soon,
                      char *err, size_t errlen)
{
    struct pollfd p[WATCH_MAX + 2];
    int who[WATCH_MAX + 2]; /* the local rank of each pidfd */
    int np = 0;
    p[np++] = (struct pollfd){.fd = s->efd[s->me], .events = POLLIN};
    p[np++] = (struct pollfd){.fd = hvd__abort_fd(s->ab), .events = POLLIN};
    /* Only the first few ranks this sync waits for: polling every peer's
     * pidfd made each sleep cost O(n), and a sync O(n * n), at many ranks.
     * A death among the others shows at the next look (within
     * WAIT_POLL_MS), or at once through the abort channel. */
    for (int i = behind_from(s, laggard(s)); i >= 0 && np < 2 + WATCH_MAX;
         i = behind_from(s, i + 1))
        if (s->pidfd[i] >= 0) {
            who[np] = i;
            p[np++] = (struct pollfd){.fd = s->pidfd[i], .events = POLLIN};
        }
    int64_t until =
        soon > 0 && (*deadline == 0 || soon < *deadline) ? soon : *deadline;
    int timeout =
        hvd__poll_timeout(until, s->ab ? s->ab->deadline : 0, WAIT_POLL_MS);
    int got = poll(p, (nfds_t)np, timeout);
    if (got < 0 && errno != EINTR) {
        snprintf(err, errlen, "poll failed: %s", strerror(errno));
        return HVD_ESYS;
    }
    if (p[0].revents)
        hvd__shm_drain(s);
    if (laggard(s) < 0)
        return 0;
    for (int i = 2; i < np; i++) {
        if (!p[i].revents)
            continue;
        blame(s, who[i]);
        snprintf(err, errlen,
                 "rank %d (host %s) exited in the middle of a collective",
                 s->ranks[who[i]], s->host);
        return HVD_EPEER;
    }
    int rc = hvd__abort_poll(s->ab, p[1].revents != 0, err, errlen);
    if (rc < 0)
        return rc;
    if (*deadline > 0 && hvd__now_ms() >= *deadline) {
        int k = late_one(s);
        if (s->deadline_ms == 0 && k >= 0) {
            int64_t busy = atomic_load_explicit(&s->hdr->ctl[k].busy_ms,
                                                memory_order_relaxed) +
                           s->progress_ms;
            if (busy > *deadline) {
                *deadline = busy;
                return 0;
            }
        }
        blame(s, k < 0 ? 0 : k);
        snprintf(err, errlen,
                 "shared memory: rank %d (host %s) did not arrive in time "
                 "(is it stopped or hung?)",
                 s->ranks[k < 0 ? 0 : k], s->host);
        return HVD_ETIMEDOUT;
    }
    return 0;
}

/* Waits until the ranks watch() chose have entered s->seq syncs. */
static int wait_watched(struct hvd_shm *s, char *err, size_t errlen)
{
    int64_t late = 0; /* when the idle ranks behind are woken */
    int64_t deadline = s->deadline_ms;
    struct hvd_spin spin = {0};
    /* A stopped or hung rank keeps its memory mapped: only the wait
     * tells. */
    if (deadline == 0 && s->progress_ms > 0)
        deadline = hvd__now_ms() + s->progress_ms;
    for (;;) {
        if (laggard(s) < 0)
            return 0;
        if (atomic_load(&s->hdr->aborted)) {
            /* A rank that waited for no one but rank 0 hears of another's
             * failure here: name it where known. */
            int32_t who = atomic_load(&s->hdr->culprit);
            if (who > 0)
                snprintf(err, errlen,
                         "rank %d (host %s) exited or stopped in the middle "
                         "of a collective",
                         who - 1, s->host);
            else
                snprintf(err, errlen,
                         "a rank on host %s failed in the middle of a "
                         "collective",
                         s->host);
            return HVD_EPEER;
        }
        /* The others usually arrive within microseconds: a short spin
         * costs less than sleeping and being woken. Then yield: the rank
         * waited for may need this CPU (more ranks than CPUs, or other
         * work on the host), and a yield with no one to yield to is
         * cheap. */
        int64_t spent = hvd__spin_spent(&spin);
        if (spent < s->spin_us)
            continue;
        if (spent < s->yield_us) {
            sched_yield();
            continue;
        }
        int64_t now = hvd__now_ms();
        if (late == 0) {
            late = now + HVD_SHM_LATE_WAKE_MS;
        } else if (late > 0 && now >= late) {
            wake_behind(s, HVD_SHM_WAKE_LATE);
            late = -1;
        }
        hvd__shm_set_sleeping(s, HVD_SHM_WAKE_NOW);
        int rc = laggard(s) < 0 ? 0
                                : sleep_once(s, &deadline, late > 0 ? late : 0,
                                             err, errlen);
        hvd__shm_set_sleeping(s, HVD_SHM_AWAKE);
        if (rc < 0) {
            /* The others must not wait for this rank either. */
            hvd__shm_abort(s);
            return rc;
        }
    }
}

/* Starts a wait for the local ranks below upto to enter s->seq syncs. */
static void watch(struct hvd_shm *s, int upto)
{
    s->passed = 0;
    s->upto = upto;
}

/* Enters sync s->seq + 1. */
static void enter(struct hvd_shm *s)
{
    s->seq++;
    atomic_store(&s->hdr->ctl[s->me].seq, s->seq);
}

int hvd__shm_sync(struct hvd_shm *s, char *err, size_t errlen)
{
    enter(s);
    watch(s, s->n);
    /* Wake the ranks behind that must come at once (a rank with work in
     * flight sleeps until told; an idle one is told only if this wait
     * gets long, below, since its caller's call brings it anyway), and,
     * as the last to arrive, the ones that wait for it: not every rank at
     * every arrival, which made a sync cost n * n wake-ups. Of two ranks
     * arriving last at once, the later store sees no one behind, so one
     * of them wakes the waiters. */
    if (laggard(s) < 0) {
        for (int i = 0; i < s->n; i++)
            if (i != s->me)
                wake(s, i, HVD_SHM_WAKE_NOW);
    } else {
        wake_behind(s, HVD_SHM_WAKE_NOW);
    }
    return wait_watched(s, err, errlen);
}

int hvd__shm_arrive(struct hvd_shm *s, char *err, size_t errlen)
{
    enter(s);
    if (s->me == 0) {
        watch(s, s->n);
        wake_behind(s, HVD_SHM_WAKE_NOW);
        return wait_watched(s, err, errlen);
    }
    /* Rank 0, still behind, may sleep with work in flight: wake it now.
     * Once it waits here, only the last arrival wakes it (the count is
     * sequentially consistent, like seq: the last one sees it asleep,
     * or it sees every count before it sleeps). */
    uint64_t v = atomic_fetch_add(&s->hdr->arrived, 1) + 1;
    if (v % (uint64_t)(s->n - 1) == 0 ||
        atomic_load(&s->hdr->ctl[0].seq) < s->seq)
        wake(s, 0, HVD_SHM_WAKE_NOW);
    return 0;
}

int hvd__shm_release(struct hvd_shm *s, char *err, size_t errlen)
{
    if (s->me == 0) {
        enter(s);
        for (int i = 1; i < s->n; i++)
            wake(s, i, HVD_SHM_WAKE_NOW);
        return 0;
    }
    s->seq++;
    watch(s, 1);
    int rc = wait_watched(s, err, errlen);
    if (rc == 0)
        atomic_store(&s->hdr->ctl[s->me].seq, s->seq);
    return rc;
}
