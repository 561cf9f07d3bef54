/* Small allreduces carried with the negotiation: a rank sends the data of
 * its waiting small allreduces (by response-cache id) with its cycle's
 * requests, and when every rank carried a tensor's data in the cycle that
 * makes it ready, each rank folds the data itself in the transport's
 * order (rank order, or host by host on the hierarchical transport), with
 * no collective of its own. */
#ifndef HVD_EAGER_H
#define HVD_EAGER_H

#include <stddef.h>
#include <stdint.h>

struct hvd_ctx;
struct hvd_work;
struct hvd_resp;
struct hvd_req;

/* At most this many tensors of at most this many bytes each travel per
 * message: the message must stay short, as every rank copies every
 * rank's message (from 8 ranks on one host's shared memory, only local
 * rank 0 does). A tensor this size still takes a round of its own
 * otherwise (the negotiation, then the collective), which costs far
 * more at many ranks than its bytes in the message. */
#define HVD_EAGER_MAX 8
#define HVD_EAGER_MAX_BYTES 1024
/* Bytes of a whole section at most: one tensor of the largest size and
 * room for a few small ones. */
#define HVD_EAGER_BUDGET 1152

/* What the ranks carried this cycle: rank r's tensors are ids[r][k] with
 * data at data[r][k], for k below count[r]. same: every rank's message
 * was rank 0's but for the data (the same tensors, the same requests).
 * folded: rank 0's row holds the tensors folded over the ranks already,
 * in their accumulator type (hvd__eager_fold), and the other rows are
 * empty. */
struct hvd_eager_in {
    uint8_t *count;
    int32_t (*ids)[HVD_EAGER_MAX];
    const uint8_t *(*data)[HVD_EAGER_MAX];
    int same, folded;
};

/* Takes note of a fresh part that could travel, announced as q. */
void hvd__eager_note(struct hvd_ctx *c, struct hvd_work *w,
                     const struct hvd_req *q);
/* Forgets a part that completed. */
void hvd__eager_forget(struct hvd_ctx *c, const struct hvd_work *w);
/* This rank's message: its section (u32 length, then per tensor u32 id
 * and its data), then the encoded requests reqs. 0 or HVD_ENOMEM. */
int hvd__eager_encode(struct hvd_ctx *c, const uint8_t *reqs, size_t reqlen,
                      uint8_t **out, size_t *len);
/* Reads every rank's section from the front of its message (msgs[r],
 * lens[r]), moving msgs and lens past it; 0, HVD_EPROTO or HVD_ENOMEM.
 * The data stay in the messages; in keeps its arrays from call to call,
 * until hvd__eager_free. in->same tells whether the requests that follow
 * are the same bytes in every message. */
int hvd__eager_decode(const struct hvd_ctx *c, struct hvd_eager_in *in,
                      const uint8_t **msgs, size_t *lens);
void hvd__eager_free(struct hvd_eager_in *in);
/* Bytes of hvd__eager_fold's output at most. */
#define HVD_EAGER_FOLDED_MAX (HVD_EAGER_MAX * 2 * HVD_EAGER_MAX_BYTES)
/* With in decoded from messages that were all alike (in->same): every
 * tensor of rank 0's row folded over the ranks in rank order, one after
 * the other in their accumulator types, into out; returns their bytes. */
size_t hvd__eager_fold(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                       uint8_t *out);
/* Sets in up from rank 0's message (*msg, *len), alike for every rank,
 * and its tensors already folded (acc, from hvd__eager_fold), moving msg
 * and len past its section; 0, HVD_EPROTO or HVD_ENOMEM. */
int hvd__eager_take_folded(const struct hvd_ctx *c, struct hvd_eager_in *in,
                           const uint8_t **msg, size_t *len, const uint8_t *acc,
                           size_t acclen);
/* Whether every rank carried response r's data: the same answer on every
 * rank. */
int hvd__eager_ready(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                     const struct hvd_resp *r);
/* Computes w's result from what the ranks carried (r ready). */
void hvd__eager_run(const struct hvd_ctx *c, const struct hvd_eager_in *in,
                    const struct hvd_resp *r, struct hvd_work *w);

#endif
