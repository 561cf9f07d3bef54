/* Horovod's Adasum: the adaptive sum of gradients, combined in a tree. */
#ifndef HVD_ADASUM_H
#define HVD_ADASUM_H

#include <stddef.h>

#include "hvd.h"

/*
 * Horovod's Adasum of n vectors (n >= 1 a power of two), each count
 * elements of dt (HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64),
 * stored end to end in rank order at in (n * count elements). The vectors
 * are combined pairwise in a binary tree: (0,1), (2,3), ... then the pairs
 * of those results, and so on; a pair a, b gives
 *   (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 * where a coefficient stays 1 if that squared norm is below sqrt(DBL_MIN).
 * bounds (nseg + 1 entries, bounds[0] = 0, bounds[nseg] = count) splits
 * the vectors into tensors combined separately (a fused buffer); NULL
 * means one tensor. Work is done in double, rounded to dt once at the
 * end, into out (count elements, may not overlap in). The sums run in a
 * fixed order and use no threads, so the bits depend only on the input.
 * Returns 0, HVD_EINVAL (dtype not floating, n not a power of two, bounds
 * not as described) or HVD_ENOMEM.
 */
int hvd__adasum(void *out, const void *in, size_t count, hvd_dtype dt, int n,
                const size_t *bounds, size_t nseg);

#endif
