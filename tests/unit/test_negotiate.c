/* Unit tests for the negotiation table and its wire format
 * (worker/negotiate.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neg_req.h"
#include "worker/negotiate.h"
#include "worker/pset.h"

static void free_resp(struct hvd_resp *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(r[i].req.name);
    free(r);
}

Test(negotiate, ready_in_the_order_the_last_rank_asked)
{
    struct hvd_neg t;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    struct hvd_req a = req("a", 4), b = req("b", 4);

    cr_assert_eq(hvd__neg_init(&t, 2, 0), 0);
    cr_assert_eq(hvd__neg_add(&t, 0, &a, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 0, &b, &r, &n), 0);
    cr_expect_eq(n, 0, "nothing is ready until every rank asked");
    cr_assert_eq(hvd__neg_add(&t, 1, &b, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 1, &a, &r, &n), 0);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(r[0].req.name, "b");
    cr_expect_str_eq(r[1].req.name, "a");
    cr_expect_eq(r[0].error, 0);
    cr_expect_eq(t.used, 0, "answered names leave the table");
    free_resp(r, n);
    hvd__neg_close(&t);
}

static const char *mismatch(struct hvd_req r1)
{
    static char msg[256];
    struct hvd_neg t;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    struct hvd_req r0 = req("fc1.weight", 1024);
    r0.kind = r1.kind;
    hvd__neg_init(&t, 3, 0);
    hvd__neg_add(&t, 0, &r0, &r, &n);
    hvd__neg_add(&t, 2, &r1, &r, &n);
    hvd__neg_add(&t, 1, &r0, &r, &n);
    cr_assert_eq(n, 1);
    snprintf(msg, sizeof(msg), "%s", r[0].error ? r[0].msg : "");
    cr_expect_eq(r[0].error, r[0].error ? HVD_EMISMATCH : 0);
    free_resp(r, n);
    hvd__neg_close(&t);
    return msg;
}

Test(negotiate, mismatches_name_both_ranks)
{
    struct hvd_req r = req("fc1.weight", 512);
    cr_expect_str_eq(mismatch(r),
                     "Mismatched allreduce tensor sizes: rank 0 sent 1024 "
                     "elements, rank 2 sent 512 for tensor 'fc1.weight'");
    r = req("fc1.weight", 1024);
    r.dtype = HVD_FLOAT16;
    cr_expect_str_eq(mismatch(r),
                     "Mismatched allreduce data types: rank 0 sent float32, "
                     "rank 2 sent float16 for tensor 'fc1.weight'");
    r = req("fc1.weight", 1024);
    r.op = HVD_MAX;
    cr_expect_str_eq(mismatch(r),
                     "Mismatched allreduce operations: rank 0 asked for sum, "
                     "rank 2 for max of tensor 'fc1.weight'");
    r = req("fc1.weight", 1024);
    r.kind = HVD_REQ_BROADCAST;
    r.root = 2;
    cr_expect_str_eq(mismatch(r),
                     "Mismatched broadcast root ranks: rank 0 named root 0, "
                     "rank 2 named root 2 for tensor 'fc1.weight'");
    /* Allgather counts may differ; that is the point of allgather. */
    r = req("fc1.weight", 7);
    r.kind = HVD_REQ_ALLGATHER;
    cr_expect_str_eq(mismatch(r), "");
    /* And alltoall's, whose splits are each rank's own. */
    r = req("fc1.weight", 7);
    r.kind = HVD_REQ_ALLTOALL;
    cr_expect_str_eq(mismatch(r), "");
}

/* mismatch() against rank 0's reducescatter of 1024 elements in rows of
 * 4, as rank 2 asks for r. */
static const char *rs_mismatch(struct hvd_req r)
{
    static char msg[256];
    struct hvd_neg t;
    struct hvd_resp *o = NULL;
    size_t n = 0;
    struct hvd_req r0 = req("emb", 1024);
    r0.kind = HVD_REQ_REDUCESCATTER;
    r0.row = 4;
    hvd__neg_init(&t, 3, 0);
    hvd__neg_add(&t, 0, &r0, &o, &n);
    hvd__neg_add(&t, 1, &r0, &o, &n);
    hvd__neg_add(&t, 2, &r, &o, &n);
    cr_assert_eq(n, 1);
    snprintf(msg, sizeof(msg), "%s", o[0].error ? o[0].msg : "");
    free_resp(o, n);
    hvd__neg_close(&t);
    return msg;
}

