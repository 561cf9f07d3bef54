/* The pending table: parts the engine took and that wait for every rank
 * to ask for them too, by name and process set, and how a part ends. */
#ifndef HVD_PENDING_H
#define HVD_PENDING_H

struct hvd_ctx;
struct hvd_work;

/* Takes a submitted part: it waits in the table and is announced in the
 * next cycle (c->eng.fresh). A part that cannot wait (a failed rank, a
 * name in flight already, no memory) completes at once with its error. */
void hvd__pending_admit(struct hvd_ctx *c, struct hvd_work *w);
/* Unlinks and returns the part with this name in this process set, or
 * NULL. */
struct hvd_work *hvd__pending_take(struct hvd_ctx *c, const char *name,
                                   int pset);
/* Completes every part in the table with rc and msg (after a peer
 * failure or at shutdown). */
void hvd__pending_fail_all(struct hvd_ctx *c, int rc, const char *msg);
/* One part is done, with rc (and err, or rc's text, when it failed); its
 * op completes with its last part. */
void hvd__pending_done(struct hvd_ctx *c, struct hvd_work *w, int rc,
                       const char *err);

#endif
