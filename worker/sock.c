/* Socket helpers: connect/accept/send/recv with deadlines, tuning. */
#include "worker/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "worker/wait.h"

/* Waits for events on fd until the deadline: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - hvd__now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static int set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

int hvd__sock_connect(const char *host, int port, int64_t deadline_ms,
                      int retry_refused)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    char portstr[16];
    int fd = -1, err = HVD_ECONNECT;

    snprintf(portstr, sizeof(portstr), "%d", port);
    if (getaddrinfo(host, portstr, &hints, &ai) != 0 || ai == NULL) {
        errno = EHOSTUNREACH;
        return HVD_ECONNECT;
    }
    /* Retry refused connections until the deadline: the listener may not
     * be up yet. */
    while (hvd__now_ms() < deadline_ms) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        set_nonblock(fd, 1);
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            int ready = wait_fd(fd, POLLOUT, deadline_ms);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (ready <= 0) {
                errno = ETIMEDOUT;
                err = HVD_ETIMEDOUT;
                break;
            }
            rc = soerr ? -1 : 0;
            errno = soerr;
        }
        if (rc == 0) {
            set_nonblock(fd, 0);
            err = 0;
            break;
        }
        int saved = errno;
        close(fd);
        fd = -1;
        errno = saved;
        if (saved != ECONNREFUSED || !retry_refused)
            break;
        usleep(50 * 1000);
    }
    if (err && fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    freeaddrinfo(ai);
    return err ? err : fd;
}

int hvd__sock_listen(int family, int backlog, int *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                       : sizeof(struct sockaddr_in);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return HVD_ESYS;
    ss.ss_family = (sa_family_t)family;
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        listen(fd, backlog) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return HVD_ESYS;
    }
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

int hvd__sock_accept(int lfd, int64_t deadline_ms)
{
    int r = wait_fd(lfd, POLLIN, deadline_ms);
    if (r == 0)
        return HVD_ETIMEDOUT;
    if (r < 0)
        return HVD_ESYS;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    return fd >= 0 ? fd : HVD_ESYS;
}

int hvd__sock_send_all(int fd, const void *p, size_t len, int64_t deadline)
{
    const uint8_t *b = p;
    while (len > 0) {
        ssize_t n = send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            b += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return errno == EPIPE || errno == ECONNRESET ? HVD_EPEER : HVD_ESYS;
        int r = wait_fd(fd, POLLOUT, deadline);
        if (r <= 0)
            return r == 0 ? HVD_ETIMEDOUT : HVD_ESYS;
    }
    return 0;
}

int hvd__sock_recv_all(int fd, void *p, size_t len, int64_t deadline)
{
    uint8_t *b = p;
    while (len > 0) {
        ssize_t n = recv(fd, b, len, MSG_DONTWAIT);
        if (n > 0) {
            b += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return HVD_EPEER;
        if (errno != EAGAIN && errno != EINTR)
            return errno == ECONNRESET ? HVD_EPEER : HVD_ESYS;
        int r = wait_fd(fd, POLLIN, deadline);
        if (r <= 0)
            return r == 0 ? HVD_ETIMEDOUT : HVD_ESYS;
    }
    return 0;
}

int hvd__sock_recv_frame(int fd, struct hvd_frame_reader *r,
                         struct hvd_frame *f, int64_t deadline_ms)
{
    uint8_t buf[4096];
    for (;;) {
        int rc = hvd_frame_reader_next(r, f);
        if (rc != 0)
            return rc;
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            if ((rc = hvd_frame_reader_push(r, buf, (size_t)n)) != 0)
                return rc;
            continue;
        }
        if (n == 0)
            return HVD_EPEER;
        if (errno != EAGAIN && errno != EINTR)
            return HVD_ESYS;
        int w = wait_fd(fd, POLLIN, deadline_ms);
        if (w <= 0)
            return w == 0 ? HVD_ETIMEDOUT : HVD_ESYS;
    }
}

void hvd__sock_tune(int fd, int timeout_s)
{
    int one = 1, buf = 4 << 20;
    int idle = timeout_s / 3 > 0 ? timeout_s / 3 : 1;
    int intvl = idle, cnt = 2;
    /* Later than the collectives' own progress timeout (timeout_s), whose
     * message says more: TCP's is for a host that vanished while data
     * was on its way. */
    unsigned user_timeout = (unsigned)timeout_s * 1500u + 1000u;
    set_nonblock(fd, 1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    /* A peer whose host vanished is detected within about timeout_s. */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
               sizeof(user_timeout));
}

int hvd__sock_local_ip(int fd, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return HVD_ESYS;
    const void *a = ss.ss_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    return inet_ntop(ss.ss_family, a, out, (socklen_t)outlen) ? 0 : HVD_ESYS;
}