/* Shape tags (hvd_next_shapes) must agree where both ranks give one; a
 * rank that gives none is checked on its count alone. */
Test(negotiate, shape_tags)
{
    struct hvd_req r = req("emb", 1024);
    r.kind = HVD_REQ_REDUCESCATTER;
    r.row = 4;
    r.shape = 77;
    cr_expect_str_eq(rs_mismatch(r), "", "rank 0 gave no shape");
    struct hvd_neg t;
    struct hvd_resp *o = NULL;
    size_t n = 0;
    struct hvd_req a = req("w", 24), b = req("w", 24);
    a.shape = 1;
    b.shape = 2;
    hvd__neg_init(&t, 2, 0);
    hvd__neg_add(&t, 1, &b, &o, &n);
    hvd__neg_add(&t, 0, &a, &o, &n);
    cr_assert_eq(n, 1);
    cr_expect_eq(o[0].error, HVD_EMISMATCH);
    cr_expect_str_eq(o[0].msg, "Mismatched allreduce tensor shapes: rank 0 "
                               "and rank 1 gave tensors of different shapes "
                               "for tensor 'w'");
    free_resp(o, n);
    o = NULL;
    n = 0;
    b = req("v", 24);
    a = req("v", 24);
    a.shape = b.shape = 3;
    hvd__neg_add(&t, 0, &a, &o, &n);
    hvd__neg_add(&t, 1, &b, &o, &n);
    cr_assert_eq(n, 1);
    cr_expect_eq(o[0].error, 0);
    free_resp(o, n);
    hvd__neg_close(&t);
}

Test(negotiate, reducescatter_mismatches)
{
    struct hvd_req r = req("emb", 1024);
    r.kind = HVD_REQ_REDUCESCATTER;
    r.row = 4;
    cr_expect_str_eq(rs_mismatch(r), "");
    r.row = 8;
    cr_expect_str_eq(rs_mismatch(r),
                     "Mismatched reducescatter row sizes: rank 0 sent rows "
                     "of 4 elements, rank 2 rows of 8 for tensor 'emb'");
    r.row = 4;
    r.count = 512;
    cr_expect_str_eq(rs_mismatch(r),
                     "Mismatched reducescatter tensor sizes: rank 0 sent "
                     "1024 elements, rank 2 sent 512 for tensor 'emb'");
    r.count = 1024;
    r.op = HVD_MIN;
    cr_expect_str_eq(rs_mismatch(r),
                     "Mismatched reducescatter operations: rank 0 asked for "
                     "sum, rank 2 for min of tensor 'emb'");
    r.op = HVD_SUM;
    r.kind = HVD_REQ_ALLREDUCE;
    r.row = 0;
    cr_expect_str_eq(rs_mismatch(r),
                     "Mismatched operations: rank 0 asked for reducescatter, "
                     "rank 2 for allreduce of tensor 'emb'");
}

/* Rank 0 against ranks 1 and 2: the same message in every arrival order. */
Test(negotiate, a_mismatch_names_the_same_ranks_whatever_the_order)
{
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int o = 0; o < 6; o++) {
        struct hvd_neg t;
        struct hvd_resp *r = NULL;
        size_t n = 0;
        hvd__neg_init(&t, 3, 0);
        for (int i = 0; i < 3; i++) {
            struct hvd_req q = req("where", 4);
            q.device = orders[o][i] == 0;
            hvd__neg_add(&t, orders[o][i], &q, &r, &n);
        }
        cr_assert_eq(n, 1);
        cr_expect_eq(r[0].error, HVD_EMISMATCH);
        cr_expect_str_eq(r[0].msg,
                         "Mismatched allreduce memory: rank 0 gave CUDA "
                         "device memory, rank 1 host memory for tensor "
                         "'where'",
                         "order %d %d %d", orders[o][0], orders[o][1],
                         orders[o][2]);
        free_resp(r, n);
        hvd__neg_close(&t);
    }
}

