/* A rank that joins and then says nothing to the rendezvous server for
 * argv[1] seconds before an allreduce: a registered rank must not be timed
 * out however quiet it is. It also reports whether the server still
 * listens once every rank has joined (it should: a rank may shut down and
 * join again). */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hvd.h"

/* "closed" when nothing accepts connections at the rendezvous port. */
static const char *rendezvous_port(void)
{
    const char *addr = getenv("HOROVOD_RENDEZVOUS_ADDR");
    const char *port = getenv("HOROVOD_RENDEZVOUS_PORT");
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    const char *state = "unknown";

    if (addr == NULL || port == NULL ||
        getaddrinfo(addr, port, &hints, &ai) != 0)
        return state;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0) {
        int refused = connect(fd, ai->ai_addr, ai->ai_addrlen) != 0;
        state = refused ? "closed" : "open";
        close(fd);
    }
    freeaddrinfo(ai);
    return state;
}

int main(int argc, char **argv)
{
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    if (hvd_init() != 0) {
        printf("rdvidle: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    int rank = hvd_rank();
    sleep(argc > 1 ? (unsigned)atoi(argv[1]) : 7);
    printf("rdvidle: rank %d: rendezvous port %s\n", rank, rendezvous_port());
    int rc = hvd_allreduce(in, out, 4, HVD_FLOAT32, HVD_SUM, "idle.sum");
    printf("rdvidle: rank %d: %s: %g %g %g %g\n", rank, hvd_err_name(rc),
           (double)out[0], (double)out[1], (double)out[2], (double)out[3]);
    fflush(stdout);
    return rc != 0 || hvd_shutdown() != 0;
}
