/* The rank plan of an elastic job: the next assignment after hosts change. */
#include "launcher/lib/elastic_plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/errmsg.h"

void hr_eplan_init(struct hr_eplan *ep)
{
    if (ep == NULL)
        return;
    *ep = (struct hr_eplan){0};
    hvd_hostlist_init(&ep->hosts);
}

void hr_eplan_close(struct hr_eplan *ep)
{
    if (ep == NULL)
        return;
    hvd_hostlist_close(&ep->hosts);
    hvd_plan_close(&ep->plan);
    free(ep->prev_rank);
    free(ep->removed);
    hr_eplan_init(ep);
}

/* A host list's hosts sorted by name, for looking names up in O(log n). */
struct index {
    const struct hvd_hostlist *hl;
    const struct hvd_host **by;
};

static int cmp_host(const void *a, const void *b)
{
    return strcmp((*(const struct hvd_host *const *)a)->name,
                  (*(const struct hvd_host *const *)b)->name);
}

static int index_build(struct index *ix, const struct hvd_hostlist *hl)
{
    size_t i;

    ix->hl = hl;
    ix->by = malloc((hl->n ? hl->n : 1) * sizeof(*ix->by));
    if (ix->by == NULL)
        return HVD_ENOMEM;
    for (i = 0; i < hl->n; i++)
        ix->by[i] = &hl->hosts[i];
    if (hl->n > 1)
        qsort(ix->by, hl->n, sizeof(*ix->by), cmp_host);
    return 0;
}

/* The position of name in the indexed list, or -1. */
static long index_find(const struct index *ix, const char *name)
{
    size_t lo = 0;
    size_t hi = ix->hl->n;
    size_t mid;
    int c;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        c = strcmp(name, ix->by[mid]->name);
        if (c == 0)
            return (long)(ix->by[mid] - ix->hl->hosts);
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

/* Builds next's host order: prev's hosts still in avail, then new ones. */
static int order_hosts(struct hvd_hostlist *out, const struct hvd_hostlist *old,
                       const struct hvd_hostlist *avail)
{
    struct index in_avail = {0};
    struct index in_old = {0};
    long a;
    size_t i;
    int rc;

    rc = index_build(&in_avail, avail);
    if (rc == 0)
        rc = index_build(&in_old, old);
    for (i = 0; rc == 0 && i < old->n; i++) {
        a = index_find(&in_avail, old->hosts[i].name);
        if (a >= 0)
            rc = hvd_hostlist_add(out, avail->hosts[a].name,
                                  avail->hosts[a].slots);
    }
    for (i = 0; rc == 0 && i < avail->n; i++) {
        if (index_find(&in_old, avail->hosts[i].name) < 0)
            rc = hvd_hostlist_add(out, avail->hosts[i].name,
                                  avail->hosts[i].slots);
    }
    free(in_avail.by);
    free(in_old.by);
    return rc;
}

/*
 * Matches next's slots with prev's by host name and local rank, and fills
 * prev_rank, removed and the counts. A fixed plan groups each host's ranks
 * together in local rank order, so a host's slot l holds its first rank
 * plus l.
 */
static int match_slots(struct hr_eplan *next, const struct hr_eplan *prev)
{
    const struct hvd_plan *pp = &prev->plan;
    struct index in_prev = {0};
    int *first = NULL; /* per prev host: its first rank, or -1 */
    int *count = NULL; /* per prev host: its ranks */
    char *kept = NULL; /* per prev rank: still in a slot */
    const struct hvd_slot *s;
    long h;
    int r;
    int rc;

    next->prev_rank = malloc((size_t)next->plan.size * sizeof(int));
    first = malloc((prev->hosts.n ? prev->hosts.n : 1) * sizeof(int));
    count = calloc(prev->hosts.n ? prev->hosts.n : 1, sizeof(int));
    kept = calloc(pp->size ? (size_t)pp->size : 1, 1);
    if (next->prev_rank == NULL || first == NULL || count == NULL ||
        kept == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    rc = index_build(&in_prev, &prev->hosts);
    if (rc < 0)
        goto out;
    for (h = 0; (size_t)h < prev->hosts.n; h++)
        first[h] = -1;
    for (r = pp->size - 1; r >= 0; r--) {
        first[pp->ranks[r].host] = r;
        count[pp->ranks[r].host]++;
    }

    for (r = 0; r < next->plan.size; r++) {
        s = &next->plan.ranks[r];
        h = index_find(&in_prev, next->hosts.hosts[s->host].name);
        next->prev_rank[r] = -1;
        if (h >= 0 && s->local_rank < count[h]) {
            next->prev_rank[r] = first[h] + s->local_rank;
            kept[first[h] + s->local_rank] = 1;
            next->nkept++;
        } else {
            next->nnew++;
        }
    }
    next->nremoved = pp->size - next->nkept;
    next->removed =
        malloc((next->nremoved ? (size_t)next->nremoved : 1) * sizeof(int));
    if (next->removed == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    next->nremoved = 0;
    for (r = 0; r < pp->size; r++) {
        if (!kept[r])
            next->removed[next->nremoved++] = r;
    }
out:
    free(in_prev.by);
    free(first);
    free(count);
    free(kept);
    return rc;
}

int hr_eplan_next(struct hr_eplan *next, const struct hr_eplan *prev,
                  const struct hvd_hostlist *avail, int min_np, int max_np,
                  char *err, size_t errlen)
{
    static const struct hr_eplan none = {0};
    long slots;
    long size;
    int rc;

    rc = hvd_errmsg_start(err, errlen,
                          next != NULL && next->hosts.n == 0 &&
                              next->plan.size == 0 && avail != NULL &&
                              min_np >= 1);
    if (rc < 0)
        return rc;
    hr_eplan_init(next);
    if (prev == NULL)
        prev = &none;

    rc = order_hosts(&next->hosts, &prev->hosts, avail);
    if (rc < 0)
        goto out;
    slots = hvd_hostlist_slots(&next->hosts);
    size = slots;
    if (max_np >= 1 && size > max_np)
        size = max_np;
    if (size < min_np) {
        hvd_seterr(err, errlen,
                   "%ld slots are available on %zu hosts, fewer than the %d "
                   "processes needed",
                   slots, next->hosts.n, min_np);
        rc = HVD_ENOSLOTS;
        goto out;
    }
    if (size > INT_MAX) {
        hvd_seterr(err, errlen,
                   "%ld slots are more processes than one job can run; set "
                   "--max-np",
                   slots);
        rc = HVD_ERANGE;
        goto out;
    }
    rc = hvd_plan_build(&next->plan, &next->hosts, (int)size);
    if (rc == 0)
        rc = match_slots(next, prev);
    if (rc == 0 && prev->plan.size > 0 && next->nkept == 0) {
        hvd_seterr(err, errlen,
                   "no host of the previous assignment is left, so no "
                   "process holds the training state to broadcast");
        rc = HVD_EPEER;
    }
out:
    if (rc == HVD_ENOMEM)
        hvd_seterr(err, errlen, "out of memory");
    if (rc < 0)
        hr_eplan_close(next);
    return rc;
}

int hr_eplan_unchanged(const struct hr_eplan *next)
{
    int r;

    if (next == NULL || next->prev_rank == NULL || next->nnew != 0 ||
        next->nremoved != 0)
        return 0;
    for (r = 0; r < next->plan.size; r++) {
        if (next->prev_rank[r] != r)
            return 0;
    }
    return 1;
}
