/* The last step of a negotiation cycle: running what every rank asked
 * for, in the order they all agreed on. */
#ifndef HVD_RESPOND_H
#define HVD_RESPOND_H

#include <stddef.h>

struct hvd_ctx;
struct hvd_resp;
struct hvd_eager_in;

/* Runs the n responses of this cycle, each part completing with its
 * result: errors and joins at once, carried small allreduces from the
 * cycle's messages (in), the rest as collectives, runs of allreduces that
 * fit the fusion threshold together. */
void hvd__respond(struct hvd_ctx *c, struct hvd_resp *resp, size_t n,
                  const struct hvd_eager_in *in);

#endif
