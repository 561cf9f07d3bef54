/* The rank plan: which rank runs where, Horovod's way. */
#include "launcher/lib/plan.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "launcher/lib/errcode.h"

int hvd_plan_build(struct hvd_plan *p, const struct hvd_hostlist *hl, int np)
{
    struct hvd_slot *ranks = NULL;
    int *cross = NULL; /* per local_rank: hosts seen so far that have it */
    int max_local = 0;
    int placed = 0;
    int i;
    int take;
    int r;
    size_t h;
    int rc = 0;

    if (p == NULL)
        return HVD_EINVAL;
    p->ranks = NULL;
    p->size = 0;
    if (hl == NULL || np < 1)
        return HVD_EINVAL;
    if (hvd_hostlist_slots(hl) < np)
        return HVD_ENOSLOTS;
    if ((size_t)np > SIZE_MAX / sizeof(*ranks))
        return HVD_ENOMEM;

    ranks = malloc((size_t)np * sizeof(*ranks));
    if (ranks == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }

    /* Fill each host's slots in turn until np ranks are placed. */
    for (h = 0; h < hl->n && placed < np; h++) {
        if (hl->hosts[h].slots < 1)
            continue;
        if (h > INT_MAX) {
            rc = HVD_ERANGE;
            goto out;
        }
        take = hl->hosts[h].slots;
        if (take > np - placed)
            take = np - placed;
        for (r = 0; r < take; r++) {
            ranks[placed + r].rank = placed + r;
            ranks[placed + r].host = (int)h;
            ranks[placed + r].local_rank = r;
            ranks[placed + r].local_size = take;
        }
        if (take > max_local)
            max_local = take;
        placed += take;
    }

    /*
     * Ranks are grouped by host in host order, so one pass that counts, per
     * local_rank, the hosts seen so far gives each rank its cross_rank; the
     * final counts are the cross sizes. O(np) time and memory.
     */
    cross = calloc((size_t)max_local, sizeof(*cross));
    if (cross == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    for (i = 0; i < np; i++)
        ranks[i].cross_rank = cross[ranks[i].local_rank]++;
    for (i = 0; i < np; i++)
        ranks[i].cross_size = cross[ranks[i].local_rank];

    p->ranks = ranks;
    p->size = np;
    ranks = NULL;
out:
    free(cross);
    free(ranks);
    return rc;
}

void hvd_plan_close(struct hvd_plan *p)
{
    if (p == NULL)
        return;
    free(p->ranks);
    p->ranks = NULL;
    p->size = 0;
}

int hvd_plan_host_ranks(const struct hvd_plan *p, int h)
{
    int count = 0;
    int i;

    if (p == NULL || p->ranks == NULL)
        return 0;
    for (i = 0; i < p->size; i++) {
        if (p->ranks[i].host == h)
            count++;
    }
    return count;
}
