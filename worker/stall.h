/* Rank 0's stall inspector: names some ranks announced and others did
 * not, warned about and, after the shutdown time, given up on. */
#ifndef HVD_STALL_H
#define HVD_STALL_H

struct hvd_ctx;

/* Runs between cycles. */
void hvd__stall_check(struct hvd_ctx *c);

#endif
