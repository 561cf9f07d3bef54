/* Horovod's Gloo rendezvous: a bounded HTTP key-value store. */
#ifndef HR_GLOO_STORE_H
#define HR_GLOO_STORE_H

#include <stddef.h>
#include <sys/socket.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"

/*
 * Ranks that link real Horovod (built with Gloo) meet through this store:
 * GET /<scope>/<key> answers 200 with the value or 404 while it is
 * missing, PUT stores the body, and DELETE /<scope>/<rank> tells that a
 * rank is done with a scope. A scope declared with a size (Horovod's
 * "global", "local_<host>" and "cross_<local_rank>") is emptied once that
 * many distinct ranks are done with it; in any other scope DELETE removes
 * the one key. Horovod's own store has no authentication, so this one only
 * accepts connections from addresses the caller allows, and bounds what
 * those peers can make it hold.
 */

/* What peers of the store may make it hold or do. None may be 0. */
struct hr_gloo_limits {
    size_t name_max;       /* bytes of a scope name, and of a key */
    size_t value_max;      /* bytes of one value */
    size_t keys_max;       /* keys held at once, in all scopes */
    size_t bytes_max;      /* bytes of keys and values held at once */
    size_t request_mem;    /* per connection (URL, headers); >= 4 KiB */
    unsigned conns_max;    /* open connections; more wait to be accepted */
    unsigned conns_per_ip; /* open connections from one peer address */
    unsigned idle_timeout; /* seconds an idle connection stays open */
};

/* An allowed peer address: IPv4 in the first 4 bytes (fam 4), or IPv6. */
struct hr_gloo_peer {
    unsigned char fam;
    unsigned char a[16];
    unsigned conns; /* open connections from it, in the store's thread */
};

/* A scope declared with the number of ranks that use it. */
struct hr_gloo_decl {
    char *name;
    int size;
};

struct hr_gloo_cfg {
    struct hr_gloo_limits limits; /* the caller may change them */
    /*
     * Whether a connection stays open for another request. Horovod's
     * client opens a connection per request and polls every 10 ms; when
     * the client closes first, each poll leaves a port of the rank's host
     * in TIME_WAIT for a minute, and a host with many ranks runs out of
     * them. Closing from this side, as Horovod's own server does, leaves
     * most of the TIME_WAIT here instead. Off by default.
     */
    int keep_alive;
    /* Private: filled by the functions below. */
    struct hr_gloo_peer *peers;
    size_t npeers, peers_cap;
    struct hr_gloo_decl *decls;
    size_t ndecls, decls_cap;
};

/*
 * Limits for a job of about a thousand ranks; hr_gloo_cfg_plan() raises
 * them for a larger job.
 */
void hr_gloo_cfg_init(struct hr_gloo_cfg *cfg);
/* Frees what the cfg holds. NULL is ok. */
void hr_gloo_cfg_close(struct hr_gloo_cfg *cfg);

/*
 * Allows connections from every address name resolves to (a "user@"
 * prefix is ignored). Exact addresses only, not their subnets. 0, or
 * HVD_EINVAL, HVD_ENOMEM or HVD_ESYS (unresolvable) with a message in err.
 */
int hr_gloo_cfg_allow_host(struct hr_gloo_cfg *cfg, const char *name, char *err,
                           size_t errlen);
/* Allows this machine's own interface addresses, loopback included. */
int hr_gloo_cfg_allow_self(struct hr_gloo_cfg *cfg, char *err, size_t errlen);

/*
 * Declares a scope that size ranks use: DELETE /<name>/<rank> marks the
 * rank done, and once all size ranks are done the scope is emptied. A name
 * declared twice with different sizes fails hr_gloo_store_start().
 */
int hr_gloo_cfg_scope(struct hr_gloo_cfg *cfg, const char *name, int size,
                      char *err, size_t errlen);
/*
 * Declares Horovod's scopes for the rank plan: "global", "local_<host>"
 * for each host that has ranks (the host's name as the ranks get it in
 * HOROVOD_HOSTNAME), "cross_<local_rank>" for each local rank. Raises the
 * limits to what such a job needs: Gloo's full mesh stores a value of
 * about 136 bytes per peer for each rank of a scope, so a scope of n
 * ranks holds about 136 n^2 bytes.
 */
int hr_gloo_cfg_plan(struct hr_gloo_cfg *cfg, const struct hvd_plan *p,
                     const struct hvd_hostlist *hl, char *err, size_t errlen);

struct hr_gloo_store;

/*
 * Listens on addr (an IPv4 or IPv6 literal) at port (0: any free port),
 * and serves from a thread of its own until hr_gloo_store_close(). The
 * port it listens on goes to *port_out. cfg may be closed afterwards.
 * Horovod's client speaks IPv4 only. 0, or HVD_EINVAL, HVD_EDUP (a scope
 * declared with two sizes), HVD_ENOMEM or HVD_ESYS with a message in err.
 */
int hr_gloo_store_start(struct hr_gloo_store **out,
                        const struct hr_gloo_cfg *cfg, const char *addr,
                        int port, int *port_out, char *err, size_t errlen);
/*
 * Stops serving, closes the connections and frees the store. Tells how
 * many refusals went unlogged. NULL is ok.
 */
void hr_gloo_store_close(struct hr_gloo_store *s);
/*
 * Connections and requests refused so far: peers not allowed or over
 * their connection limit, malformed or too large requests, a full store.
 * Safe from any thread.
 */
unsigned long hr_gloo_store_refusals(const struct hr_gloo_store *s);

/* Shared by gloo_cfg.c and gloo_store.c, not for callers. */

/* The address of sa in *k, IPv4-mapped IPv6 as IPv4. 0, or -1 for another
 * family. */
int hr_gloo__peer_key(const struct sockaddr *sa, socklen_t len,
                      struct hr_gloo_peer *k);
/* k as text, for messages. */
void hr_gloo__peer_text(const struct hr_gloo_peer *k, char *out, size_t n);
void hr_gloo__sockaddr_text(const struct sockaddr *sa, socklen_t len, char *out,
                            size_t n);
/* Whether s[0..n) can be a scope or key name: not empty, no '/', no
 * blanks or control bytes (it must survive a log line). */
int hr_gloo__name_ok(const char *s, size_t n);

#endif
