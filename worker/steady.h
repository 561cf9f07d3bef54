/* The steady state of a negotiation cycle among many ranks on one host's
 * shared memory: instead of every rank reading every rank's message
 * (n * n reads a cycle), local rank 0 reads them all, and when they are
 * alike but for the small tensors' data (the same cached names, the same
 * tensors: the usual cycle once a job runs) folds those tensors and hands
 * out its own message with the folded data, which every rank reads. A
 * cycle whose messages differ falls back to the full gather. */
#ifndef HVD_STEADY_H
#define HVD_STEADY_H

#include <stddef.h>
#include <stdint.h>

#include "worker/cycle.h"

struct hvd_ctx;

/* The steady exchange's copy of its result, kept from cycle to cycle. */
struct hvd_steady {
    uint8_t *buf;
    size_t cap;
    /* Cycles tried, found alike, and alike with folded tensors. */
    uint64_t cycles, alike, folded;
};

/* Whether this job's cycles try the steady exchange: shared memory alone,
 * with at least HVD_SHM_VIA_FIRST_MIN ranks (below it, every rank reading
 * every message costs less than the fallback's extra round when they
 * differ). */
int hvd__steady_on(const struct hvd_ctx *c);

/*
 * Exchanges this rank's message (msg, len: its small tensors' section,
 * then its requests) through local rank 0, and says in *how how the
 * cycle's messages go: HVD_EXCHANGE_STEADY when every message was alike,
 * and then c->eager_in holds the folded tensors and every rank's requests
 * are msgs[r] (lens[r]), the same bytes; HVD_EXCHANGE_GATHER when they
 * differ, and the cycle still gathers them (hvd__exec_gather). 0, or a
 * negative code with err filled.
 */
int hvd__steady_exchange(struct hvd_ctx *c, const uint8_t *msg, size_t len,
                         const uint8_t **msgs, size_t *lens,
                         enum hvd_exchange *how, char *err, size_t errlen);
void hvd__steady_free(struct hvd_ctx *c);

#endif
