/* The Gloo store's configuration: allowed peers, scopes and limits. */
#include "launcher/horovodrun/gloo_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "launcher/lib/errmsg.h"
#include "common/hvd_err.h"

/*
 * Defaults. Horovod's keys are short ("rank_12", "12") and its scope names
 * hold a host name (up to 253 bytes) and a process set's hash.
 */
#define DEF_NAME_MAX 512
/* Gloo's value for a rank: 136 bytes per peer, so 1 MiB is ~7700 peers. */
#define DEF_VALUE_MAX ((size_t)1 << 20)
/* A job of n ranks holds 2 keys per rank in each of 3 scopes. */
#define DEF_KEYS_MAX 65536
/* The full mesh of ~1000 ranks (136 n^2 bytes), and room beside it. */
#define DEF_BYTES_MAX ((size_t)256 << 20)
/* Horovod's requests are well under 1 KiB; libmicrohttpd's default is 32. */
#define DEF_REQUEST_MEM ((size_t)16 << 10)
/*
 * Past this many, connections wait in the listen queue rather than being
 * refused, and each costs a descriptor and up to request_mem.
 */
#define DEF_CONNS_MAX 1024
/* One host's ranks poll at once, each with one connection at a time. */
#define DEF_CONNS_PER_IP 256
/* Horovod's client sends its request right after connecting. */
#define DEF_IDLE_TIMEOUT 10

/* Sizing for hr_gloo_cfg_plan: gloo's tcp address is 136 bytes a pair. */
#define PEER_BYTES 160
/* A rank's "rank_<i>" key, its host name as value, and its own key. */
#define RANK_BYTES 512

static void *xrealloc_array(void *p, size_t *cap, size_t n, size_t elem)
{
    size_t c = *cap ? *cap * 2 : 16;

    if (n < *cap)
        return p;
    if (c > SIZE_MAX / elem)
        return NULL;
    p = realloc(p, c * elem);
    if (p != NULL)
        *cap = c;
    return p;
}

void hr_gloo_cfg_init(struct hr_gloo_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->limits.name_max = DEF_NAME_MAX;
    cfg->limits.value_max = DEF_VALUE_MAX;
    cfg->limits.keys_max = DEF_KEYS_MAX;
    cfg->limits.bytes_max = DEF_BYTES_MAX;
    cfg->limits.request_mem = DEF_REQUEST_MEM;
    cfg->limits.conns_max = DEF_CONNS_MAX;
    cfg->limits.conns_per_ip = DEF_CONNS_PER_IP;
    cfg->limits.idle_timeout = DEF_IDLE_TIMEOUT;
}

void hr_gloo_cfg_close(struct hr_gloo_cfg *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->ndecls; i++)
        free(cfg->decls[i].name);
    free(cfg->decls);
    free(cfg->peers);
    memset(cfg, 0, sizeof(*cfg));
}

/* The address of sa, IPv4-mapped IPv6 as IPv4. 0, or -1 for another
 * family. */
int hr_gloo__peer_key(const struct sockaddr *sa, socklen_t len,
                      struct hr_gloo_peer *k)
{
    memset(k, 0, sizeof(*k));
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        k->fam = 4;
        memcpy(k->a, &in->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            k->fam = 4;
            memcpy(k->a, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            k->fam = 6;
            memcpy(k->a, &in6->sin6_addr, 16);
        }
        return 0;
    }
    return -1;
}

void hr_gloo__peer_text(const struct hr_gloo_peer *k, char *out, size_t n)
{
    if (inet_ntop(k->fam == 4 ? AF_INET : AF_INET6, k->a, out, (socklen_t)n) ==
        NULL)
        snprintf(out, n, "an unknown address");
}

void hr_gloo__sockaddr_text(const struct sockaddr *sa, socklen_t len, char *out,
                            size_t n)
{
    struct hr_gloo_peer k;

    if (sa == NULL || hr_gloo__peer_key(sa, len, &k) != 0)
        snprintf(out, n, "an unknown address");
    else
        hr_gloo__peer_text(&k, out, n);
}

