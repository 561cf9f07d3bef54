/* The background thread: it takes submitted work, negotiates it with the
 * other ranks in cycles and runs what every rank has announced. */
#ifndef HVD_ENGINE_H
#define HVD_ENGINE_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_request;

/* Starts the background thread. */
int hvd__engine_start(struct hvd_ctx *c);
/* Hands op to the thread; it completes on its own (hvd__engine_wait). */
void hvd__engine_submit(struct hvd_ctx *c, struct hvd_request *op);
/* Waits for op to complete and returns its code. */
int hvd__engine_wait(struct hvd_ctx *c, struct hvd_request *op);
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
