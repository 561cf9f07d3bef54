/* Unit tests for launcher/horovodrun/keep.c: a detached job's kept lines. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/horovodrun/keep.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/proto.h"

/* What hr_keep_each handed over, a prefix of each line's text copied. */
struct got {
    uint32_t rank;
    uint8_t stream, term;
    size_t len;
    char text[64];
};

static struct got got[1024];
static size_t ngot;

static int collect(void *arg, const struct hr_keep_line *l)
{
    (void)arg;
    cr_assert_lt(ngot, sizeof(got) / sizeof(got[0]));
    struct got *g = &got[ngot++];
    g->rank = l->rank;
    g->stream = l->stream;
    g->term = l->term;
    g->len = l->len;
    size_t n = l->len < sizeof(g->text) - 1 ? l->len : sizeof(g->text) - 1;
    memcpy(g->text, l->text, n);
    g->text[n] = '\0';
    return 0;
}

static int walk(const struct hr_keep *k, int rank, long tail)
{
    ngot = 0;
    return hr_keep_each(k, rank, tail, collect, NULL);
}

static void add(struct hr_keep *k, uint32_t rank, int stream, int term,
                const char *text)
{
    const struct hr_keep_line l = {rank, (uint8_t)stream, (uint8_t)term, text,
                                   strlen(text)};
    cr_assert_eq(hr_keep_add(k, &l), 0, "adding '%s'", text);
}

static void expect_line(size_t i, uint32_t rank, int stream, int term,
                        const char *text)
{
    cr_assert_lt(i, ngot, "line %zu of %zu", i, ngot);
    cr_expect_eq(got[i].rank, rank, "line %zu", i);
    cr_expect_eq(got[i].stream, stream, "line %zu", i);
    cr_expect_eq(got[i].term, term, "line %zu", i);
    cr_expect_eq(got[i].len, strlen(text), "line %zu", i);
    cr_expect_str_eq(got[i].text, text, "line %zu", i);
}

/* Six lines over ranks 0-2 and horovodrun's own, in this order. */
static void add_six(struct hr_keep *k)
{
    add(k, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "one a");
    add(k, 0, HVD_STREAM_STDERR, HVD_TERM_LF, "zero a");
    add(k, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self a");
    add(k, 2, HVD_STREAM_STDOUT, HVD_TERM_NONE, "two a");
    add(k, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "one b");
    add(k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "zero b");
}

Test(keep, empty_walk_calls_nothing)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 4), 0);
    cr_expect_eq(walk(&k, -1, -1), 0);
    cr_expect_eq(ngot, 0);
    cr_expect_eq(walk(&k, 2, 5), 0);
    cr_expect_eq(ngot, 0);
    hr_keep_close(&k);
}

Test(keep, all_lines_in_the_order_they_came)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 3), 0);
    add_six(&k);
    cr_assert_eq(walk(&k, -1, -1), 0);
    cr_assert_eq(ngot, 6);
    expect_line(0, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "one a");
    expect_line(1, 0, HVD_STREAM_STDERR, HVD_TERM_LF, "zero a");
    expect_line(2, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self a");
    expect_line(3, 2, HVD_STREAM_STDOUT, HVD_TERM_NONE, "two a");
    expect_line(4, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "one b");
    expect_line(5, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "zero b");
    hr_keep_close(&k);
}

Test(keep, one_rank_and_horovodruns_own)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 3), 0);
    add_six(&k);
    cr_assert_eq(walk(&k, 1, -1), 0);
    cr_assert_eq(ngot, 3);
    expect_line(0, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "one a");
    expect_line(1, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self a");
    expect_line(2, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "one b");
    cr_assert_eq(walk(&k, 2, -1), 0);
    cr_assert_eq(ngot, 2);
    expect_line(0, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self a");
    expect_line(1, 2, HVD_STREAM_STDOUT, HVD_TERM_NONE, "two a");
    hr_keep_close(&k);
}

Test(keep, tail)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 3), 0);
    add_six(&k);
    cr_assert_eq(walk(&k, -1, 2), 0);
    cr_assert_eq(ngot, 2);
    expect_line(0, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "one b");
    expect_line(1, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "zero b");
    cr_expect_eq(walk(&k, -1, 0), 0);
    cr_expect_eq(ngot, 0, "tail 0 gives no lines");
    cr_assert_eq(walk(&k, -1, 100), 0);
    cr_expect_eq(ngot, 6, "a tail longer than the lines gives them all");
    expect_line(0, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "one a");
    expect_line(5, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "zero b");
    cr_assert_eq(walk(&k, 1, 2), 0, "tail of one rank's lines");
    cr_assert_eq(ngot, 2);
    expect_line(0, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self a");
    expect_line(1, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "one b");
    hr_keep_close(&k);
}