static int add_peer(struct hr_gloo_cfg *cfg, const struct sockaddr *sa,
                    socklen_t len)
{
    struct hr_gloo_peer k;
    void *p;

    if (hr_gloo__peer_key(sa, len, &k) != 0)
        return 0;
    p = xrealloc_array(cfg->peers, &cfg->peers_cap, cfg->npeers,
                       sizeof(*cfg->peers));
    if (p == NULL)
        return HVD_ENOMEM;
    cfg->peers = p;
    cfg->peers[cfg->npeers++] = k;
    return 0;
}

int hr_gloo_cfg_allow_host(struct hr_gloo_cfg *cfg, const char *name, char *err,
                           size_t errlen)
{
    struct addrinfo hints, *res = NULL, *ai;
    const char *at;
    char q[HVD_QUOTE_MAX + 1];
    int rc, gai;

    if ((rc = hvd_errmsg_start(err, errlen, cfg != NULL && name != NULL)))
        return rc;
    /* Host specs may name the SSH user; the address is what follows. */
    at = strrchr(name, '@');
    if (at != NULL)
        name = at + 1;
    if (name[0] == '\0') {
        hvd_seterr(err, errlen, "empty host name");
        return HVD_EINVAL;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    gai = getaddrinfo(name, NULL, &hints, &res);
    if (gai != 0) {
        hvd_quote(q, name, strlen(name));
        hvd_seterr(err, errlen, "cannot resolve host '%s': %s", q,
                   gai_strerror(gai));
        return gai == EAI_MEMORY ? HVD_ENOMEM : HVD_ESYS;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next)
        if ((rc = add_peer(cfg, ai->ai_addr, ai->ai_addrlen)) != 0) {
            hvd_seterr(err, errlen, "out of memory");
            goto out;
        }
out:
    freeaddrinfo(res);
    return rc;
}

int hr_gloo_cfg_allow_self(struct hr_gloo_cfg *cfg, char *err, size_t errlen)
{
    struct ifaddrs *ifs = NULL, *i;
    struct sockaddr_in lo4;
    struct sockaddr_in6 lo6;
    int rc;

    if ((rc = hvd_errmsg_start(err, errlen, cfg != NULL)))
        return rc;
    /* Loopback is this machine's even where no interface lists it. */
    memset(&lo4, 0, sizeof(lo4));
    lo4.sin_family = AF_INET;
    lo4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&lo6, 0, sizeof(lo6));
    lo6.sin6_family = AF_INET6;
    lo6.sin6_addr = in6addr_loopback;
    if ((rc = add_peer(cfg, (struct sockaddr *)&lo4, sizeof(lo4))) != 0 ||
        (rc = add_peer(cfg, (struct sockaddr *)&lo6, sizeof(lo6))) != 0)
        goto nomem;
    if (getifaddrs(&ifs) != 0) {
        hvd_seterr(err, errlen, "cannot list this host's addresses: %s",
                   strerror(errno));
        rc = HVD_ESYS;
        goto out;
    }
    for (i = ifs; i != NULL; i = i->ifa_next) {
        socklen_t len;
        if (i->ifa_addr == NULL)
            continue;
        if (i->ifa_addr->sa_family == AF_INET)
            len = sizeof(struct sockaddr_in);
        else if (i->ifa_addr->sa_family == AF_INET6)
            len = sizeof(struct sockaddr_in6);
        else
            continue;
        if ((rc = add_peer(cfg, i->ifa_addr, len)) != 0)
            goto nomem;
    }
    goto out;
nomem:
    hvd_seterr(err, errlen, "out of memory");
out:
    if (ifs != NULL)
        freeifaddrs(ifs);
    return rc;
}

/* Scope and key names end at '/' and must survive a log line. */
int hr_gloo__name_ok(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == 0x7f || ch == '/')
            return 0;
    }
    return 1;
}

static int add_decl(struct hr_gloo_cfg *cfg, const char *prefix,
                    const char *name, int size, char *err, size_t errlen)
{
    size_t plen = strlen(prefix), nlen = strlen(name);
    char q[HVD_QUOTE_MAX + 1];
    char *s;
    void *p;

    if (!hr_gloo__name_ok(name, nlen) || size < 1) {
        hvd_quote(q, name, nlen);
        hvd_seterr(err, errlen, "cannot declare Gloo scope '%s%s' of %d ranks",
                   prefix, q, size);
        return HVD_EINVAL;
    }
    p = xrealloc_array(cfg->decls, &cfg->decls_cap, cfg->ndecls,
                       sizeof(*cfg->decls));
    if (p == NULL)
        goto nomem;
    cfg->decls = p;
    s = malloc(plen + nlen + 1);
    if (s == NULL)
        goto nomem;
    memcpy(s, prefix, plen);
    memcpy(s + plen, name, nlen + 1);
    cfg->decls[cfg->ndecls].name = s;
    cfg->decls[cfg->ndecls].size = size;
    cfg->ndecls++;
    return 0;
nomem:
    hvd_seterr(err, errlen, "out of memory");
    return HVD_ENOMEM;
}