Test(negotiate, a_name_asked_twice_by_one_rank_fails)
{
    struct hvd_neg t;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    struct hvd_req a = req("a", 1);
    hvd__neg_init(&t, 2, 0);
    hvd__neg_add(&t, 0, &a, &r, &n);
    hvd__neg_add(&t, 0, &a, &r, &n);
    hvd__neg_add(&t, 1, &a, &r, &n);
    cr_assert_eq(n, 1);
    cr_expect_eq(r[0].error, HVD_EMISMATCH);
    cr_expect_str_eq(r[0].msg, "rank 0 submitted tensor 'a' again before it "
                               "completed");
    free_resp(r, n);
    hvd__neg_close(&t);
}

Test(negotiate, many_names_grow_the_table)
{
    struct hvd_neg t;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    char name[32];
    hvd__neg_init(&t, 2, 0);
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "t%d", i);
        struct hvd_req q = req(name, 1);
        cr_assert_eq(hvd__neg_add(&t, 0, &q, &r, &n), 0);
    }
    for (int i = 4999; i >= 0; i--) {
        snprintf(name, sizeof(name), "t%d", i);
        struct hvd_req q = req(name, 1);
        cr_assert_eq(hvd__neg_add(&t, 1, &q, &r, &n), 0);
    }
    cr_assert_eq(n, 5000);
    cr_expect_str_eq(r[0].req.name, "t4999");
    cr_expect_str_eq(r[4999].req.name, "t0");
    free_resp(r, n);
    hvd__neg_close(&t);
}

Test(negotiate, wire_round_trip_and_truncation)
{
    struct hvd_neg t;
    struct hvd_req in[2] = {req("alpha", 1ull << 40), req("", 0)};
    in[1].kind = HVD_REQ_BROADCAST;
    in[1].root = -3;
    in[1].compress = 1;
    in[1].postscale = 0.25;
    in[0].row = (1ull << 35) + 3;
    in[1].shape = 0x123456789abcdef0ull;
    uint8_t *p;
    size_t len, n;
    struct hvd_req *out;
    const uint8_t *bits;
    hvd__neg_init(&t, 2, 0);
    cr_assert_eq(hvd__neg_encode(&t, in, 2, &p, &len), 0);
    cr_assert_eq(hvd__neg_decode(&t, p, len, &bits, &out, &n), 0);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(out[0].name, "alpha");
    cr_expect_eq(out[0].count, 1ull << 40);
    cr_expect_eq(out[0].row, (1ull << 35) + 3);
    cr_expect_eq(out[1].kind, HVD_REQ_BROADCAST);
    cr_expect_eq(out[1].root, -3);
    cr_expect_eq(out[1].compress, 1);
    cr_expect_eq(out[1].postscale, 0.25);
    cr_expect_eq(out[1].shape, 0x123456789abcdef0ull);
    cr_expect_eq(out[0].shape, 0);
    hvd__neg_free_reqs(out, n);
    for (size_t cut = 0; cut < len; cut++) {
        cr_expect_lt(hvd__neg_decode(&t, p, cut, &bits, &out, &n), 0, "cut %zu",
                     cut);
        cr_expect_null(out);
    }
    free(p);
    uint8_t forged[] = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    cr_expect_eq(hvd__neg_decode(&t, forged, sizeof(forged), &bits, &out, &n),
                 HVD_EPROTO);
    hvd__neg_close(&t);
}

