/* Unit tests for the payload writer and reader (common/wire.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "common/wire.h"

Test(wire, round_trip)
{
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;

    hvd_wbuf_init(&w);
    hvd_wbuf_u8(&w, 200);
    hvd_wbuf_u32(&w, 0xdeadbeef);
    hvd_wbuf_i32(&w, -5);
    hvd_wbuf_str(&w, "name");
    hvd_wbuf_bytes(&w, "", 0);
    hvd_wbuf_raw(&w, "tail", 4);
    cr_assert_eq(hvd_wbuf_finish(&w, 42, &f, &len), 0);
    cr_assert_eq(len, HVD_FRAME_HDR + 1 + 4 + 4 + 8 + 4 + 4);
    cr_expect_eq(f[3], 42);

    struct hvd_rbuf r;
    size_t n;
    hvd_rbuf_init(&r, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR);
    cr_expect_eq(hvd_rbuf_u8(&r), 200);
    cr_expect_eq(hvd_rbuf_u32(&r), 0xdeadbeef);
    cr_expect_eq(hvd_rbuf_i32(&r), -5);
    char *s = hvd_rbuf_strdup(&r);
    cr_expect_str_eq(s, "name");
    free(s);
    cr_expect_not_null(hvd_rbuf_bytes(&r, &n));
    cr_expect_eq(n, 0);
    const uint8_t *rest = hvd_rbuf_rest(&r, &n);
    cr_expect_eq(n, 4);
    cr_expect_arr_eq(rest, "tail", 4);
    cr_expect_eq(hvd_rbuf_done(&r), 0);
    free(f);
    hvd_wbuf_close(&w);
}

Test(wire, truncated_reads_fail_and_stay_failed)
{
    uint8_t p[] = {0, 0, 0, 10, 'a', 'b'}; /* says 10 bytes, has 2 */
    struct hvd_rbuf r;
    size_t n;

    hvd_rbuf_init(&r, p, sizeof(p));
    cr_expect_null(hvd_rbuf_bytes(&r, &n));
    cr_expect_eq(r.err, HVD_ETRUNC);
    cr_expect_eq(hvd_rbuf_u32(&r), 0);
    cr_expect_eq(hvd_rbuf_done(&r), HVD_ETRUNC);
}

Test(wire, trailing_bytes_are_an_error)
{
    uint8_t p[] = {1, 2};
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, p, sizeof(p));
    hvd_rbuf_u8(&r);
    cr_expect_eq(hvd_rbuf_done(&r), HVD_EPROTO);
}

Test(wire, embedded_nul_in_string_is_rejected)
{
    uint8_t p[] = {0, 0, 0, 3, 'a', 0, 'b'};
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, p, sizeof(p));
    cr_expect_null(hvd_rbuf_strdup(&r));
    cr_expect_eq(r.err, HVD_EPROTO);
}

Test(wire, payload_over_the_frame_limit_fails)
{
    struct hvd_wbuf w;
    uint8_t *f = NULL;
    size_t len;
    char *big = calloc(1, HVD_FRAME_MAX);

    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, big, HVD_FRAME_MAX);
    hvd_wbuf_u8(&w, 1);
    cr_expect_eq(hvd_wbuf_finish(&w, 1, &f, &len), HVD_ETOOBIG);
    cr_expect_null(f);
    /* The writer is reusable afterwards. */
    hvd_wbuf_u8(&w, 1);
    cr_expect_eq(hvd_wbuf_finish(&w, 1, &f, &len), 0);
    cr_expect_eq(len, HVD_FRAME_HDR + 1);
    free(f);
    free(big);
    hvd_wbuf_close(&w);
}

Test(wire, empty_frame)
{
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    cr_assert_eq(hvd_wbuf_finish(&w, 5, &f, &len), 0);
    cr_expect_eq(len, HVD_FRAME_HDR);
    uint8_t want[] = {0x48, 0x56, HVD_FRAME_VERSION, 5, 0, 0, 0, 0};
    cr_expect_arr_eq(f, want, sizeof(want));
    free(f);
    hvd_wbuf_close(&w);
}
