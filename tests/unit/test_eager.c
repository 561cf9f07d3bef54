/* Unit tests for the small allreduces carried with the negotiation
 * (worker/eager.c): which parts travel, the section's wire format, and
 * hostile sections. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ctx.h"
#include "worker/eager.h"
#include "neg_req.h"
#include "worker/negotiate.h"
#include "worker/transport/transport.h"

/* Floats in a tensor one float too large to travel. */
#define BIG (HVD_EAGER_MAX_BYTES / 4 + 1)
/* And in one of the largest that travel. */
#define MOST (HVD_EAGER_MAX_BYTES / 4)

/* A context of two ranks whose cache knows "a" (4 floats), "big" (BIG
 * floats) and "m1", "m2" (MOST floats each). */
static struct hvd_ctx *ctx2(void)
{
    struct hvd_ctx *c = calloc(1, sizeof(*c));
    cr_assert(c != NULL);
    c->size = 2;
    c->tp = &hvd__transport_ring;
    cr_assert_eq(hvd__neg_init(&c->neg, 2, 16), 0);
    struct hvd_req a = req("a", 4), big = req("big", BIG), m1 = req("m1", MOST),
                   m2 = req("m2", MOST);
    hvd__neg_cache_put(&c->neg, &a);
    hvd__neg_cache_put(&c->neg, &big);
    hvd__neg_cache_put(&c->neg, &m1);
    hvd__neg_cache_put(&c->neg, &m2);
    return c;
}

static void ctx_free(struct hvd_ctx *c)
{
    hvd__neg_close(&c->neg);
    free(c);
}

static struct hvd_request op;

static struct hvd_work work(const char *name, const float *in, float *out,
                            size_t count)
{
    struct hvd_work w = {.op = &op,
                         .kind = HVD_OP_ALLREDUCE,
                         .sendbuf = in,
                         .recvbuf = out,
                         .count = count,
                         .dtype = HVD_FLOAT32,
                         .op_kind = HVD_SUM,
                         .prescale = 1,
                         .postscale = 1};
    strcpy(w.name, name);
    return w;
}

Test(eager, only_small_cached_host_allreduces_travel)
{
    struct hvd_ctx *c = ctx2();
    static float in[BIG], out[BIG];
    struct hvd_work a = work("a", in, out, 4), big = work("big", in, out, BIG),
                    fresh = work("new", in, out, 4);
    struct hvd_req qa = req("a", 4), qbig = req("big", BIG),
                   qfresh = req("new", 4);
    hvd__eager_note(c, &big, &qbig);
    hvd__eager_note(c, &fresh, &qfresh);
    cr_expect_eq(c->neager, 0, "too large, or not cached on every rank");
    a.compress = 1;
    hvd__eager_note(c, &a, &qa);
    cr_expect_eq(c->neager, 0, "compressed tensors take the transport");
    a.compress = 0;
    hvd__eager_note(c, &a, &qa);
    cr_assert_eq(c->neager, 1);
    hvd__eager_forget(c, &a);
    cr_expect_eq(c->neager, 0);
    /* Two of the largest that travel exceed a section's budget. */
    struct hvd_work m1 = work("m1", in, out, MOST),
                    m2 = work("m2", in, out, MOST);
    struct hvd_req q1 = req("m1", MOST), q2 = req("m2", MOST);
    hvd__eager_note(c, &m1, &q1);
    hvd__eager_note(c, &m2, &q2);
    cr_expect_eq(c->neager, 1, "one of the largest fits the budget, not two");
    hvd__eager_note(c, &a, &qa);
    cr_expect_eq(c->neager, 2, "a small one still fits beside it");
    ctx_free(c);
}

Test(eager, every_rank_folds_what_every_rank_carried)
{
    struct hvd_ctx *c = ctx2();
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    struct hvd_work a = work("a", in, out, 4);
    struct hvd_req qa = req("a", 4);
    hvd__eager_note(c, &a, &qa);
    /* Both ranks' messages: the section, then one byte of requests. */
    static const uint8_t reqs[1] = {0x7f};
    uint8_t *msg;
    size_t len;
    cr_assert_eq(hvd__eager_encode(c, reqs, 1, &msg, &len), 0);
    cr_assert_eq(len, 4 + 4 + 16 + 1,
                 "length, then id and data, then the "
                 "requests");
    len -= 1;
    const uint8_t *msgs[2] = {msg, msg};
    size_t lens[2] = {len + 1, len + 1};
    struct hvd_eager_in in2 = {0};
    cr_assert_eq(hvd__eager_decode(c, &in2, msgs, lens), 0);
    cr_expect_eq(lens[0], 1, "the requests follow the section");
    cr_expect_eq(*msgs[1], 0x7f);
    struct hvd_resp r = {.req = qa};
    cr_assert(hvd__eager_ready(c, &in2, &r));
    hvd__eager_run(c, &in2, &r, &a);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(out[i], 2 * in[i]);
    struct hvd_resp other = {.req = req("big", BIG)};
    cr_expect(!hvd__eager_ready(c, &in2, &other), "nobody carried it");
    /* The next cycle reuses the arrays: rank 1 carried nothing this
     * time, so the tensor is not ready. */
    static const uint8_t none[5] = {0, 0, 0, 0, 0x7f};
    msgs[0] = msg;
    msgs[1] = none;
    lens[0] = len + 1;
    lens[1] = sizeof(none);
    cr_assert_eq(hvd__eager_decode(c, &in2, msgs, lens), 0);
    cr_expect_eq(lens[1], 1);
    cr_expect(!hvd__eager_ready(c, &in2, &r), "rank 1 carried nothing");
    hvd__eager_free(&in2);
    free(msg);
    ctx_free(c);
}

