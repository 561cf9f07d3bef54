/* Unit tests for launcher/lib/linesplit.c: lines from a byte stream. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/lib/linesplit.h"

/* Every callback, recorded: the line bytes go into one growing buffer. */
struct event {
    size_t off;
    size_t len;
    enum hvd_line_term term;
    const char *ptr; /* what the callback got, to check the fast path */
};

struct rec {
    struct event *ev;
    size_t n;
    size_t cap;
    char *bytes;
    size_t nbytes;
    size_t bcap;
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
}

static void rec_close(struct rec *r)
{
    free(r->ev);
    free(r->bytes);
    rec_init(r);
}

static void record(void *ctx, const char *line, size_t len,
                   enum hvd_line_term term)
{
    struct rec *r = ctx;

    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->ev = realloc(r->ev, r->cap * sizeof(*r->ev));
        cr_assert_not_null(r->ev);
    }
    while (r->nbytes + len + 1 > r->bcap) {
        r->bcap = r->bcap ? r->bcap * 2 : 256;
        r->bytes = realloc(r->bytes, r->bcap);
        cr_assert_not_null(r->bytes);
    }
    cr_assert_not_null(line);
    memcpy(r->bytes + r->nbytes, line, len);
    r->ev[r->n].off = r->nbytes;
    r->ev[r->n].len = len;
    r->ev[r->n].term = term;
    r->ev[r->n].ptr = line;
    r->n++;
    r->nbytes += len;
}

static struct hvd_linesplit ls;
static struct rec rec;

static void setup(void)
{
    rec_init(&rec);
}

static void teardown(void)
{
    hvd_linesplit_close(&ls);
    rec_close(&rec);
}

TestSuite(linesplit, .init = setup, .fini = teardown);

static void feed(const char *s)
{
    cr_assert_eq(hvd_linesplit_feed(&ls, s, strlen(s), record, &rec), 0);
}

static void finish(void)
{
    hvd_linesplit_finish(&ls, record, &rec);
}

static void expect(size_t i, const char *text, enum hvd_line_term term)
{
    cr_assert_lt(i, rec.n, "event %zu missing (only %zu)", i, rec.n);
    cr_assert_eq(rec.ev[i].len, strlen(text), "event %zu len %zu", i,
                 rec.ev[i].len);
    cr_assert(memcmp(rec.bytes + rec.ev[i].off, text, strlen(text)) == 0,
              "event %zu text", i);
    cr_assert_eq(rec.ev[i].term, term, "event %zu term %d", i, rec.ev[i].term);
}

Test(linesplit, lf_lines)
{
    hvd_linesplit_init(&ls, 100);
    feed("a\nbc\n\nd");
    cr_assert_eq(rec.n, 3);
    expect(0, "a", HVD_TERM_LF);
    expect(1, "bc", HVD_TERM_LF);
    expect(2, "", HVD_TERM_LF);
    finish();
    cr_assert_eq(rec.n, 4);
    expect(3, "d", HVD_TERM_NONE);
}

Test(linesplit, cr_progress_bar)
{
    hvd_linesplit_init(&ls, 100);
    feed("10%\r20%\r100%\n");
    cr_assert_eq(rec.n, 3);
    expect(0, "10%", HVD_TERM_CR);
    expect(1, "20%", HVD_TERM_CR);
    expect(2, "100%", HVD_TERM_LF);
}

Test(linesplit, preview_of_a_bar_drawn_after_cr)
{
    const char *text = NULL;
    hvd_linesplit_init(&ls, 100);
    feed("start");
    cr_expect_eq(hvd_linesplit_preview(&ls, &text), 0, "no \\r before it");
    feed("\n\r10");
    cr_assert_eq(hvd_linesplit_preview(&ls, &text), 2);
    cr_expect_eq(memcmp(text, "10", 2), 0);
    feed("%");
    cr_assert_eq(hvd_linesplit_preview(&ls, &text), 3);
    cr_expect_eq(memcmp(text, "10%", 3), 0);
    feed("\r");
    cr_expect_eq(hvd_linesplit_preview(&ls, &text), 0, "nothing after it");
    feed("20%\n");
    cr_expect_eq(hvd_linesplit_preview(&ls, &text), 0);
    feed("x");
    cr_expect_eq(hvd_linesplit_preview(&ls, &text), 0, "a \\n came last");
    expect(2, "10%", HVD_TERM_CR);
    expect(3, "20%", HVD_TERM_LF);
}

