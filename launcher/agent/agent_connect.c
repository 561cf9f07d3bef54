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

#include "common/secret.h"
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

/* The job's token from path (64 hex digits), or -1 when it cannot be
 * read here: no file system shared with horovodrun. */
static int read_token(const char *path, uint8_t token[HVD_CONNECT_TOKEN_LEN])
{
    char hex[2 * HVD_CONNECT_TOKEN_LEN + 2] = "";
    FILE *f = path ? fopen(path, "r") : NULL;
    int ok = f && fgets(hex, sizeof(hex), f);
    hex[strcspn(hex, "\n")] = '\0';
    ok = ok && hvd_hex_decode(hex, token, HVD_CONNECT_TOKEN_LEN) == 0;
    if (f)
        fclose(f);
    return ok ? 0 : -1;
}

/* Says who we are on the connection: the greeting with the challenge on
 * stdout, which the command hands back; or, with the token, the proof on
 * the connection, which then carries our frames too. */
static int answer(int fd, const char *hex, const char *token_file,
                  const char *host)
{
    uint8_t token[HVD_CONNECT_TOKEN_LEN], mac[HVD_MAC_LEN];
    char line[sizeof(HVD_CONNECT_PROOF) + 256 + 2 * HVD_MAC_LEN + 2];
    char machex[2 * HVD_MAC_LEN + 1];
    int n;

    if (host && read_token(token_file, token) == 0 &&
        hvd_connect_proof(token, hex, host, mac) == 0) {
        hvd_hex_encode(mac, sizeof(mac), machex);
        n = snprintf(line, sizeof(line), "%s%.255s %s\n", HVD_CONNECT_PROOF,
                     host, machex);
        memset(token, 0, sizeof(token));
        return write(fd, line, (size_t)n) == n && dup2(fd, 1) == 1 ? 0 : -1;
    }
    n = snprintf(line, sizeof(line), "%s%s\n", HVD_CONNECT_GREETING, hex);
    return write(1, line, (size_t)n) == n ? 0 : -1;
}

int agent_connect(int argc, char **argv)
{
    char hex[HVD_CONNECT_CHALLENGE_HEX + 1];
    const char *why = "no address given", *token_file = NULL, *host = NULL;
    const char *port = NULL;
    int fd = -1, one = 1, first = argc;

    /* [--token-file PATH --host NAME] --connect PORT ADDR... */
    for (int i = 0; i + 1 < argc && first == argc; i++) {
        if (strcmp(argv[i], "--token-file") == 0)
            token_file = argv[++i];
        else if (strcmp(argv[i], "--host") == 0)
            host = argv[++i];
        else if (strcmp(argv[i], "--connect") == 0) {
            port = argv[i + 1];
            first = i + 2;
        }
    }
    for (int i = first; i < argc && fd < 0; i++) {
        fd = dial(argv[i], port);
        if (fd < 0)
            why = strerror(errno);
    }
    if (fd < 0) {
        hvd_log_error("cannot connect back to horovodrun at port %s of %s%s: "
                      "%s; the hosts must reach the launcher's host over TCP",
                      port ? port : "?", first < argc ? argv[first] : "?",
                      first + 1 < argc ? " (or its other addresses)" : "", why);
        return -1;
    }
    if (fcntl(fd, F_SETFL, 0) != 0 || read_challenge(fd, hex) != 0) {
        hvd_log_error("connected to horovodrun at port %s, but it sent no "
                      "challenge; is horovodrun as new as hvd-agent?",
                      port);
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (answer(fd, hex, token_file, host) != 0 || dup2(fd, 0) != 0) {
        hvd_log_error("cannot answer horovodrun's challenge: %s",
                      strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}