Test(negotiate, cached_requests_travel_as_bits)
{
    struct hvd_neg t;
    struct hvd_req a = req("layer.weight", 4096), b = req("layer.bias", 64);
    struct hvd_req c = req("other", 1);
    struct hvd_resp *r = NULL;
    uint8_t *p, *q;
    size_t plen, qlen, n, nr = 0;
    struct hvd_req *out;
    const uint8_t *bits;

    hvd__neg_init(&t, 2, 2);
    cr_assert_eq(hvd__neg_encode(&t, &a, 1, &p, &plen), 0);
    hvd__neg_cache_put(&t, &a);
    hvd__neg_cache_put(&t, &b);
    hvd__neg_cache_put(&t, &c); /* no room: capacity 2 */
    struct hvd_req both[2] = {b, a};
    cr_assert_eq(hvd__neg_encode(&t, both, 2, &q, &qlen), 0);
    cr_expect_eq(qlen, 4 + 1 + 4, "two cached requests are two bits");
    cr_assert_eq(hvd__neg_decode(&t, q, qlen, &bits, &out, &n), 0);
    cr_expect_eq(n, 0);
    cr_expect_eq(bits[0], 3);
    hvd__neg_free_reqs(out, n);
    free(q);
    /* Ready at once, or through the table when only one rank sent it. */
    cr_assert_eq(hvd__neg_ready_cached(&t, 1, &r, &nr), 0);
    cr_assert_eq(hvd__neg_add_cached(&t, 0, 0, &r, &nr), 0);
    cr_expect_eq(nr, 1);
    cr_assert_eq(hvd__neg_add_cached(&t, 1, 0, &r, &nr), 0);
    cr_assert_eq(nr, 2);
    cr_expect_str_eq(r[0].req.name, "layer.bias");
    cr_expect_str_eq(r[1].req.name, "layer.weight");
    cr_expect_eq(hvd__neg_ready_cached(&t, 2, &r, &nr), HVD_EPROTO);
    free_resp(r, nr);
    /* A request that differs from the cached one in any field travels in
     * full, so the table can still tell the ranks apart. */
    a.count = 4097;
    cr_assert_eq(hvd__neg_encode(&t, &a, 1, &q, &qlen), 0);
    cr_expect_eq(qlen, plen + 1);
    free(q);
    free(p);
    /* Once answered, the new shape takes the name's entry over, even with
     * the cache full, and travels as a bit again. */
    hvd__neg_cache_put(&t, &a);
    cr_expect_eq(hvd__neg_cache_id(&t, &a), 0);
    cr_assert_eq(hvd__neg_encode(&t, &a, 1, &q, &qlen), 0);
    cr_expect_eq(qlen, 4 + 1 + 4);
    free(q);
    /* Bits beyond the cache are an error, not a read out of bounds. */
    uint8_t bad[] = {0, 0, 0, 1, 0x04, 0, 0, 0, 0};
    cr_expect_eq(hvd__neg_decode(&t, bad, sizeof(bad), &bits, &out, &n),
                 HVD_EPROTO);
    hvd__neg_close(&t);
}

/* A table of 4 ranks with process set {1, 3} (id 1). */
static void with_set(struct hvd_neg *t, struct hvd_psets *ps)
{
    int odd[2] = {3, 1};
    char err[128];
    cr_assert_eq(hvd__pset_init(ps, 4, 0), 0);
    cr_assert_eq(hvd__pset_add(ps, odd, 2, err, sizeof(err)), 1, "%s", err);
    cr_assert_eq(hvd__neg_init(t, 4, 0), 0);
    t->psets = ps;
}