Test(keep, progress_replaces_progress_on_its_stream)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 2), 0);
    add(&k, 0, HVD_STREAM_STDERR, HVD_TERM_CR, "10%");
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out a");
    add(&k, 1, HVD_STREAM_STDERR, HVD_TERM_CR, "rank 1 50%");
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out b");
    add(&k, 0, HVD_STREAM_STDERR, HVD_TERM_CR, "20%");
    cr_assert_eq(walk(&k, -1, -1), 0);
    cr_assert_eq(ngot, 4, "20%% replaces 10%%; the other rank's stays");
    expect_line(0, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out a");
    expect_line(1, 1, HVD_STREAM_STDERR, HVD_TERM_CR, "rank 1 50%");
    expect_line(2, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out b");
    expect_line(3, 0, HVD_STREAM_STDERR, HVD_TERM_CR, "20%");

    /* The line a newline ends replaces the update before it; the tail
     * of a \r\n commits the update instead. */
    add(&k, 0, HVD_STREAM_STDERR, HVD_TERM_LF, "done");
    add(&k, 0, HVD_STREAM_STDERR, HVD_TERM_CR, "30%");
    add(&k, 0, HVD_STREAM_STDERR, HVD_TERM_CRLF_TAIL, "");
    cr_assert_eq(walk(&k, 0, -1), 0);
    cr_assert_eq(ngot, 5);
    expect_line(0, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out a");
    expect_line(1, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "out b");
    expect_line(2, 0, HVD_STREAM_STDERR, HVD_TERM_LF, "done");
    expect_line(3, 0, HVD_STREAM_STDERR, HVD_TERM_CR, "30%");
    expect_line(4, 0, HVD_STREAM_STDERR, HVD_TERM_CRLF_TAIL, "");
    hr_keep_close(&k);
}

Test(keep, previews_and_ranks_outside_the_job_are_not_kept)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 2), 0);
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "kept");
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_PREVIEW, "a partial line");
    add(&k, 2, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 2 of 2");
    add(&k, 3, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 3 of 2");
    add(&k, 1000, HVD_STREAM_STDERR, HVD_TERM_LF, "rank 1000 of 2");
    add(&k, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "also kept");
    cr_assert_eq(walk(&k, -1, -1), 0);
    cr_expect_eq(ngot, 2);
    for (size_t i = 0; i < ngot; i++)
        cr_expect(got[i].rank < 2, "line %zu: rank %u '%s' was kept", i,
                  (unsigned)got[i].rank, got[i].text);
    expect_line(0, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "kept");
    expect_line(ngot - 1, 1, HVD_STREAM_STDERR, HVD_TERM_LF, "also kept");
    hr_keep_close(&k);
}

Test(keep, each_rank_keeps_its_newest_bytes)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 2), 0);
    add(&k, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1 first");
    static char text[1000];
    const size_t lines = HR_KEEP_RANK_BYTES / sizeof(text) + 50;
    for (size_t i = 0; i < lines; i++) {
        memset(text, 'x', sizeof(text));
        int n = snprintf(text, sizeof(text), "%06zu", i);
        text[n] = ' ';
        const struct hr_keep_line l = {0, HVD_STREAM_STDOUT, HVD_TERM_LF, text,
                                       sizeof(text)};
        cr_assert_eq(hr_keep_add(&k, &l), 0);
    }
    add(&k, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1 last");

    cr_assert_eq(walk(&k, 0, -1), 0);
    cr_assert_gt(ngot, 0);
    cr_expect_lt(ngot, lines, "the oldest lines went");
    size_t bytes = 0;
    for (size_t i = 0; i < ngot; i++)
        bytes += got[i].len;
    cr_expect_leq(bytes, HR_KEEP_RANK_BYTES);
    /* Each line also counts a record's worth (under 64 bytes). */
    cr_expect_gt(bytes, HR_KEEP_RANK_BYTES - sizeof(text) - 64 * ngot,
                 "no more went than needed");
    /* What is left is the newest lines, in order, the last one included. */
    for (size_t i = 0; i < ngot; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%06zu", lines - ngot + i);
        cr_expect_eq(strncmp(got[i].text, want, 6), 0, "line %zu: '%.6s'", i,
                     got[i].text);
        cr_expect_eq(got[i].len, sizeof(text));
    }

    cr_assert_eq(walk(&k, 1, -1), 0);
    cr_assert_eq(ngot, 2, "the other rank lost nothing");
    expect_line(0, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1 first");
    expect_line(1, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1 last");
    hr_keep_close(&k);
}

static int count(void *arg, const struct hr_keep_line *l)
{
    (void)l;
    ++*(size_t *)arg;
    return 0;
}

Test(keep, empty_lines_count_against_the_bound)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 1), 0);
    const size_t lines = HR_KEEP_RANK_BYTES; /* one byte each: far too many */
    for (size_t i = 0; i < lines; i++) {
        const struct hr_keep_line l = {0, HVD_STREAM_STDOUT, HVD_TERM_LF, "",
                                       0};
        cr_assert_eq(hr_keep_add(&k, &l), 0);
    }
    size_t n = 0;
    cr_assert_eq(hr_keep_each(&k, 0, -1, count, &n), 0);
    cr_expect_lt(n, HR_KEEP_RANK_BYTES / 16, "kept %zu empty lines", n);
    cr_expect_gt(n, 0);
    hr_keep_close(&k);
}

