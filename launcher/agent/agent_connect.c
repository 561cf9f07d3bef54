/* hvd-agent --connect: the connection back to horovodrun that carries its
 * frames when the command that started the agent passes no input (an rsh
 * agent; see launcher/link/rsh.h). */
#include "launcher/agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"

/* Per address tried, and for the challenge once connected. */
#define CONNECT_MS 5000
#define CHALLENGE_MS 10000

/* Waits for fd to be ready for events; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return n;
}

/* A connected socket to addr:port, or -1 with errno set. */
static int dial(const char *addr, const char *port)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int fd = -1, err = 0;
    socklen_t elen = sizeof(err);

    if (getaddrinfo(addr, port, &hints, &ai) != 0) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS)
            err = errno;
        else if (wait_fd(fd, POLLOUT, CONNECT_MS) != 1)
            err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
            err = errno;
    } else if (fd < 0) {
        err = errno;
    }
    freeaddrinfo(ai);
    if (err != 0) {
        if (fd >= 0)
            close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Reads the challenge line into hex (HVD_CONNECT_CHALLENGE_HEX + 1). */
static int read_challenge(int fd, char *hex)
{
    size_t got = 0;
    char c;
    while (got <= HVD_CONNECT_CHALLENGE_HEX) {
        if (wait_fd(fd, POLLIN, CHALLENGE_MS) != 1)
            return -1;
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n != 1)
            return -1;
        if (c == '\n')
            break;
        if (got == HVD_CONNECT_CHALLENGE_HEX)
            return -1;
        hex[got++] = c;
    }
    hex[got] = '\0';
    return got == HVD_CONNECT_CHALLENGE_HEX ? 0 : -1;
}

int agent_connect(int argc, char **argv)
{
    char hex[HVD_CONNECT_CHALLENGE_HEX + 1];
    char line[sizeof(HVD_CONNECT_GREETING) + HVD_CONNECT_CHALLENGE_HEX + 1];
    const char *why = "no address given";
    int fd = -1, one = 1;

    /* argv: --connect PORT ADDR... */
    for (int i = 2; i < argc && fd < 0; i++) {
        fd = dial(argv[i], argv[1]);
        if (fd < 0)
            why = strerror(errno);
    }
    if (fd < 0) {
        hvd_log_error("cannot connect back to horovodrun at port %s of %s%s: "
                      "%s; the hosts must reach the launcher's host over TCP",
                      argc > 1 ? argv[1] : "?", argc > 2 ? argv[2] : "?",
                      argc > 3 ? " (or its other addresses)" : "", why);
        return -1;
    }
    if (fcntl(fd, F_SETFL, 0) != 0 || read_challenge(fd, hex) != 0) {
        hvd_log_error("connected to horovodrun at port %s, but it sent no "
                      "challenge; is horovodrun as new as hvd-agent?",
                      argv[1]);
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int n = snprintf(line, sizeof(line), "%s%s\n", HVD_CONNECT_GREETING, hex);
    if (write(1, line, (size_t)n) != n || dup2(fd, 0) != 0) {
        hvd_log_error("cannot answer horovodrun's challenge: %s",
                      strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}
