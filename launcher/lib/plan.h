/* The rank plan: which rank runs where, Horovod's way. */
#ifndef HVD_PLAN_H
#define HVD_PLAN_H

#include "launcher/lib/hostspec.h"

struct hvd_slot {
    int rank;
    int host; /* index into the host list */
    int local_rank;
    int local_size;
    int cross_rank; /* position among hosts that have this local_rank */
    int cross_size; /* number of hosts that have this local_rank */
};

struct hvd_plan {
    struct hvd_slot *ranks; /* size entries, by rank */
    int size;
};

/*
 * Fills hosts in the order given, each host's slots in turn, until np ranks
 * are placed. HVD_EINVAL if np < 1, HVD_ENOSLOTS if np exceeds the slots.
 */
int hvd_plan_build(struct hvd_plan *p, const struct hvd_hostlist *hl, int np);
void hvd_plan_close(struct hvd_plan *p);
/* Number of ranks placed on host index h. */
int hvd_plan_host_ranks(const struct hvd_plan *p, int h);

#endif
