/* The engine: the background thread, or a caller waiting for its own
 * collective, takes submitted work and runs negotiation cycles (cycle.h)
 * until it is done. Who may run it when is docs/engine.md's subject. */
#ifndef HVD_ENGINE_H
#define HVD_ENGINE_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_request;

/* Starts the background thread. */
int hvd__engine_start(struct hvd_ctx *c);
/* Hands op to the thread; it completes on its own (hvd__engine_wait). */
void hvd__engine_submit(struct hvd_ctx *c, struct hvd_request *op);
/* Waits for op to complete and returns its code; runs the engine on the
 * caller's thread while the background thread sleeps. */
int hvd__engine_wait(struct hvd_ctx *c, struct hvd_request *op);
/* Marks op done and wakes the callers that wait (its last part ended). */
void hvd__engine_finish(struct hvd_ctx *c, struct hvd_request *op);
/*
 * Has the thread start the timeline in path (replacing the one running;
 * when the new file cannot be opened, the old one keeps running) or, when
 * path is NULL, stop it; waits until it has. 0, or HVD_ESYS with err
 * filled.
 */
int hvd__engine_timeline(struct hvd_ctx *c, const char *path, int mark_cycles,
                         char *err, size_t errlen);
/* Stops the thread (says goodbye to the rendezvous server) and joins it. */
void hvd__engine_stop(struct hvd_ctx *c);

#endif
