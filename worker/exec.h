/* Running negotiated collectives on host buffers, through the transport. */
#ifndef HVD_EXEC_H
#define HVD_EXEC_H

#include <stddef.h>
#include <stdint.h>

struct hvd_ctx;
struct hvd_work;

/* Runs one collective (background thread). */
int hvd__exec(struct hvd_ctx *c, struct hvd_work *w);
/* The first step of an allgather: every rank's element count of w into
 * w->counts, over the host transport; *total gets their bytes together. */
int hvd__exec_counts(struct hvd_ctx *c, struct hvd_work *w, size_t *total,
                     char *err, size_t errlen);
/* How many elements of reducescatter w rank gets (of size ranks), and
 * where they start (*first, when not NULL): Horovod's split of the rows,
 * the first count/row % size ranks one row more. */
size_t hvd__exec_rows(const struct hvd_work *w, int size, int rank,
                      size_t *first);
/* The elements of reducescatter w that this rank receives: its rows in
 * w's process set (none for a stand-in). */
size_t hvd__exec_mine(const struct hvd_work *w);
/* Every rank's len bytes, in rank order: msgs[r] of lens[r] bytes (r <
 * size), in c->gather, where they stay until the next gather. */
int hvd__exec_gather(struct hvd_ctx *c, const uint8_t *mine, size_t len,
                     const uint8_t **msgs, size_t *lens, char *err,
                     size_t errlen);
void hvd__exec_gather_free(struct hvd_ctx *c);

#endif