Test(linesplit, crlf_in_one_chunk)
{
    hvd_linesplit_init(&ls, 100);
    feed("x\r\ny\n");
    cr_assert_eq(rec.n, 3);
    expect(0, "x", HVD_TERM_CR);
    expect(1, "", HVD_TERM_CRLF_TAIL);
    expect(2, "y", HVD_TERM_LF);
}

Test(linesplit, crlf_across_chunks)
{
    hvd_linesplit_init(&ls, 100);
    feed("x\r");
    cr_assert_eq(rec.n, 1);
    expect(0, "x", HVD_TERM_CR);
    feed("\ny");
    cr_assert_eq(rec.n, 2);
    expect(1, "", HVD_TERM_CRLF_TAIL);
    finish();
    cr_assert_eq(rec.n, 3);
    expect(2, "y", HVD_TERM_NONE);
}

Test(linesplit, crlf_across_chunks_with_partial_line)
{
    hvd_linesplit_init(&ls, 100);
    feed("ab");
    feed("c\r");
    feed("\n");
    feed("\n");
    cr_assert_eq(rec.n, 3);
    expect(0, "abc", HVD_TERM_CR);
    expect(1, "", HVD_TERM_CRLF_TAIL);
    expect(2, "", HVD_TERM_LF);
}

Test(linesplit, cr_then_other_byte_has_no_tail)
{
    hvd_linesplit_init(&ls, 100);
    feed("x\r");
    feed("z\n");
    cr_assert_eq(rec.n, 2);
    expect(0, "x", HVD_TERM_CR);
    expect(1, "z", HVD_TERM_LF);
}

Test(linesplit, empty_cr_lines)
{
    hvd_linesplit_init(&ls, 100);
    feed("\r\r\n\n\r");
    cr_assert_eq(rec.n, 5);
    expect(0, "", HVD_TERM_CR);
    expect(1, "", HVD_TERM_CR);
    expect(2, "", HVD_TERM_CRLF_TAIL);
    expect(3, "", HVD_TERM_LF);
    expect(4, "", HVD_TERM_CR);
}

Test(linesplit, partial_line_across_chunks)
{
    hvd_linesplit_init(&ls, 100);
    feed("hel");
    feed("");
    feed("lo");
    cr_assert_eq(rec.n, 0);
    feed(" world\nnext");
    cr_assert_eq(rec.n, 1);
    expect(0, "hello world", HVD_TERM_LF);
    /* A buffered line is handed over from the buffer, not the input. */
    cr_assert_eq(rec.ev[0].ptr, ls.buf);
}

Test(linesplit, fast_path_does_not_copy)
{
    static const char in[] = "one\ntwo\r\nthree";

    hvd_linesplit_init(&ls, 100);
    feed(in);
    cr_assert_eq(rec.n, 3);
    cr_assert_eq(rec.ev[0].ptr, in);
    cr_assert_eq(rec.ev[1].ptr, in + 4);
    expect(1, "two", HVD_TERM_CR);
    expect(2, "", HVD_TERM_CRLF_TAIL);
    cr_assert_eq(ls.len, 5);
    /* Nothing was buffered until the unterminated tail. */
    cr_assert_leq(ls.cap, 256);
}

Test(linesplit, long_line_split_at_max)
{
    hvd_linesplit_init(&ls, 4);
    feed("abcdefghij\n");
    cr_assert_eq(rec.n, 3);
    expect(0, "abcd", HVD_TERM_NONE);
    expect(1, "efgh", HVD_TERM_NONE);
    expect(2, "ij", HVD_TERM_LF);
}

Test(linesplit, line_of_exactly_max_is_whole)
{
    hvd_linesplit_init(&ls, 4);
    feed("abcd\nefgh\r\n");
    cr_assert_eq(rec.n, 3);
    expect(0, "abcd", HVD_TERM_LF);
    expect(1, "efgh", HVD_TERM_CR);
    expect(2, "", HVD_TERM_CRLF_TAIL);
}

Test(linesplit, line_of_exactly_max_across_chunks)
{
    hvd_linesplit_init(&ls, 4);
    feed("ab");
    feed("cd");
    cr_assert_eq(rec.n, 0);
    feed("\n");
    cr_assert_eq(rec.n, 1);
    expect(0, "abcd", HVD_TERM_LF);
    feed("efgh");
    feed("ij\n");
    cr_assert_eq(rec.n, 3);
    expect(1, "efgh", HVD_TERM_NONE);
    expect(2, "ij", HVD_TERM_LF);
}