Test(keep, a_long_line_is_kept_cut)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 1), 0);
    static char text[HR_KEEP_RANK_BYTES * 2];
    memset(text, 'y', sizeof(text));
    const struct hr_keep_line l = {0, HVD_STREAM_STDOUT, HVD_TERM_LF, text,
                                   sizeof(text)};
    cr_assert_eq(hr_keep_add(&k, &l), 0);
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "next");
    cr_assert_eq(walk(&k, 0, -1), 0);
    cr_assert_eq(ngot, 2, "the long line stays, cut");
    cr_expect_eq(got[0].len, HR_KEEP_LINE_MAX);
    expect_line(1, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "next");
    hr_keep_close(&k);
}

static int calls;

static int stop_at_second(void *arg, const struct hr_keep_line *l)
{
    (void)arg;
    (void)l;
    return ++calls == 2 ? 7 : 0;
}

Test(keep, a_nonzero_return_stops_the_walk)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 3), 0);
    add_six(&k);
    calls = 0;
    cr_expect_eq(hr_keep_each(&k, -1, -1, stop_at_second, NULL), 7);
    cr_expect_eq(calls, 2);
    hr_keep_close(&k);
}

Test(keep, grown_keeps_what_it_had_and_takes_new_ranks)
{
    struct hr_keep k;
    cr_assert_eq(hr_keep_init(&k, 0), 0);
    add(&k, 0, HVD_STREAM_STDOUT, HVD_TERM_LF, "dropped");
    add(&k, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self 1");
    cr_assert_eq(hr_keep_grow(&k, 2), 0);
    add(&k, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1");
    add(&k, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self 2");
    cr_assert_eq(hr_keep_grow(&k, 1), 0); /* never shrinks */
    cr_assert_eq(hr_keep_grow(&k, 5), 0);
    add(&k, 4, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 4");
    cr_assert_eq(walk(&k, -1, -1), 0);
    cr_assert_eq(ngot, 4);
    expect_line(0, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self 1");
    expect_line(1, 1, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 1");
    expect_line(2, HR_KEEP_SELF, HVD_STREAM_STDERR, HVD_TERM_LF, "self 2");
    expect_line(3, 4, HVD_STREAM_STDOUT, HVD_TERM_LF, "rank 4");
    hr_keep_close(&k);
}