Test(eager, the_hierarchical_fold_goes_host_by_host)
{
    /* Four ranks on two hosts of two. The hierarchical transport sums each
     * host's ranks, then the hosts: in float32 (1 + 1e8) + (-1e8 + 1) is
     * 0, where rank order gives ((1 + 1e8) - 1e8) + 1 = 1. */
    static const float vals[4] = {1, 1e8f, -1e8f, 1};
    static const uint8_t reqs[1] = {0x7f};
    int first[2] = {0, 2}, count[2] = {2, 2};
    struct hvd_ctx *c = calloc(1, sizeof(*c));
    cr_assert(c != NULL);
    c->size = 4;
    c->tp = &hvd__transport_hier;
    c->topo.nhosts = 2;
    c->topo.first = first;
    c->topo.count = count;
    cr_assert_eq(hvd__neg_init(&c->neg, 4, 16), 0);
    struct hvd_req qa = req("a", 1);
    hvd__neg_cache_put(&c->neg, &qa);
    float in = 0, out = -1;
    struct hvd_work a = work("a", &in, &out, 1);
    uint8_t *msg[4];
    const uint8_t *msgs[4];
    size_t lens[4];
    for (int r = 0; r < 4; r++) {
        in = vals[r];
        hvd__eager_note(c, &a, &qa);
        cr_assert_eq(c->neager, 1, "carried on the hierarchical transport");
        cr_assert_eq(hvd__eager_encode(c, reqs, 1, &msg[r], &lens[r]), 0);
        hvd__eager_forget(c, &a);
        msgs[r] = msg[r];
    }
    struct hvd_eager_in in4 = {0};
    cr_assert_eq(hvd__eager_decode(c, &in4, msgs, lens), 0);
    struct hvd_resp r = {.req = qa};
    cr_assert(hvd__eager_ready(c, &in4, &r));
    hvd__eager_run(c, &in4, &r, &a);
    cr_expect_eq(out, 0.0f, "host by host: %g", (double)out);
    c->tp = &hvd__transport_ring;
    hvd__eager_run(c, &in4, &r, &a);
    cr_expect_eq(out, 1.0f, "rank order on the ring: %g", (double)out);
    hvd__eager_free(&in4);
    for (int i = 0; i < 4; i++)
        free(msg[i]);
    hvd__neg_close(&c->neg);
    free(c);
}

/* Decodes one hostile section (rank 0's; rank 1's is empty). */
static int decode(struct hvd_ctx *c, const uint8_t *p, size_t len)
{
    static const uint8_t empty[4] = {0};
    const uint8_t *msgs[2] = {p, empty};
    size_t lens[2] = {len, sizeof(empty)};
    struct hvd_eager_in in = {0};
    int rc = hvd__eager_decode(c, &in, msgs, lens);
    hvd__eager_free(&in);
    return rc;
}

static size_t section(uint8_t *p, const uint32_t *ids, int n, size_t data)
{
    size_t off = 4;
    for (int i = 0; i < n; i++) {
        memcpy(p + off, &ids[i], 4);
        memset(p + off + 4, 0, data);
        off += 4 + data;
    }
    uint32_t sec = (uint32_t)(off - 4);
    memcpy(p, &sec, 4);
    return off;
}

Test(eager, hostile_sections_are_refused)
{
    struct hvd_ctx *c = ctx2();
    static uint8_t p[2 * HVD_EAGER_MAX_BYTES];
    uint32_t a = 0, big = 1, beyond = 9, many[HVD_EAGER_MAX + 1] = {0};
    size_t n = section(p, &a, 1, 16);
    cr_expect_eq(decode(c, p, n), 0, "a well-formed section");
    cr_expect_eq(decode(c, p, 3), HVD_EPROTO, "no room for the length");
    cr_expect_eq(decode(c, p, n - 1), HVD_EPROTO, "longer than the message");
    n = section(p, &a, 1, 15);
    cr_expect_eq(decode(c, p, n), HVD_EPROTO, "data cut short");
    n = section(p, &beyond, 1, 16);
    cr_expect_eq(decode(c, p, n), HVD_EPROTO, "an id the cache lacks");
    n = section(p, &big, 1, BIG * 4);
    cr_expect_eq(decode(c, p, n), HVD_EPROTO, "a tensor too large to travel");
    n = section(p, many, HVD_EAGER_MAX + 1, 16);
    cr_expect_eq(decode(c, p, n), HVD_EPROTO, "more tensors than allowed");
    ctx_free(c);
}
