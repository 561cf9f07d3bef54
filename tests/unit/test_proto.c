/* Unit tests for the agent channel messages (launcher/lib/proto.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/frame.h"
#include "common/hvd_err.h"
#include "launcher/lib/proto.h"
#include "common/wire.h"

static void sample(struct hvd_jobspec *js)
{
    hvd_jobspec_init(js);
    js->cwd = strdup("/work dir");
    hvd_strvec_push(&js->argv, "python3");
    hvd_strvec_push(&js->argv, "train.py");
    hvd_strvec_push(&js->env, "PATH=/usr/bin");
    js->kill_grace_ms = 5000;
    js->gpu_pinning = 1;
    js->bind = 1;
    js->carry_rdv = 1;
    struct hvd_jobrank *r = hvd_jobspec_add_rank(js, 4, 0);
    hvd_strvec_push(&r->env, "HOROVOD_RANK=4");
    r = hvd_jobspec_add_rank(js, 5, 1);
    hvd_strvec_push(&r->env, "HOROVOD_RANK=5");
}

static void encode(const struct hvd_jobspec *js, uint8_t **f, size_t *len)
{
    cr_assert_eq(hvd_jobspec_encode(js, f, len), 0);
    cr_assert_eq((*f)[3], HVD_MSG_JOB);
}

Test(proto, round_trip)
{
    struct hvd_jobspec in, out;
    uint8_t *f;
    size_t len;

    sample(&in);
    encode(&in, &f, &len);
    hvd_jobspec_init(&out);
    cr_assert_eq(
        hvd_jobspec_decode(&out, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR), 0);
    cr_expect_str_eq(out.cwd, "/work dir");
    cr_assert_eq(out.argv.n, 2);
    cr_expect_str_eq(out.argv.v[1], "train.py");
    cr_expect_null(out.argv.v[2]);
    cr_expect_str_eq(out.env.v[0], "PATH=/usr/bin");
    cr_expect_eq(out.kill_grace_ms, 5000);
    cr_expect_eq(out.gpu_pinning, 1);
    cr_expect_eq(out.bind, 1);
    cr_expect_eq(out.carry_rdv, 1);
    cr_assert_eq(out.nranks, 2);
    cr_expect_eq(out.ranks[1].rank, 5);
    cr_expect_eq(out.ranks[1].local_rank, 1);
    cr_expect_str_eq(out.ranks[1].env.v[0], "HOROVOD_RANK=5");
    hvd_jobspec_close(&out);
    hvd_jobspec_close(&in);
    free(f);
}

Test(proto, every_truncation_is_rejected)
{
    struct hvd_jobspec in;
    uint8_t *f;
    size_t len;

    sample(&in);
    encode(&in, &f, &len);
    for (size_t cut = 0; cut < len - HVD_FRAME_HDR; cut++) {
        struct hvd_jobspec out;
        hvd_jobspec_init(&out);
        int rc = hvd_jobspec_decode(&out, f + HVD_FRAME_HDR, cut);
        cr_expect_lt(rc, 0, "cut at %zu accepted", cut);
        hvd_jobspec_close(&out);
    }
    hvd_jobspec_close(&in);
    free(f);
}

static int decode_modified(void (*mod)(struct hvd_jobspec *))
{
    struct hvd_jobspec in, out;
    uint8_t *f;
    size_t len;
    sample(&in);
    mod(&in);
    encode(&in, &f, &len);
    hvd_jobspec_init(&out);
    int rc = hvd_jobspec_decode(&out, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR);
    hvd_jobspec_close(&out);
    hvd_jobspec_close(&in);
    free(f);
    return rc;
}

static void dup_rank(struct hvd_jobspec *js)
{
    js->ranks[1].rank = 4;
}

static void no_ranks(struct hvd_jobspec *js)
{
    for (uint32_t i = 0; i < js->nranks; i++)
        hvd_strvec_close(&js->ranks[i].env);
    js->nranks = 0;
}

static void no_argv(struct hvd_jobspec *js)
{
    hvd_strvec_close(&js->argv);
}

static void bad_carry(struct hvd_jobspec *js)
{
    js->carry_rdv = 2;
}

Test(proto, invalid_specs_are_rejected)
{
    cr_expect_eq(decode_modified(dup_rank), HVD_EPROTO);
    cr_expect_eq(decode_modified(bad_carry), HVD_EPROTO);
    cr_expect_eq(decode_modified(no_ranks), HVD_EPROTO);
    cr_expect_eq(decode_modified(no_argv), HVD_EPROTO);
}

Test(proto, forged_counts_do_not_allocate)
{
    /* cwd "", then an argv count of 4 billion with no data behind it. */
    uint8_t p[] = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    struct hvd_jobspec out;
    hvd_jobspec_init(&out);
    cr_expect_eq(hvd_jobspec_decode(&out, p, sizeof(p)), HVD_EPROTO);
    cr_expect_eq(out.argv.n, 0);
    hvd_jobspec_close(&out);
}

