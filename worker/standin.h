/* Stand-ins: how a rank takes part in a collective it did not submit,
 * because the collective's process set leaves it out or because it has
 * joined. It adds the op's identity (zeros for a sum) and nothing else,
 * and keeps nothing; the collective runs on the job's transport as if
 * every rank had submitted it. */
#ifndef HVD_STANDIN_H
#define HVD_STANDIN_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_req;
struct hvd_work;

/* A stand-in for the negotiated request q, as a one-part request that
 * frees itself when completed (hvd__standin_done); NULL with err filled
 * when memory (host, or device for a device collective) runs out. */
struct hvd_work *hvd__standin_new(struct hvd_ctx *c, const struct hvd_req *q,
                                  char *err, size_t errlen);
/* Frees a stand-in's buffers and request; 0 if w is no stand-in. */
int hvd__standin_done(struct hvd_work *w);

#endif