Test(negotiate, a_set_waits_for_its_ranks_only_and_names_are_per_set)
{
    struct hvd_neg t;
    struct hvd_psets ps;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    with_set(&t, &ps);
    struct hvd_req a = req("g", 4), b = req("g", 8);
    b.pset = 1;
    cr_assert_eq(hvd__neg_add(&t, 1, &b, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 0, &a, &r, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(hvd__neg_add(&t, 3, &b, &r, &n), 0);
    /* The set's 'g' is ready; every rank's 'g' still waits. */
    cr_assert_eq(n, 1);
    cr_assert_eq(r[0].error, 0, "%s", r[0].msg);
    cr_assert_eq(r[0].req.pset, 1);
    cr_assert_eq(r[0].req.count, 8);
    cr_assert_eq(t.used, 1);
    /* A rank outside the set gets an error, not a hang. */
    struct hvd_req c = req("h", 1);
    c.pset = 1;
    cr_assert_eq(hvd__neg_add(&t, 2, &c, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 1, &c, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 3, &c, &r, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(r[1].error, HVD_EINVAL);
    cr_assert(strstr(r[1].msg, "rank 2") && strstr(r[1].msg, "not include"),
              "%s", r[1].msg);
    free_resp(r, n);
    hvd__neg_close(&t);
    hvd__pset_close(&ps);
}

Test(negotiate, joined_ranks_count_as_asked_until_everyone_joins)
{
    struct hvd_neg t;
    struct hvd_psets ps;
    struct hvd_resp *r = NULL;
    size_t n = 0;
    with_set(&t, &ps);
    struct hvd_req a = req("a", 4), j = req("join", 0), bc = req("b", 4);
    j.kind = HVD_REQ_JOIN;
    bc.kind = HVD_REQ_BROADCAST;
    cr_assert_eq(hvd__neg_add(&t, 0, &a, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 1, &a, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 3, &a, &r, &n), 0);
    /* Rank 2 joins: the waiting allreduce is ready before the join. */
    cr_assert_eq(hvd__neg_add(&t, 2, &j, &r, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(r[0].req.name, "a");
    cr_assert_eq(r[0].error, 0);
    /* A broadcast fails while rank 2 has joined, at once for each rank
     * that asks: ranks whose unnamed calls drifted apart around the join
     * must not wait for one another. */
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(hvd__neg_add(&t, k, &bc, &r, &n), 0);
        cr_assert_eq(n, 2 + (size_t)k);
        cr_assert_eq(r[1 + k].error, HVD_EINVAL, "%s", r[1 + k].msg);
        cr_assert(strstr(r[1 + k].msg, "joined"), "%s", r[1 + k].msg);
    }
    cr_assert_eq(hvd__neg_add(&t, 3, &bc, &r, &n), 0);
    cr_assert_eq(n, 4);
    /* A set without a joined rank is not affected. */
    struct hvd_req s = bc;
    s.pset = 1;
    s.name = "s";
    cr_assert_eq(hvd__neg_add(&t, 1, &s, &r, &n), 0);
    cr_assert_eq(n, 4, "it waits for rank 3");
    cr_assert_eq(hvd__neg_add(&t, 3, &s, &r, &n), 0);
    cr_assert_eq(n, 5);
    cr_assert_eq(r[4].error, 0, "%s", r[4].msg);
    /* The join answers once all have joined, with the last rank. */
    cr_assert_eq(hvd__neg_add(&t, 3, &j, &r, &n), 0);
    cr_assert_eq(hvd__neg_add(&t, 0, &j, &r, &n), 0);
    cr_assert_eq(n, 5);
    cr_assert_eq(hvd__neg_add(&t, 1, &j, &r, &n), 0);
    cr_assert_eq(n, 6);
    cr_assert_eq(r[5].req.kind, HVD_REQ_JOIN);
    cr_assert_eq(r[5].req.root, 1);
    cr_assert_eq(t.njoined, 0);
    /* Afterwards every rank must ask again. */
    cr_assert_eq(hvd__neg_add(&t, 0, &a, &r, &n), 0);
    cr_assert_eq(n, 6);
    free_resp(r, n);
    hvd__neg_close(&t);
    hvd__pset_close(&ps);
}

Test(negotiate, the_process_set_travels_on_the_wire)
{
    struct hvd_neg t;
    cr_assert_eq(hvd__neg_init(&t, 2, 0), 0);
    struct hvd_req q = req("w", 3);
    q.pset = 7;
    uint8_t *enc;
    size_t len, got;
    const uint8_t *bits;
    struct hvd_req *back;
    cr_assert_eq(hvd__neg_encode(&t, &q, 1, &enc, &len), 0);
    cr_assert_eq(hvd__neg_decode(&t, enc, len, &bits, &back, &got), 0);
    cr_assert_eq(got, 1);
    cr_assert_eq(back[0].pset, 7);
    hvd__neg_free_reqs(back, got);
    free(enc);
    hvd__neg_close(&t);
}