Test(proto, trailing_garbage_is_rejected)
{
    struct hvd_jobspec in, out;
    uint8_t *f;
    size_t len;
    sample(&in);
    encode(&in, &f, &len);
    uint8_t *g = malloc(len + 1);
    memcpy(g, f, len);
    g[len] = 0;
    hvd_jobspec_init(&out);
    cr_expect_eq(
        hvd_jobspec_decode(&out, g + HVD_FRAME_HDR, len + 1 - HVD_FRAME_HDR),
        HVD_EPROTO);
    hvd_jobspec_close(&out);
    hvd_jobspec_close(&in);
    free(f);
    free(g);
}

/* A HELLO payload as launcher/agent/agent.c writes it, in *len bytes (free()).
 */
static uint8_t *hello(uint32_t version, const char *host, size_t hostlen,
                      int32_t gpus, int32_t port, size_t *len)
{
    struct hvd_wbuf w;
    uint8_t *f, *p;
    size_t flen;

    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, version);
    hvd_wbuf_bytes(&w, host, hostlen);
    hvd_wbuf_i32(&w, gpus);
    hvd_wbuf_i32(&w, port);
    cr_assert_eq(hvd_wbuf_finish(&w, HVD_MSG_HELLO, &f, &flen), 0);
    *len = flen - HVD_FRAME_HDR;
    p = malloc(*len + 1);
    cr_assert_not_null(p);
    memcpy(p, f + HVD_FRAME_HDR, *len);
    free(f);
    return p;
}

Test(proto, hello_round_trip)
{
    struct hvd_hello h;
    size_t len;
    uint8_t *p = hello(HVD_PROTO_VERSION, "node-1", 6, 4, 29500, &len);

    cr_assert_eq(hvd_hello_decode(&h, p, len), 0);
    cr_expect_eq(h.version, HVD_PROTO_VERSION);
    cr_expect_str_eq(h.host, "node-1");
    cr_expect_eq(h.gpus, 4);
    cr_expect_eq(h.port, 29500);
    hvd_hello_close(&h);
    cr_expect_null(h.host);
    hvd_hello_close(&h); /* twice is safe */
    hvd_hello_close(NULL);
    free(p);
}

/* Every cut of a well-formed HELLO is truncated, never another version:
 * that is what makes horovodrun say "malformed" instead of "upgrade". */
Test(proto, hello_truncated_is_not_a_version_mismatch)
{
    struct hvd_hello h;
    size_t len;
    uint8_t *p = hello(HVD_PROTO_VERSION, "node-1", 6, 0, 1234, &len);

    for (size_t cut = 0; cut < len; cut++) {
        cr_expect_eq(hvd_hello_decode(&h, p, cut), HVD_ETRUNC, "cut at %zu",
                     cut);
        cr_expect_null(h.host);
        cr_expect_eq(h.version, cut >= 4 ? HVD_PROTO_VERSION : 0u);
        hvd_hello_close(&h);
    }
    free(p);
}

Test(proto, hello_other_version)
{
    struct hvd_hello h;
    size_t len;
    uint8_t *p = hello(HVD_PROTO_VERSION + 1, "node-1", 6, 0, 1234, &len);

    cr_expect_eq(hvd_hello_decode(&h, p, len), HVD_ENOTSUP);
    cr_expect_eq(h.version, HVD_PROTO_VERSION + 1);
    cr_expect_null(h.host);
    /* Another version may lay out the rest differently: only its version
     * word is read, so a short body still says "another version". */
    cr_expect_eq(hvd_hello_decode(&h, p, 4), HVD_ENOTSUP);
    cr_expect_eq(h.version, HVD_PROTO_VERSION + 1);
    free(p);
}

Test(proto, hello_malformed)
{
    struct hvd_hello h;
    size_t len;
    uint8_t *p = hello(HVD_PROTO_VERSION, "node-1", 6, 0, 1234, &len);

    /* A byte past the end. */
    p[len] = 0;
    cr_expect_eq(hvd_hello_decode(&h, p, len + 1), HVD_EPROTO);
    cr_expect_null(h.host);
    free(p);
    /* A host name with a NUL in it. */
    p = hello(HVD_PROTO_VERSION, "node\0-1", 7, 0, 1234, &len);
    cr_expect_eq(hvd_hello_decode(&h, p, len), HVD_EPROTO);
    cr_expect_null(h.host);
    free(p);
    /* A host name longer than the payload. */
    p = hello(HVD_PROTO_VERSION, "node-1", 6, 0, 1234, &len);
    p[7] = 200;
    cr_expect_eq(hvd_hello_decode(&h, p, len), HVD_ETRUNC);
    cr_expect_null(h.host);
    free(p);
}

