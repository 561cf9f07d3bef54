/* The rank plan of an elastic job: the next assignment after hosts change. */
#ifndef HR_ELASTIC_PLAN_H
#define HR_ELASTIC_PLAN_H

#include <stddef.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"

/*
 * One assignment of an elastic job and how it follows from the one before.
 * A slot is a host and a local rank; a process lives in its slot for its
 * whole life, and across a reset only its rank, size and cross values
 * change.
 */
struct hr_eplan {
    /* Every available host in assignment order, with its slots, including
     * hosts left without ranks by --max-np: their place in the order
     * counts at the next change. */
    struct hvd_hostlist hosts;
    /* The ranks, as the fixed plan makes them; .host indexes hosts. */
    struct hvd_plan plan;
    /* plan.size entries: the rank the slot's process had in the previous
     * assignment, or -1 where a new process must start. */
    int *prev_rank;
    /* The previous assignment's ranks whose slot is gone: their processes
     * must stop. nremoved entries, ascending. */
    int *removed;
    int nremoved;
    int nkept; /* slots whose process goes on */
    int nnew;  /* slots that need a new process */
};

void hr_eplan_init(struct hr_eplan *ep);
/* Frees everything; the plan is empty and reusable. NULL is a no-op. */
void hr_eplan_close(struct hr_eplan *ep);

/*
 * Computes into next (empty: fresh from hr_eplan_init or closed) the
 * assignment that follows prev when the available hosts are avail: the
 * discovered hosts, in the discovery's order, with the blacklist already
 * applied (hr_blacklist_filter). prev is NULL, or an empty plan, for the
 * job's first assignment.
 *
 * As Horovod does: the hosts of prev that are still available keep their
 * order, and take their current slot counts; new hosts follow in avail's
 * order. Ranks fill that order as hvd_plan_build fills a fixed job's hosts,
 * so the surviving processes take the lowest ranks and rank 0, which
 * broadcasts the state, stays on the oldest surviving host. The size is
 * every available slot, at most max_np (max_np < 1: no limit).
 *
 * min_np is the fewest processes to run: Horovod waits for -np slots
 * before the first assignment and for --min-np before each later one, so
 * the caller passes those. Fewer slots returns HVD_ENOSLOTS, which the
 * caller retries at each discovery until its elastic timeout.
 *
 * HVD_EPEER if prev had ranks and none of its slots has one now: no
 * process holds the training state to broadcast to the new ones, and
 * Horovod stops the job. HVD_ERANGE if the size would not fit an int
 * (no --max-np and absurd slot counts). HVD_EINVAL on bad arguments,
 * HVD_ENOMEM. Every
 * failure but HVD_EINVAL writes one line into err and leaves next empty.
 */
int hr_eplan_next(struct hr_eplan *next, const struct hr_eplan *prev,
                  const struct hvd_hostlist *avail, int min_np, int max_np,
                  char *err, size_t errlen);

/*
 * True if next assigns exactly what the plan before it did: the same
 * slots with the same ranks. Horovod then neither notifies the workers
 * nor resets; a discovery that only adds hosts beyond --max-np is one.
 */
int hr_eplan_unchanged(const struct hr_eplan *next);

#endif
