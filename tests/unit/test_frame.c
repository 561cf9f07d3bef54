/* Unit tests for the frame reader and header writer (common/frame.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/frame.h"
#include "common/hvd_err.h"

static size_t make_frame(uint8_t *out, uint8_t type, const char *payload)
{
    size_t len = strlen(payload);
    hvd_frame_header(out, type, (uint32_t)len);
    memcpy(out + HVD_FRAME_HDR, payload, len);
    return HVD_FRAME_HDR + len;
}

Test(frame, header_layout_is_big_endian)
{
    uint8_t h[HVD_FRAME_HDR];
    hvd_frame_header(h, 7, 0x01020304);
    uint8_t want[] = {0x48, 0x56, HVD_FRAME_VERSION, 7, 1, 2, 3, 4};
    cr_expect_arr_eq(h, want, sizeof(want));
}

Test(frame, two_frames_in_one_push)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t buf[64];
    size_t n = make_frame(buf, 1, "abc");
    n += make_frame(buf + n, 2, "");

    hvd_frame_reader_init(&r, 100);
    cr_assert_eq(hvd_frame_reader_push(&r, buf, n), 0);
    cr_assert_eq(hvd_frame_reader_next(&r, &f), 1);
    cr_expect_eq(f.type, 1);
    cr_expect_eq(f.len, 3);
    cr_expect_arr_eq(f.payload, "abc", 3);
    cr_assert_eq(hvd_frame_reader_next(&r, &f), 1);
    cr_expect_eq(f.type, 2);
    cr_expect_eq(f.len, 0);
    cr_expect_eq(hvd_frame_reader_next(&r, &f), 0);
    hvd_frame_reader_close(&r);
}

Test(frame, byte_by_byte_delivery)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t buf[64];
    size_t n = make_frame(buf, 9, "hello world");
    int got = 0;

    hvd_frame_reader_init(&r, 100);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(hvd_frame_reader_push(&r, buf + i, 1), 0);
        int rc = hvd_frame_reader_next(&r, &f);
        /* Truncated: nothing until the last byte arrives. */
        cr_assert_eq(rc, i + 1 == n ? 1 : 0, "byte %zu", i);
        got += rc;
    }
    cr_expect_eq(got, 1);
    cr_expect_arr_eq(f.payload, "hello world", 11);
    hvd_frame_reader_close(&r);
}

Test(frame, oversized_length_is_an_error_not_an_allocation)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t h[HVD_FRAME_HDR];

    hvd_frame_header(h, 1, 0xffffffffu);
    hvd_frame_reader_init(&r, 1024);
    cr_assert_eq(hvd_frame_reader_push(&r, h, sizeof(h)), 0);
    cr_expect_eq(hvd_frame_reader_next(&r, &f), HVD_ETOOBIG);
    /* The buffer holds only what was pushed. */
    cr_expect_leq(r.cap, 4096);
    hvd_frame_reader_close(&r);
}

Test(frame, limit_is_inclusive)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t buf[HVD_FRAME_HDR + 16] = {0};

    hvd_frame_reader_init(&r, 16);
    hvd_frame_header(buf, 1, 16);
    hvd_frame_reader_push(&r, buf, sizeof(buf));
    cr_expect_eq(hvd_frame_reader_next(&r, &f), 1);
    hvd_frame_header(buf, 1, 17);
    hvd_frame_reader_push(&r, buf, HVD_FRAME_HDR);
    cr_expect_eq(hvd_frame_reader_next(&r, &f), HVD_ETOOBIG);
    hvd_frame_reader_close(&r);
}

Test(frame, bad_magic_and_version)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t h[HVD_FRAME_HDR];

    hvd_frame_header(h, 1, 0);
    h[0] = 'X';
    hvd_frame_reader_init(&r, 100);
    hvd_frame_reader_push(&r, h, sizeof(h));
    cr_expect_eq(hvd_frame_reader_next(&r, &f), HVD_EPROTO);
    hvd_frame_reader_close(&r);

    hvd_frame_header(h, 1, 0);
    h[2] = HVD_FRAME_VERSION + 1;
    hvd_frame_reader_init(&r, 100);
    hvd_frame_reader_push(&r, h, sizeof(h));
    cr_expect_eq(hvd_frame_reader_next(&r, &f), HVD_EPROTO);
    hvd_frame_reader_close(&r);
}

Test(frame, many_frames_keep_the_buffer_small)
{
    struct hvd_frame_reader r;
    struct hvd_frame f;
    uint8_t buf[64];
    size_t n = make_frame(buf, 3, "0123456789");

    hvd_frame_reader_init(&r, 100);
    for (int i = 0; i < 10000; i++) {
        cr_assert_eq(hvd_frame_reader_push(&r, buf, n), 0);
        cr_assert_eq(hvd_frame_reader_next(&r, &f), 1);
    }
    cr_expect_leq(r.cap, 4096);
    hvd_frame_reader_close(&r);
}

Test(frame, close_null_is_noop)
{
    hvd_frame_reader_close(NULL);
}
