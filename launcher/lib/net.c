/* Local-host detection, free ports, interface and route addresses. */
#include "launcher/lib/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "launcher/lib/strvec.h"

int hr_host_is_local(const char *name)
{
    static const char *fixed[] = {"localhost", "127.0.0.1", "::1"};
    char self[256] = "";

    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (strcmp(name, fixed[i]) == 0)
            return 1;
    if (gethostname(self, sizeof(self) - 1) != 0)
        return 0;
    if (strcmp(name, self) == 0)
        return 1;
    /* "node1" and "node1.cluster" name the same machine. */
    size_t sl = strcspn(self, "."), nl = strcspn(name, ".");
    if (sl == nl && strncmp(self, name, sl) == 0 &&
        (self[sl] == '\0' || name[nl] == '\0'))
        return 1;
    /* The canonical name, for hosts known by their FQDN. */
    struct addrinfo hints = {.ai_flags = AI_CANONNAME};
    struct addrinfo *ai = NULL;
    int local = 0;
    if (getaddrinfo(self, NULL, &hints, &ai) == 0 && ai && ai->ai_canonname)
        local = strcmp(ai->ai_canonname, name) == 0;
    if (ai)
        freeaddrinfo(ai);
    return local;
}

int hr_free_port(void)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = HVD_ESYS;

    if (fd < 0) {
        /* No IPv6: ask IPv4. */
        struct sockaddr_in a4 = {.sin_family = AF_INET};
        socklen_t len4 = sizeof(a4);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && bind(fd, (struct sockaddr *)&a4, sizeof(a4)) == 0 &&
            getsockname(fd, (struct sockaddr *)&a4, &len4) == 0)
            port = ntohs(a4.sin_port);
    } else if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
               getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        port = ntohs(a.sin6_port);
    }
    if (fd >= 0)
        close(fd);
    return port;
}

/* The address inside an AF_INET or AF_INET6 sockaddr, for inet_ntop. */
static const void *in_addr_of(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    return &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
}

int hr_net_if_addr(const char *ifname, char *out, size_t len)
{
    struct ifaddrs *ifs = NULL;
    int found = 0;

    if (getifaddrs(&ifs) != 0)
        return -1;
    /* Two passes: an IPv4 address wins over an IPv6 one. */
    for (int pass = 0; pass < 2 && !found; pass++) {
        int family = pass == 0 ? AF_INET : AF_INET6;
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
            if (i->ifa_addr == NULL || strcmp(i->ifa_name, ifname) != 0 ||
                i->ifa_addr->sa_family != family)
                continue;
            found = inet_ntop(family, in_addr_of(i->ifa_addr), out,
                              (socklen_t)len) != NULL;
        }
    }
    freeifaddrs(ifs);
    return found ? 0 : -1;
}

int hr_net_addr_if(const char *addr, char *out, size_t len)
{
    struct ifaddrs *ifs = NULL;
    char text[INET6_ADDRSTRLEN];
    int found = 0;

    if (getifaddrs(&ifs) != 0)
        return -1;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                    i->ifa_addr->sa_family != AF_INET6))
            continue;
        socklen_t sl = i->ifa_addr->sa_family == AF_INET
                           ? sizeof(struct sockaddr_in)
                           : sizeof(struct sockaddr_in6);
        if (getnameinfo(i->ifa_addr, sl, text, sizeof(text), NULL, 0,
                        NI_NUMERICHOST) == 0 &&
            strcmp(text, addr) == 0)
            found = snprintf(out, len, "%s", i->ifa_name) < (int)len;
    }
    freeifaddrs(ifs);
    return found ? 0 : -1;
}

int hr_net_route_addr(const char *host, char *out, size_t len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
    struct sockaddr_storage me;
    socklen_t melen = sizeof(me);
    int fd = -1, ok = 0;

    /* A UDP connect sends nothing; it only picks the route and source. */
    if (getaddrinfo(host, "9", &hints, &res) == 0) {
        fd = socket(res->ai_family, SOCK_DGRAM, 0);
        ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&me, &melen) == 0 &&
             getnameinfo((struct sockaddr *)&me, melen, out, (socklen_t)len,
                         NULL, 0, NI_NUMERICHOST) == 0;
    }
    if (fd >= 0)
        close(fd);
    if (res != NULL)
        freeaddrinfo(res);
    if (!ok)
        snprintf(out, len, "route to %s", host);
    return ok ? 0 : 1;
}

/* Whether addr is already one of the first n words of v. */
static int listed(const struct hvd_strvec *v, const char *addr)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->v[i], addr) == 0)
            return 1;
    return 0;
}

int hr_net_addrs_toward(const char *host, struct hvd_strvec *out, size_t max)
{
    struct ifaddrs *ifs = NULL;
    char text[INET6_ADDRSTRLEN];
    int rc = 0;

    if (hr_net_route_addr(host, text, sizeof(text)) == 0)
        rc = hvd_strvec_push(out, text);
    if (rc == 0 && getifaddrs(&ifs) == 0) {
        /* IPv4 first; no link-local IPv6 (it needs a scope there). */
        for (int pass = 0; pass < 2; pass++)
            for (struct ifaddrs *i = ifs; i && rc == 0 && out->n < max;
                 i = i->ifa_next) {
                int family = pass == 0 ? AF_INET : AF_INET6;
                if (i->ifa_addr == NULL || i->ifa_addr->sa_family != family ||
                    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
                    continue;
                const void *a = in_addr_of(i->ifa_addr);
                if (family == AF_INET6 &&
                    IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a))
                    continue;
                if (inet_ntop(family, a, text, sizeof(text)) != NULL &&
                    !listed(out, text))
                    rc = hvd_strvec_push(out, text);
            }
        freeifaddrs(ifs);
    }
    if (rc == 0 && out->n < max && !listed(out, "127.0.0.1"))
        rc = hvd_strvec_push(out, "127.0.0.1");
    return rc;
}
