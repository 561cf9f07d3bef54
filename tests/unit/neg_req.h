/* A float32 sum allreduce request named name, as the negotiation's and
 * the eager section's unit tests make them. */
#ifndef HVD_TEST_NEG_REQ_H
#define HVD_TEST_NEG_REQ_H

#include "worker/negotiate.h"

static inline struct hvd_req req(const char *name, uint64_t count)
{
    return (struct hvd_req){.kind = HVD_REQ_ALLREDUCE,
                            .dtype = HVD_FLOAT32,
                            .op = HVD_SUM,
                            .count = count,
                            .name = (char *)name,
                            .prescale = 1,
                            .postscale = 1};
}

#endif
