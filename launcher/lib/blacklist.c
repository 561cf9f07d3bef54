/* Blacklisting of an elastic job's failed hosts, with Horovod's cooldown. */
#include "launcher/lib/blacklist.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"

void hr_blacklist_init(struct hr_blacklist *bl)
{
    if (bl == NULL)
        return;
    *bl = (struct hr_blacklist){0};
}

void hr_blacklist_close(struct hr_blacklist *bl)
{
    size_t i;

    if (bl == NULL)
        return;
    for (i = 0; i < bl->n; i++)
        free(bl->hosts[i].name);
    free(bl->hosts);
    hr_blacklist_init(bl);
}

int hr_blacklist_set_cooldown(struct hr_blacklist *bl, int min_s, int max_s)
{
    if (bl == NULL)
        return HVD_EINVAL;
    if (min_s < HR_BLACKLIST_COOLDOWN_MIN_S ||
        max_s > HR_BLACKLIST_COOLDOWN_MAX_S)
        return HVD_ERANGE;
    bl->min_s = min_s;
    bl->max_s = max_s;
    return 0;
}

/* The host's entry, or NULL. Only failed hosts have one, and they are few,
 * so a linear search is enough. */
static struct hr_blacklist_host *find(const struct hr_blacklist *bl,
                                      const char *name)
{
    size_t i;

    for (i = 0; i < bl->n; i++) {
        if (strcmp(bl->hosts[i].name, name) == 0)
            return &bl->hosts[i];
    }
    return NULL;
}

/* The length of the host's next cooldown, in milliseconds. */
static uint64_t cooldown_ms(const struct hr_blacklist *bl, unsigned n, double u)
{
    double s = bl->min_s;
    unsigned k;

    /* Doubling stops once past MAX, which caps the result anyway; so no
     * count of failures can overflow it. */
    for (k = 0; k < n && s <= bl->max_s; k++)
        s *= 2;
    s += u * bl->min_s;

    /* Horovod caps at MAX first and then raises to MIN, so MIN wins if
     * the range is upside down. */
    if (s > bl->max_s)
        s = bl->max_s;
    if (s < bl->min_s)
        s = bl->min_s;
    return (uint64_t)(s * 1000.0);
}

int hr_blacklist_add(struct hr_blacklist *bl, const char *name, uint64_t now_ms,
                     double u, uint64_t *until_ms)
{
    struct hr_blacklist_host *h;
    size_t cap;

    if (bl == NULL || name == NULL || name[0] == '\0' || !(u >= 0.0) ||
        !(u < 1.0))
        return HVD_EINVAL;
    h = find(bl, name);
    if (h == NULL) {
        if (bl->n == bl->cap) {
            cap = bl->cap ? bl->cap * 2 : 8;
            h = realloc(bl->hosts, cap * sizeof(*h));
            if (h == NULL)
                return HVD_ENOMEM;
            bl->hosts = h;
            bl->cap = cap;
        }
        h = &bl->hosts[bl->n];
        *h = (struct hr_blacklist_host){0};
        h->name = strdup(name);
        if (h->name == NULL)
            return HVD_ENOMEM;
        bl->n++;
    }
    h->blacklisted = 1;
    /* A failure during a running cooldown is part of the same failure. */
    if (bl->min_s > 0 && h->until_ms <= now_ms) {
        h->failures++;
        h->until_ms = now_ms + cooldown_ms(bl, h->failures, u);
    }
    if (until_ms != NULL)
        *until_ms = h->until_ms;
    return 0;
}

int hr_blacklist_has(const struct hr_blacklist *bl, const char *name)
{
    const struct hr_blacklist_host *h;

    if (bl == NULL || name == NULL)
        return 0;
    h = find(bl, name);
    return h != NULL && h->blacklisted;
}

/* True if h's cooldown has ended by now_ms; never without a cooldown. */
static int ended(const struct hr_blacklist_host *h, uint64_t now_ms)
{
    return h->until_ms > 0 && h->until_ms <= now_ms;
}

int hr_blacklist_resurrected(const struct hr_blacklist *bl, const char *name,
                             uint64_t now_ms)
{
    const struct hr_blacklist_host *h;

    if (bl == NULL || name == NULL)
        return 0;
    h = find(bl, name);
    return h != NULL && h->blacklisted && ended(h, now_ms);
}

int hr_blacklist_filter(struct hr_blacklist *bl,
                        const struct hvd_hostlist *found, uint64_t now_ms,
                        struct hvd_hostlist *avail, int *resurrected)
{
    struct hr_blacklist_host *h;
    int back = 0;
    size_t i;
    int rc = 0;

    if (bl == NULL || found == NULL || avail == NULL || avail->n != 0)
        return HVD_EINVAL;
    for (i = 0; i < found->n; i++) {
        h = find(bl, found->hosts[i].name);
        if (h != NULL && h->blacklisted && !ended(h, now_ms))
            continue;
        rc = hvd_hostlist_add(avail, found->hosts[i].name,
                              found->hosts[i].slots);
        if (rc < 0)
            goto out;
    }
    /*
     * Only once the copy has succeeded are hosts taken back, so that a
     * failed call changes nothing. A resurrected host the discovery did
     * not list stays out until one does, as in Horovod.
     */
    for (i = 0; i < found->n; i++) {
        h = find(bl, found->hosts[i].name);
        if (h != NULL && h->blacklisted && ended(h, now_ms)) {
            h->blacklisted = 0;
            h->until_ms = 0;
            back++;
        }
    }
out:
    if (rc < 0)
        hvd_hostlist_close(avail);
    else if (resurrected != NULL)
        *resurrected = back;
    return rc;
}
