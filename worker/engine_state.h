/* The engine's state, one member of hvd_ctx, grouped by who may touch it
 * (docs/engine.md tells the protocol). */
#ifndef HVD_ENGINE_STATE_H
#define HVD_ENGINE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/steady.h"

struct hvd_request;
struct hvd_work;
struct hvd_req;

/* A cycle's entry per rank (cycle.c), made at start: their messages and
 * what each holds. */
struct hvd_per_rank {
    size_t *lens, *nreqs;
    const uint8_t **msgs, **bits;
    struct hvd_req **reqs;
};

struct hvd_engine {
    /* Set by hvd__engine_start before the thread starts, then read-only:
     * anyone may read them without a lock. */
    pthread_t thread;
    int started;
    int wake_fd;   /* eventfd: new work or a new timeout for the thread */
    int inline_ok; /* callers may run the engine (not under MPI) */
    /* Busy-wait budget of whoever runs the engine, in microseconds,
     * between and within collectives: waking a sleeping thread costs
     * more than a small collective. */
    int spin_us;
    double cycle_ms;         /* least time between cycles this rank starts */
    size_t fusion_threshold; /* bytes; 0 disables fusion */

    /* Guarded by mu: the submission queue, and op->done's changes, which
     * cv announces to the callers waiting in hvd__engine_wait. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct hvd_request *head, *tail; /* submitted, not taken yet */

    /* Hints read without a lock, each written by one side only (but
     * pending, which changes under mu). A stale value costs a wake-up or
     * a short wait, never a lost op: each is read again, or a kick
     * follows, where it matters. */
    _Atomic int pending;      /* ops queued and not yet taken (submitters) */
    _Atomic int sleeping;     /* the thread is (about to be) asleep (thread) */
    _Atomic int nwaiting;     /* callers asleep on cv (callers) */
    _Atomic int thread_waits; /* the thread wants run_mu back (thread) */
    /* Until when a caller that ran the engine counts as about to run it
     * again (the caller that held run_mu last). */
    _Atomic int64_t inline_until_us;

    /* The engine itself: held by whoever takes submitted work and runs
     * cycles, the background thread or a caller waiting for its own
     * collective (engine.c's run_inline). Everything below is the
     * holder's, and so is the negotiation state of hvd_ctx. */
    pthread_mutex_t run_mu;
    int parked;     /* the thread sleeps without run_mu (set by the thread) */
    int peers_wake; /* and how the others' cycles wake it (HVD_SHM_WAKE_*) */
    struct hvd_request *stop; /* a shutdown request taken */

    /* The pending table (pending.c): parts taken and announced, or to be
     * announced in the next cycle, by name. */
    struct hvd_work **pend; /* hash chains by name and process set */
    size_t npend_slots;
    size_t npend;            /* parts in it */
    struct hvd_work **fresh; /* not announced yet, in submission order */
    size_t nfresh, fresh_cap;

    /* The cycle's (cycle.c). */
    int64_t last_cycle_us; /* when this rank's last cycle started */
    struct hvd_per_rank per_rank;
    struct hvd_steady steady;
    uint64_t eager_runs; /* allreduces folded from carried data, ever */
};

#endif