Test(linesplit, split_from_buffer)
{
    hvd_linesplit_init(&ls, 4);
    feed("ab");
    feed("cdefghi");
    cr_assert_eq(rec.n, 2);
    expect(0, "abcd", HVD_TERM_NONE);
    expect(1, "efgh", HVD_TERM_NONE);
    cr_assert_eq(ls.len, 1);
    finish();
    cr_assert_eq(rec.n, 3);
    expect(2, "i", HVD_TERM_NONE);
}

Test(linesplit, max_one)
{
    hvd_linesplit_init(&ls, 1);
    feed("ab\ncd");
    finish();
    cr_assert_eq(rec.n, 4);
    expect(0, "a", HVD_TERM_NONE);
    expect(1, "b", HVD_TERM_LF);
    expect(2, "c", HVD_TERM_NONE);
    expect(3, "d", HVD_TERM_NONE);
}

Test(linesplit, finish_emits_tail_and_resets)
{
    hvd_linesplit_init(&ls, 100);
    finish();
    cr_assert_eq(rec.n, 0);
    feed("abc");
    finish();
    cr_assert_eq(rec.n, 1);
    expect(0, "abc", HVD_TERM_NONE);
    finish();
    cr_assert_eq(rec.n, 1);
    /* A \r at the end of one stream does not pair with the next stream. */
    feed("x\r");
    finish();
    feed("\ny\n");
    cr_assert_eq(rec.n, 4);
    expect(1, "x", HVD_TERM_CR);
    expect(2, "", HVD_TERM_LF);
    expect(3, "y", HVD_TERM_LF);
}

Test(linesplit, max_zero_uses_default)
{
    char *big = malloc(70001);

    cr_assert_not_null(big);
    memset(big, 'q', 70000);
    big[70000] = '\0';
    hvd_linesplit_init(&ls, 0);
    feed(big);
    cr_assert_eq(rec.n, 1);
    cr_assert_eq(rec.ev[0].len, 65536);
    cr_assert_eq(rec.ev[0].term, HVD_TERM_NONE);
    finish();
    cr_assert_eq(rec.n, 2);
    cr_assert_eq(rec.ev[1].len, 70000 - 65536);
    free(big);
}

Test(linesplit, buffer_growth_is_bounded)
{
    size_t i;

    hvd_linesplit_init(&ls, 1 << 20);
    for (i = 1; i <= 100000; i++) {
        cr_assert_eq(hvd_linesplit_feed(&ls, "z", 1, record, &rec), 0);
        /* Doubling: never more than twice what is held (or the minimum). */
        cr_assert_geq(ls.cap, ls.len);
        cr_assert_leq(ls.cap, i * 2 > 256 ? i * 2 : 256);
    }
    cr_assert_eq(rec.n, 0);
    cr_assert_eq(ls.len, 100000);

    /* The buffer never grows beyond max. */
    hvd_linesplit_close(&ls);
    hvd_linesplit_init(&ls, 300);
    for (i = 0; i < 1000; i++)
        cr_assert_eq(hvd_linesplit_feed(&ls, "z", 1, record, &rec), 0);
    cr_assert_leq(ls.cap, 300);
    cr_assert_eq(rec.n, 3);
}

Test(linesplit, bad_arguments)
{
    hvd_linesplit_init(&ls, 10);
    cr_assert_eq(hvd_linesplit_feed(NULL, "a", 1, record, &rec), HVD_EINVAL);
    cr_assert_eq(hvd_linesplit_feed(&ls, "a", 1, NULL, &rec), HVD_EINVAL);
    cr_assert_eq(hvd_linesplit_feed(&ls, NULL, 1, record, &rec), HVD_EINVAL);
    cr_assert_eq(hvd_linesplit_feed(&ls, NULL, 0, record, &rec), 0);
    cr_assert_eq(rec.n, 0);
    hvd_linesplit_finish(NULL, record, &rec);
    hvd_linesplit_close(NULL);
}

Test(linesplit, close_and_reuse)
{
    hvd_linesplit_init(&ls, 10);
    feed("abc");
    hvd_linesplit_close(&ls);
    cr_assert_null(ls.buf);
    cr_assert_eq(ls.len, 0);
    hvd_linesplit_close(&ls);
    finish();
    cr_assert_eq(rec.n, 0);
    feed("d\n");
    expect(0, "d", HVD_TERM_LF);
}

