/*
 * One negotiation cycle, Horovod's: every rank announces its new requests,
 * the announcements are gathered to every rank, each rank coordinates
 * them (the same table fed the same input in the same order, so every
 * rank plays the coordinator's part and they all agree), and each
 * responds by running what every rank has asked for. Two shortcuts keep
 * the plain cycle's shape: the steady exchange (steady.h) and carried
 * small tensors (eager.h). docs/engine.md draws the whole cycle.
 */
#ifndef HVD_CYCLE_H
#define HVD_CYCLE_H

struct hvd_ctx;

/* How a cycle's messages went from every rank to every rank. */
enum hvd_exchange {
    /* The plain way: a gather of every rank's message to every rank
     * (hvd__exec_gather), then every message's small tensors read. */
    HVD_EXCHANGE_GATHER,
    /* The shortcut of many ranks on one host's shared memory, when every
     * message was alike but for the small tensors' data: local rank 0
     * read them all, folded the small tensors, and every rank took its
     * message (steady.h). */
    HVD_EXCHANGE_STEADY
};

/* Reads the cycle's settings and makes its tables (the pending table,
 * the per-rank entries, the negotiation's table). 0 or HVD_ENOMEM. */
int hvd__cycle_init(struct hvd_ctx *c);
/* Runs one cycle; a failure fails this rank (c->failed) and every part
 * that waited. Called by the engine's holder. */
void hvd__cycle_run(struct hvd_ctx *c);
/* Frees what hvd__cycle_init and the cycles made. */
void hvd__cycle_close(struct hvd_ctx *c);

#endif