/* The decoder leaves range checks to the launcher, which names the value. */
Test(proto, hello_values_are_not_judged)
{
    struct hvd_hello h;
    size_t len;
    uint8_t *p = hello(HVD_PROTO_VERSION, "", 0, -1, 0, &len);

    cr_assert_eq(hvd_hello_decode(&h, p, len), 0);
    cr_expect_str_eq(h.host, "");
    cr_expect_eq(h.gpus, -1);
    cr_expect_eq(h.port, 0);
    hvd_hello_close(&h);
    free(p);
}

/* The JOB of sample(), decoded as the agent holds it. */
static void running(struct hvd_jobspec *js)
{
    struct hvd_jobspec in;
    uint8_t *f;
    size_t len;

    sample(&in);
    encode(&in, &f, &len);
    hvd_jobspec_init(js);
    cr_assert_eq(hvd_jobspec_decode(js, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR),
                 0);
    hvd_jobspec_close(&in);
    free(f);
}

/* A RANKS frame for ranks 7 (local 1) and 9 (local 0), or for n of them
 * with every number set to `rank`. */
static uint8_t *more_ranks(uint32_t n, uint32_t rank, size_t *len)
{
    struct hvd_jobspec tmp;
    uint8_t *f;

    hvd_jobspec_init(&tmp);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t num = rank ? rank : (i == 0 ? 7 : 9);
        struct hvd_jobrank *r = hvd_jobspec_add_rank(&tmp, num, i == 0);
        cr_assert_not_null(r);
        char entry[32];
        snprintf(entry, sizeof(entry), "HOROVOD_RANK=%u", num);
        hvd_strvec_push(&r->env, entry);
    }
    cr_assert_eq(hvd_ranks_encode(tmp.ranks, n, &f, len), 0);
    cr_assert_eq(f[3], HVD_MSG_RANKS);
    hvd_jobspec_close(&tmp);
    return f;
}

/* Decodes the RANKS frame f (header included) onto js. */
static int decode_more(struct hvd_jobspec *js, const uint8_t *f, size_t len)
{
    return hvd_jobspec_decode_more(js, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR);
}

/* The JOB's two ranks are still all js holds. */
static void expect_unchanged(const struct hvd_jobspec *js)
{
    cr_expect_eq(js->nranks, 2);
    cr_expect_eq(js->ranks[0].rank, 4);
    cr_expect_eq(js->ranks[1].rank, 5);
}

Test(proto, ranks_round_trip)
{
    struct hvd_jobspec js;
    size_t len;

    running(&js);
    uint8_t *f = more_ranks(2, 0, &len);
    cr_assert_eq(decode_more(&js, f, len), 0);
    cr_assert_eq(js.nranks, 4);
    cr_expect_eq(js.ranks[1].rank, 5);
    cr_expect_eq(js.ranks[2].rank, 7);
    cr_expect_eq(js.ranks[2].local_rank, 1);
    cr_assert_eq(js.ranks[2].env.n, 1);
    cr_expect_str_eq(js.ranks[2].env.v[0], "HOROVOD_RANK=7");
    cr_expect_eq(js.ranks[3].rank, 9);
    cr_expect_eq(js.ranks[3].local_rank, 0);
    cr_expect_str_eq(js.ranks[3].env.v[0], "HOROVOD_RANK=9");
    /* The job's other fields are left alone. */
    cr_expect_str_eq(js.cwd, "/work dir");
    cr_expect_eq(js.kill_grace_ms, 5000);
    /* The same ranks again are duplicates now. */
    cr_expect_eq(decode_more(&js, f, len), HVD_EPROTO);
    cr_expect_eq(js.nranks, 4);
    hvd_jobspec_close(&js);
    free(f);
}

/* JOB and RANKS lay a rank out alike: a JOB's ranks are a RANKS payload
 * once the fields before them are skipped. */
Test(proto, ranks_layout_is_jobs)
{
    struct hvd_jobspec in;
    uint8_t *job, *ranks;
    size_t jlen, rlen;

    sample(&in);
    encode(&in, &job, &jlen);
    cr_assert_eq(hvd_ranks_encode(in.ranks, in.nranks, &ranks, &rlen), 0);
    size_t rpay = rlen - HVD_FRAME_HDR;
    cr_assert_gt(jlen, rlen);
    cr_expect_eq(memcmp(job + jlen - rpay, ranks + HVD_FRAME_HDR, rpay), 0);
    hvd_jobspec_close(&in);
    free(job);
    free(ranks);
}