/* The obvious byte-at-a-time splitter the real one must agree with. */
static void reference(const char *in, size_t len, size_t max, struct rec *r)
{
    char *cur = malloc(max + 1);
    size_t n = 0;
    int prev_cr = 0;
    size_t i;

    cr_assert_not_null(cur);
    for (i = 0; i < len; i++) {
        char c = in[i];

        if (c == '\n' && prev_cr) {
            record(r, cur, 0, HVD_TERM_CRLF_TAIL);
            prev_cr = 0;
            continue;
        }
        prev_cr = 0;
        if (c == '\n' || c == '\r') {
            record(r, cur, n, c == '\n' ? HVD_TERM_LF : HVD_TERM_CR);
            n = 0;
            prev_cr = c == '\r';
            continue;
        }
        if (n == max) {
            record(r, cur, n, HVD_TERM_NONE);
            n = 0;
        }
        cur[n++] = c;
    }
    if (n > 0)
        record(r, cur, n, HVD_TERM_NONE);
    free(cur);
}

/* Rebuilds the raw bytes from the lines and their terminators. */
static size_t rebuild(const struct rec *r, char *out)
{
    size_t o = 0;
    size_t i;

    for (i = 0; i < r->n; i++) {
        memcpy(out + o, r->bytes + r->ev[i].off, r->ev[i].len);
        o += r->ev[i].len;
        if (r->ev[i].term == HVD_TERM_LF || r->ev[i].term == HVD_TERM_CRLF_TAIL)
            out[o++] = '\n';
        else if (r->ev[i].term == HVD_TERM_CR)
            out[o++] = '\r';
    }
    return o;
}

static void same_events(const struct rec *a, const struct rec *b)
{
    size_t i;

    cr_assert_eq(a->n, b->n, "%zu events, reference has %zu", a->n, b->n);
    for (i = 0; i < a->n; i++) {
        cr_assert_eq(a->ev[i].len, b->ev[i].len, "event %zu", i);
        cr_assert_eq(a->ev[i].term, b->ev[i].term, "event %zu", i);
        cr_assert(memcmp(a->bytes + a->ev[i].off, b->bytes + b->ev[i].off,
                         a->ev[i].len) == 0,
                  "event %zu", i);
    }
}

Test(linesplit, random_chunkings_reproduce_input)
{
    static const char alphabet[] = "ab\r\n\n\r xyz";
    char in[600];
    char out[1300];
    struct rec ref;
    size_t len;
    size_t max;
    size_t pos;
    size_t chunk;
    size_t i;
    size_t j;
    int trial;

    srand(20240607);
    for (trial = 0; trial < 2000; trial++) {
        len = (size_t)(rand() % 600);
        /* Some inputs have long runs without terminators, to hit max. */
        for (i = 0; i < len; i++)
            in[i] = trial % 3 == 0 && rand() % 8 ? 'L' : alphabet[rand() % 11];
        max = 1 + (size_t)(rand() % 12);
        if (trial % 5 == 0)
            max = 1000;

        rec_init(&ref);
        reference(in, len, max, &ref);

        rec_close(&rec);
        hvd_linesplit_init(&ls, max);
        for (pos = 0; pos < len; pos += chunk) {
            chunk = 1 + (size_t)(rand() % (trial % 2 ? 3 : 40));
            if (chunk > len - pos)
                chunk = len - pos;
            cr_assert_eq(hvd_linesplit_feed(&ls, in + pos, chunk, record, &rec),
                         0);
        }
        finish();
        hvd_linesplit_close(&ls);

        cr_assert_eq(rebuild(&rec, out), len, "trial %d", trial);
        cr_assert(memcmp(out, in, len) == 0, "trial %d", trial);
        same_events(&rec, &ref);
        for (j = 0; j < rec.n; j++) {
            cr_assert_leq(rec.ev[j].len, max);
            cr_assert_null(
                memchr(rec.bytes + rec.ev[j].off, '\n', rec.ev[j].len));
            cr_assert_null(
                memchr(rec.bytes + rec.ev[j].off, '\r', rec.ev[j].len));
            /* Only the very last line may be short without a terminator. */
            if (rec.ev[j].term == HVD_TERM_NONE && j + 1 < rec.n)
                cr_assert_eq(rec.ev[j].len, max);
        }
        rec_close(&ref);
    }
}
