/* The steady exchange of a negotiation cycle through local rank 0
 * (steady.h). */
#include "worker/steady.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/buf.h"
#include "worker/coll.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/eager.h"
#include "worker/transport/shm.h"
#include "worker/transport/transport.h"

/* A slot holds u64 length then the message; a length of NONE says the
 * message did not fit. The result slot holds u32 alike, u32 folded bytes,
 * the folded tensors, then rank 0's slot. */
#define NONE UINT64_MAX
#define RESULT_HEAD 8

int hvd__steady_on(const struct hvd_ctx *c)
{
    return c->tp == &hvd__transport_shm && c->size >= HVD_SHM_VIA_FIRST_MIN;
}

/* Rank 0's part: whether every slot holds a message like its own; if so,
 * the result slot gets the folded tensors and a copy of rank 0's slot. */
static int judge(struct hvd_ctx *c)
{
    struct hvd_shm *s = &c->shm;
    const uint8_t **msgs = c->eng.per_rank.msgs;
    size_t *lens = c->eng.per_rank.lens;
    uint8_t *res = hvd__shm_slot(s, s->n);
    for (int r = 0; r < s->n; r++) {
        const uint8_t *slot = hvd__shm_slot(s, r);
        uint64_t l = hvd__get_u64(slot);
        if (l == NONE)
            return 0;
        msgs[r] = slot + 8;
        lens[r] = (size_t)l;
    }
    size_t mine = lens[0];
    /* A message that does not decode is the full gather's to report. */
    if (hvd__eager_decode(c, &c->eager_in, msgs, lens) != 0 ||
        !c->eager_in.same ||
        RESULT_HEAD + HVD_EAGER_FOLDED_MAX + 8 + mine > s->slot)
        return 0;
    uint32_t folded =
        (uint32_t)hvd__eager_fold(c, &c->eager_in, res + RESULT_HEAD);
    hvd__put_u32(res + 4, folded);
    memcpy(res + RESULT_HEAD + folded, hvd__shm_slot(s, 0), 8 + mine);
    return 1;
}

/* Every rank's part once rank 0 judged: the result taken (*how steady)
 * or, when the messages differed, left to the gather. */
static int take(struct hvd_ctx *c, const uint8_t **msgs, size_t *lens,
                enum hvd_exchange *how)
{
    struct hvd_shm *s = &c->shm;
    struct hvd_steady *st = &c->eng.steady;
    const uint8_t *res = hvd__shm_slot(s, s->n);
    *how = HVD_EXCHANGE_GATHER;
    if (hvd__get_u32(res) == 0)
        return 0;
    size_t folded = hvd__get_u32(res + 4);
    if (folded > HVD_EAGER_FOLDED_MAX)
        return HVD_EPROTO;
    size_t len = (size_t)hvd__get_u64(res + RESULT_HEAD + folded);
    if (len > s->slot - RESULT_HEAD - folded - 8)
        return HVD_EPROTO;
    /* Kept here: the slot is written again before the cycle ends. */
    if (hvd__grow(&st->buf, &st->cap, folded + len))
        return HVD_ENOMEM;
    memcpy(st->buf, res + RESULT_HEAD, folded);
    memcpy(st->buf + folded, res + RESULT_HEAD + folded + 8, len);
    const uint8_t *m = st->buf + folded;
    int rc = hvd__eager_take_folded(c, &c->eager_in, &m, &len, st->buf, folded);
    if (rc)
        return rc;
    st->alike++;
    st->folded += folded > 0;
    for (int r = 0; r < c->size; r++) {
        msgs[r] = m;
        lens[r] = len;
    }
    *how = HVD_EXCHANGE_STEADY;
    return 0;
}

int hvd__steady_exchange(struct hvd_ctx *c, const uint8_t *msg, size_t len,
                         const uint8_t **msgs, size_t *lens,
                         enum hvd_exchange *how, char *err, size_t errlen)
{
    struct hvd_shm *s = &c->shm;
    uint8_t *slot = hvd__shm_slot(s, s->me);
    *how = HVD_EXCHANGE_GATHER;
    c->eng.steady.cycles++;
    uint64_t l = 8 + len <= s->slot ? len : NONE;
    memcpy(slot, &l, 8);
    if (l != NONE)
        memcpy(slot + 8, msg, len);
    int rc = hvd__shm_arrive(s, err, errlen);
    if (rc)
        return rc;
    if (s->me == 0) {
        uint32_t alike = (uint32_t)judge(c);
        hvd__put_u32(hvd__shm_slot(s, s->n), alike);
    }
    if ((rc = hvd__shm_release(s, err, errlen)) != 0)
        return rc;
    rc = take(c, msgs, lens, how);
    hvd__shm_flip(s);
    return rc;
}

void hvd__steady_free(struct hvd_ctx *c)
{
    const struct hvd_steady *st = &c->eng.steady;
    if (st->cycles > 0 && hvd__coll_debug())
        fprintf(stderr,
                "hvd: debug: rank %d: steady exchange: %" PRIu64 " of %" PRIu64
                " cycles alike, %" PRIu64 " with folded tensors\n",
                c->rank, st->alike, st->cycles, st->folded);
    free(c->eng.steady.buf);
    memset(&c->eng.steady, 0, sizeof(c->eng.steady));
}