Test(proto, ranks_every_truncation_is_rejected)
{
    struct hvd_jobspec js;
    size_t len;

    running(&js);
    uint8_t *f = more_ranks(2, 0, &len);
    for (size_t cut = 0; cut < len - HVD_FRAME_HDR; cut++) {
        int rc = hvd_jobspec_decode_more(&js, f + HVD_FRAME_HDR, cut);
        cr_expect_lt(rc, 0, "cut at %zu accepted", cut);
        expect_unchanged(&js);
    }
    hvd_jobspec_close(&js);
    free(f);
}

Test(proto, ranks_trailing_garbage_is_rejected)
{
    struct hvd_jobspec js;
    size_t len;

    running(&js);
    uint8_t *f = more_ranks(2, 0, &len);
    uint8_t *g = malloc(len + 1);
    cr_assert_not_null(g);
    memcpy(g, f, len);
    g[len] = 0;
    cr_expect_eq(hvd_jobspec_decode_more(&js, g + HVD_FRAME_HDR,
                                         len + 1 - HVD_FRAME_HDR),
                 HVD_EPROTO);
    expect_unchanged(&js);
    hvd_jobspec_close(&js);
    free(f);
    free(g);
}

Test(proto, ranks_count_zero_is_rejected)
{
    struct hvd_jobspec js;
    uint8_t *f;
    size_t len;

    running(&js);
    cr_assert_eq(hvd_ranks_encode(NULL, 0, &f, &len), 0);
    cr_assert_eq(len, HVD_FRAME_HDR + 4);
    cr_expect_eq(hvd_jobspec_decode_more(&js, f + HVD_FRAME_HDR, 4),
                 HVD_EPROTO);
    expect_unchanged(&js);
    hvd_jobspec_close(&js);
    free(f);
}

Test(proto, ranks_forged_count_does_not_allocate)
{
    /* 4 billion ranks, then one rank's worth of bytes. */
    uint8_t p[4 + 12] = {0xff, 0xff, 0xff, 0xff};
    struct hvd_jobspec js;

    running(&js);
    cr_expect_eq(hvd_jobspec_decode_more(&js, p, sizeof(p)), HVD_EPROTO);
    expect_unchanged(&js);
    /* Two ranks announced, room for one. */
    p[0] = p[1] = p[2] = 0;
    p[3] = 2;
    cr_expect_eq(hvd_jobspec_decode_more(&js, p, sizeof(p)), HVD_EPROTO);
    expect_unchanged(&js);
    hvd_jobspec_close(&js);
}

Test(proto, ranks_duplicates_are_rejected)
{
    struct hvd_jobspec js;
    size_t len;
    uint8_t *f;

    running(&js);
    /* A rank the job already has. */
    f = more_ranks(1, 5, &len);
    cr_expect_eq(decode_more(&js, f, len), HVD_EPROTO);
    expect_unchanged(&js);
    free(f);
    /* The same new rank twice. */
    f = more_ranks(2, 8, &len);
    cr_expect_eq(decode_more(&js, f, len), HVD_EPROTO);
    expect_unchanged(&js);
    free(f);
    hvd_jobspec_close(&js);
}

Test(proto, kill_encoding)
{
    /* u32 rank, big-endian, then u8 now. */
    static const uint8_t want[] = {0x01, 0x02, 0x03, 0x04, 1};
    uint8_t hdr[HVD_FRAME_HDR];
    uint8_t *f;
    size_t len;

    hvd_frame_header(hdr, HVD_MSG_KILL, sizeof(want));
    cr_assert_eq(hvd_kill_encode(0x01020304u, 1, &f, &len), 0);
    cr_assert_eq(len, HVD_FRAME_HDR + sizeof(want));
    cr_expect_eq(memcmp(f, hdr, HVD_FRAME_HDR), 0);
    cr_expect_eq(memcmp(f + HVD_FRAME_HDR, want, sizeof(want)), 0);
    free(f);

    struct hvd_rbuf r;
    cr_assert_eq(hvd_kill_encode(7, 0, &f, &len), 0);
    hvd_rbuf_init(&r, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR);
    cr_expect_eq(hvd_rbuf_u32(&r), 7);
    cr_expect_eq(hvd_rbuf_u8(&r), 0);
    cr_expect_eq(hvd_rbuf_done(&r), 0);
    free(f);
}