int hr_gloo_cfg_scope(struct hr_gloo_cfg *cfg, const char *name, int size,
                      char *err, size_t errlen)
{
    int rc;

    if ((rc = hvd_errmsg_start(err, errlen, cfg != NULL && name != NULL)))
        return rc;
    return add_decl(cfg, "", name, size, err, errlen);
}

static void raise_to(size_t *lim, uint64_t want)
{
    if (want > SIZE_MAX)
        want = SIZE_MAX;
    if (*lim < want)
        *lim = (size_t)want;
}

/* Bytes a scope of n ranks holds at most: each rank's full-mesh value. */
static uint64_t scope_bytes(uint64_t n)
{
    /* Past 2^24 ranks the product could overflow; it is all memory then. */
    if (n > ((uint64_t)1 << 24))
        return UINT64_MAX / 8;
    return n * (PEER_BYTES * (n - 1) + RANK_BYTES);
}

int hr_gloo_cfg_plan(struct hr_gloo_cfg *cfg, const struct hvd_plan *p,
                     const struct hvd_hostlist *hl, char *err, size_t errlen)
{
    int *cross = NULL; /* cross size of each local rank */
    int rc, lmax = 0;
    uint64_t bytes, keys;
    char num[24];
    size_t conns;

    if ((rc = hvd_errmsg_start(err, errlen,
                               cfg != NULL && p != NULL && hl != NULL &&
                                   p->size > 0)))
        return rc;
    if ((rc = add_decl(cfg, "", "global", p->size, err, errlen)) != 0)
        goto out;
    bytes = scope_bytes((uint64_t)p->size);
    keys = 2 * (uint64_t)p->size;
    for (size_t h = 0; h < hl->n; h++) {
        int n = hvd_plan_host_ranks(p, (int)h);
        if (n <= 0)
            continue;
        if ((rc = add_decl(cfg, "local_", hl->hosts[h].name, n, err, errlen)) !=
            0)
            goto out;
        bytes += scope_bytes((uint64_t)n);
        keys += 2 * (uint64_t)n;
    }
    for (int r = 0; r < p->size; r++)
        if (p->ranks[r].local_rank + 1 > lmax)
            lmax = p->ranks[r].local_rank + 1;
    cross = calloc((size_t)lmax, sizeof(*cross));
    if (cross == NULL) {
        hvd_seterr(err, errlen, "out of memory");
        rc = HVD_ENOMEM;
        goto out;
    }
    for (int r = 0; r < p->size; r++)
        cross[p->ranks[r].local_rank] = p->ranks[r].cross_size;
    for (int lr = 0; lr < lmax; lr++) {
        if (cross[lr] <= 0)
            continue;
        snprintf(num, sizeof(num), "%d", lr);
        if ((rc = add_decl(cfg, "cross_", num, cross[lr], err, errlen)) != 0)
            goto out;
        bytes += scope_bytes((uint64_t)cross[lr]);
        keys += 2 * (uint64_t)cross[lr];
    }
    /*
     * Process sets rendezvous in ad-hoc scopes of their own, at most as
     * large as these, while these may still be held: hence twice.
     */
    raise_to(&cfg->limits.value_max,
             PEER_BYTES * (uint64_t)p->size + RANK_BYTES);
    raise_to(&cfg->limits.bytes_max, 2 * bytes);
    raise_to(&cfg->limits.keys_max, 2 * keys);
    conns = cfg->limits.conns_per_ip;
    raise_to(&conns, 2 * (uint64_t)lmax);
    if (conns > cfg->limits.conns_max)
        conns = cfg->limits.conns_max;
    if (conns > cfg->limits.conns_per_ip)
        cfg->limits.conns_per_ip = (unsigned)conns;
out:
    free(cross);
    return rc;
}
