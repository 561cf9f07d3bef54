/* Blacklisting of an elastic job's failed hosts, with Horovod's cooldown. */
#ifndef HR_BLACKLIST_H
#define HR_BLACKLIST_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/lib/hostspec.h"

/*
 * The bounds Horovod puts on --blacklist-cooldown-range MIN MAX, in
 * seconds: MIN may not be below the first, MAX not above the second.
 */
#define HR_BLACKLIST_COOLDOWN_MIN_S 1
#define HR_BLACKLIST_COOLDOWN_MAX_S 3600

/* What the blacklist knows of one host that failed at least once. */
struct hr_blacklist_host {
    char *name;
    int blacklisted;   /* out of the job until a cooldown ends */
    unsigned failures; /* failures that started a cooldown */
    uint64_t until_ms; /* the cooldown's end; 0 when there is none */
};

/*
 * The job's blacklist. Time is the caller's: every call that needs it
 * takes now_ms from one monotonic clock (the controller's uv_now()), and
 * the jitter comes from the caller too, so that this module has no clock
 * and no random numbers and its tests are exact.
 *
 * Without a cooldown range a failed host stays out for the rest of the
 * job, as in Horovod. That is Horovod bug #1926: on clusters that reuse
 * host names (Kubernetes pods, autoscaled groups) a replacement machine
 * with the failed one's name is never used. A range fixes it: a host's
 * n-th blacklisting (n = 1, 2, ...) keeps it out for
 *
 *     max(MIN, min(MAX, MIN * 2^n + u * MIN))  seconds,  u in [0, 1),
 *
 * which is Horovod's formula: the first failure costs between 2 and 3
 * times MIN, each later one doubles that, and MAX caps it. Failures while
 * the host is cooling down add nothing (a host whose four ranks fail at
 * once is one failure). When the cooldown has ended, the host is
 * "resurrected": the next discovery that lists it takes it back
 * (hr_blacklist_filter), and its count of failures stays, so that a host
 * that keeps failing stays out longer each time.
 */
struct hr_blacklist {
    struct hr_blacklist_host *hosts;
    size_t n;
    size_t cap;
    int min_s; /* the cooldown range; 0 without one */
    int max_s;
};

void hr_blacklist_init(struct hr_blacklist *bl);
/* Frees the hosts; NULL is a no-op. */
void hr_blacklist_close(struct hr_blacklist *bl);

/*
 * Sets the cooldown range, before any host is blacklisted. HVD_ERANGE if
 * min_s is below HR_BLACKLIST_COOLDOWN_MIN_S or max_s above
 * HR_BLACKLIST_COOLDOWN_MAX_S, as Horovod refuses them. Horovod accepts
 * min_s > max_s, and then every cooldown is min_s long (its clamp lets MIN
 * win); this module does the same, and leaves refusing it to the CLI.
 */
int hr_blacklist_set_cooldown(struct hr_blacklist *bl, int min_s, int max_s);

/*
 * Blacklists host name after a failure at now_ms. u, in [0, 1), is the
 * jitter (HVD_EINVAL outside it). With a cooldown range, starts a cooldown
 * unless one is running. *until_ms, if not NULL, gets the end of the
 * host's cooldown, or 0 when the host is out for good.
 */
int hr_blacklist_add(struct hr_blacklist *bl, const char *name, uint64_t now_ms,
                     double u, uint64_t *until_ms);

/* True while name is blacklisted, even after its cooldown has ended and
 * until a discovery takes it back, as Horovod's is_blacklisted(). */
int hr_blacklist_has(const struct hr_blacklist *bl, const char *name);

/* True if name's cooldown has ended at now_ms and no discovery has taken
 * it back yet. */
int hr_blacklist_resurrected(const struct hr_blacklist *bl, const char *name,
                             uint64_t now_ms);

/*
 * Applies the blacklist to a discovery at now_ms: copies into avail, which
 * must be empty, the hosts of found, in found's order, that are not
 * blacklisted or whose cooldown has ended; the latter are taken back (no
 * longer blacklisted). *resurrected, if not NULL, gets how many came back:
 * Horovod counts that as hosts added. On failure avail is left empty.
 */
int hr_blacklist_filter(struct hr_blacklist *bl,
                        const struct hvd_hostlist *found, uint64_t now_ms,
                        struct hvd_hostlist *avail, int *resurrected);

#endif
