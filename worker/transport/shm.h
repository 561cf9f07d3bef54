/* Shared memory between the ranks of one host: one anonymous segment that
 * every local rank maps, per-rank sequence counters to synchronise on, and
 * eventfds to wake the ranks that sleep. */
#ifndef HVD_SHM_H
#define HVD_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hvd.h"
#include "worker/wait.h"
#include "worker/transport/ring.h"

/* Most local ranks that share memory: each holds an eventfd and a pidfd
 * for every other, which must fit the usual limit of 1024 descriptors. */
#define HVD_SHM_MAX 256
/* From this many local ranks, an exchange in which every rank would read
 * every rank's slot goes through local rank 0 instead (hvd__shm_arrive,
 * hvd__shm_release): the steady negotiation cycle (steady.h) and small
 * allreduces (shm_coll.c). */
#define HVD_SHM_VIA_FIRST_MIN 8

struct hvd_shm_hdr;

struct hvd_shm {
    int n;      /* local ranks; 0 when shared memory is not in use */
    int me;     /* this rank's index among them */
    int *ranks; /* their global ranks, ascending */
    char host[64];
    struct hvd_shm_hdr *hdr;
    size_t len;    /* of the mapping */
    uint8_t *data; /* two sets of n + 1 slots */
    size_t slot;   /* bytes per slot */
    int set;       /* the set the next phase writes */
    int *efd;      /* every local rank's eventfd; efd[me] wakes us */
    int *pidfd;    /* the other ranks' pidfds (-1: unknown) */
    uint64_t seq;  /* syncs this rank has entered */
    int upto;      /* the wait waits for the local ranks below this, */
    int passed;    /* of which those below this one have entered it */
    int spin_us;   /* busy-wait this long, */
    int yield_us;  /* then yield the CPU until this long, then sleep */
    /* Heard while a sync waits (may be NULL: then only a dead peer or the
     * deadline ends a wait). */
    struct hvd_abort *ab;
    int64_t deadline_ms; /* 0: none (start-up uses one) */
    /* A sync fails when the rank it waits for has not moved data for this
     * long, here or in a ring (hvd__shm_busy_ms) (0: never). */
    int progress_ms;
    uint8_t *tmp; /* private accumulator */
    size_t tmp_cap;
};

/*
 * Sets up the segment among the n local ranks ranks[] (this one is
 * ranks[me]): the first creates it and hands it out over an abstract Unix
 * socket whose name and handshake are bound to the job secret and host.
 * Nothing is ever named in /dev/shm, so nothing is left there after any
 * exit. 0 or a negative code with err filled.
 */
int hvd__shm_setup(struct hvd_shm *s, const uint8_t *secret, size_t secretlen,
                   const int *ranks, int n, int me, const char *host,
                   int64_t deadline_ms, char *err, size_t errlen);
void hvd__shm_close(struct hvd_shm *s);

/* Waits until every local rank has entered as many syncs as this one. */
int hvd__shm_sync(struct hvd_shm *s, char *err, size_t errlen);
/*
 * A sync in two halves around work that local rank 0 does alone, such as
 * reading every rank's slot: arrive enters a sync, and on rank 0 waits for
 * every rank to enter it, on the others returns at once; release, on rank
 * 0, enters one more, and on the others waits for rank 0 to enter it. A
 * rank waits only for rank 0 and rank 0 for all, so a rank looks at one
 * other rank's count instead of n. After both, every rank has entered as
 * many syncs as after two hvd__shm_sync.
 */
int hvd__shm_arrive(struct hvd_shm *s, char *err, size_t errlen);
int hvd__shm_release(struct hvd_shm *s, char *err, size_t errlen);
/* Slot i (n: the result slot) of the current set. */
uint8_t *hvd__shm_slot(const struct hvd_shm *s, int i);
/* Switches to the other set of slots. */
void hvd__shm_flip(struct hvd_shm *s);
/* Makes the other local ranks fail their waits (a collective failed here
 * half-way). */
void hvd__shm_abort(struct hvd_shm *s);
/* Whether another local rank has entered more syncs than this one: it
 * started a collective that this rank must join. */
int hvd__shm_peer_ahead(const struct hvd_shm *s);
/* How a sleeping rank wants to be woken when the others start a
 * collective (hvd__shm_set_sleeping). */
enum {
    HVD_SHM_AWAKE = 0,
    HVD_SHM_WAKE_NOW = 1, /* at once: it has work in flight, or waits */
    /* Only if the collective waits for it long (HVD_SHM_LATE_WAKE_MS):
     * an idle rank, which joins when its caller asks anyway. */
    HVD_SHM_WAKE_LATE = 2
};
#define HVD_SHM_LATE_WAKE_MS 2
/* Marks this rank as sleeping on efd[me] (mode: HVD_SHM_WAKE_*) or awake
 * again (HVD_SHM_AWAKE). Like hvd__shm_drain, does nothing without a
 * segment. */
void hvd__shm_set_sleeping(struct hvd_shm *s, int mode);
/* Where this rank says when its work outside shared memory (a ring
 * between hosts) last moved data: a sync waiting for it lasts until
 * progress_ms after that. NULL without a segment. */
_Atomic int64_t *hvd__shm_busy_ms(struct hvd_shm *s);
/* Empties this rank's eventfd. */
void hvd__shm_drain(struct hvd_shm *s);
/* A private buffer of at least want bytes. */
uint8_t *hvd__shm_tmp(struct hvd_shm *s, size_t want);

#endif
