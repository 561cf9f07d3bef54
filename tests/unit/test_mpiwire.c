/* Unit tests for hvd-mpi-rank's records and mpirun's tags (mpiwire.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/mpiwire.h"

/* ---- records ---------------------------------------------------------- */

/* Parses the single record in b (its '\n' dropped) into rec. */
static int parse_buf(struct hr_mpibuf *b, struct hr_mpirec *rec)
{
    cr_assert_gt(b->len, 0);
    cr_assert_eq(b->p[b->len - 1], '\n');
    cr_assert_null(memchr(b->p, '\n', b->len - 1));
    return hr_mpiwire_parse(b->p, b->len - 1, rec);
}

/* Parses a C string record (a copy: the parser decodes in place). */
static int parse_str(const char *s, struct hr_mpirec *rec, char **keep)
{
    *keep = strdup(s);
    cr_assert_not_null(*keep);
    return hr_mpiwire_parse(*keep, strlen(s), rec);
}

Test(mpiwire, line_round_trip_with_every_byte)
{
    char text[256];
    struct hr_mpibuf b = {0};
    struct hr_mpirec rec;

    for (int i = 0; i < 256; i++)
        text[i] = (char)i;
    for (int term = 0; term <= HVD_TERM_PREVIEW; term++) {
        b.len = 0;
        cr_assert_eq(hr_mpiwire_line(&b, HVD_STREAM_STDERR, term, text, 256),
                     0);
        /* Nothing that a tag or a line end could be mistaken for. */
        cr_expect_null(memchr(b.p, '[', b.len));
        cr_expect_null(memchr(b.p, '\r', b.len));
        cr_assert_eq(parse_buf(&b, &rec), 0);
        cr_expect_eq(rec.type, 'e');
        cr_expect_eq(rec.stream, HVD_STREAM_STDERR);
        cr_expect_eq(rec.term, term);
        cr_assert_eq(rec.len, 256);
        cr_expect_eq(memcmp(rec.text, text, 256), 0);
    }
    hr_mpibuf_close(&b);
}

Test(mpiwire, empty_line)
{
    struct hr_mpibuf b = {0};
    struct hr_mpirec rec;

    cr_assert_eq(hr_mpiwire_line(&b, HVD_STREAM_STDOUT, HVD_TERM_LF, "", 0), 0);
    cr_expect_eq(b.len, 3);
    cr_assert_eq(parse_buf(&b, &rec), 0);
    cr_expect_eq(rec.type, 'o');
    cr_expect_eq(rec.stream, HVD_STREAM_STDOUT);
    cr_expect_eq(rec.term, HVD_TERM_LF);
    cr_expect_eq(rec.len, 0);
    hr_mpibuf_close(&b);
    hr_mpibuf_close(&b); /* twice is safe */
    hr_mpibuf_close(NULL);
}

Test(mpiwire, hello_round_trip)
{
    struct hr_mpibuf b = {0};
    struct hr_mpirec rec;

    cr_assert_eq(hr_mpiwire_hello(&b, 7, "node[1]%\r\n x"), 0);
    cr_assert_eq(parse_buf(&b, &rec), 0);
    cr_expect_eq(rec.type, 'h');
    cr_expect_eq(rec.local_rank, 7);
    cr_assert_eq(rec.len, strlen("node[1]%\r\n x"));
    cr_expect_eq(memcmp(rec.text, "node[1]%\r\n x", rec.len), 0);
    hr_mpibuf_close(&b);
}

Test(mpiwire, exit_round_trip_at_the_limits)
{
    const int32_t codes[] = {0, 1, 255, -1, INT32_MAX, INT32_MIN};
    struct hr_mpibuf b = {0};
    struct hr_mpirec rec;

    for (int kind = HVD_EXIT_CODE; kind <= HVD_EXIT_NOCWD; kind++)
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
            b.len = 0;
            cr_assert_eq(hr_mpiwire_exit(&b, kind, codes[i]), 0);
            cr_assert_eq(parse_buf(&b, &rec), 0, "kind %d code %d", kind,
                         codes[i]);
            cr_expect_eq(rec.type, 'x');
            cr_expect_eq(rec.kind, kind);
            cr_expect_eq(rec.code, codes[i]);
        }
    hr_mpibuf_close(&b);
}

Test(mpiwire, several_records_in_one_buffer)
{
    struct hr_mpibuf b = {0};
    struct hr_mpirec rec;

    cr_assert_eq(hr_mpiwire_hello(&b, 0, "h"), 0);
    cr_assert_eq(hr_mpiwire_line(&b, HVD_STREAM_STDOUT, 1, "a\nb", 3), 0);
    cr_assert_eq(hr_mpiwire_exit(&b, HVD_EXIT_SIGNAL, 9), 0);
    cr_assert_eq(b.len, strlen("h0 h\no1a%0Ab\nx1 9\n"));
    cr_assert_eq(memcmp(b.p, "h0 h\no1a%0Ab\nx1 9\n", b.len), 0);
    char *nl = memchr(b.p, '\n', b.len);
    cr_assert_eq(hr_mpiwire_parse(b.p, (size_t)(nl - b.p), &rec), 0);
    cr_expect_eq(rec.type, 'h');
    hr_mpibuf_close(&b);
}

Test(mpiwire, reserve_grows_and_keeps_bytes)
{
    struct hr_mpibuf b = {0};

    cr_assert_eq(hr_mpibuf_reserve(&b, 10), 0);
    cr_assert_geq(b.cap, 10);
    memcpy(b.p, "0123456789", 10);
    b.len = 10;
    cr_assert_eq(hr_mpibuf_reserve(&b, 100000), 0);
    cr_expect_geq(b.cap - b.len, 100000);
    cr_expect_eq(b.len, 10);
    cr_expect_eq(memcmp(b.p, "0123456789", 10), 0);
    hr_mpibuf_close(&b);
    cr_expect_null(b.p);
    cr_expect_eq(b.len, 0);
}

Test(mpiwire, escapes_in_either_case)
{
    struct hr_mpirec rec;
    char *s;

    cr_assert_eq(parse_str("o1%5b%5D%25", &rec, &s), 0);
    cr_assert_eq(rec.len, 3);
    cr_expect_eq(memcmp(rec.text, "[]%", 3), 0);
    free(s);
}

Test(mpiwire, not_records)
{
    static const char *const bad[] = {
        "",                  /* empty */
        "o",                 /* no term */
        "o5text",            /* term out of range */
        "o/text",            /* term not a digit */
        "o1%",               /* escape cut short */
        "o1%4",              /* escape cut short */
        "o1%G0",             /* not hex */
        "o1% 1",             /* not hex */
        "h",                 /* no local rank */
        "h0",                /* no blank after it */
        "h host",            /* no digits */
        "h-1 host",          /* negative local rank */
        "h0 a%zz",           /* bad escape in the host */
        "h12345678901 x",    /* more digits than an int32 */
        "x0",                /* no code */
        "x0 ",               /* empty code */
        "x0 -",              /* a sign alone */
        "x0 1 ",             /* trailing blank */
        "x0 1x",             /* trailing junk */
        "x9 0",              /* unknown kind */
        "x-1 0",             /* negative kind */
        "x0 2147483648",     /* over INT32_MAX */
        "x0 -2147483649",    /* under INT32_MIN */
        "x 0",               /* no kind */
        "z1text",            /* unknown type */
        "[1,0]<stdout>:o1x", /* a tag is not a record */
    };
    struct hr_mpirec rec;
    char *s;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(parse_str(bad[i], &rec, &s), HVD_EPROTO, "'%s'", bad[i]);
        free(s);
    }
}

/* ---- tags --------------------------------------------------------------- */

/* What the tagger passed on: every piece, and the lines they make when
 * joined per rank as launcher/horovodrun/mpirun.c joins them. */
struct seen {
    char log[65536]; /* "rank:line\n" per finished line, "rank:tail|" */
    size_t loglen;
    char line[8][4096]; /* per rank + 1 (index 0 is mpirun, rank -1) */
    size_t linelen[8];
    size_t pieces;
    size_t bytes;
    size_t maxpiece;
    int count_only; /* lines too long to keep: only count the pieces */
};

/* Logs "rank:text" and then end ("\n" for a line, "|" for a tail). */
static void log_line(struct seen *s, int rank, const char *p, size_t n,
                     const char *end)
{
    int w = snprintf(s->log + s->loglen, sizeof(s->log) - s->loglen,
                     "%d:%.*s%s", rank, (int)n, p, end);
    cr_assert(w > 0 && (size_t)w < sizeof(s->log) - s->loglen);
    s->loglen += (size_t)w;
}

static void on_piece(void *ctx, int rank, const char *data, size_t len, int eol)
{
    struct seen *s = ctx;

    cr_assert(rank >= -1 && rank < 7, "rank %d", rank);
    cr_assert(len > 0 || eol, "an empty piece that ends nothing");
    cr_assert_null(memchr(data, '\n', len));
    s->pieces++;
    s->bytes += len;
    if (len > s->maxpiece)
        s->maxpiece = len;
    if (s->count_only) {
        if (eol)
            log_line(s, rank, "", 0, "\n");
        return;
    }
    size_t i = (size_t)(rank + 1);
    cr_assert_leq(s->linelen[i] + len, sizeof(s->line[i]));
    memcpy(s->line[i] + s->linelen[i], data, len);
    s->linelen[i] += len;
    if (eol) {
        log_line(s, rank, s->line[i], s->linelen[i], "\n");
        s->linelen[i] = 0;
    }
}

/* The tails of lines that never ended, once the stream is over. */
static void finish(struct hr_mpitag *t, struct seen *s)
{
    hr_mpitag_finish(t, on_piece, s);
    for (int i = 0; i < 8; i++)
        if (s->linelen[i] > 0) {
            log_line(s, i - 1, s->line[i], s->linelen[i], "|");
            s->linelen[i] = 0;
        }
    s->log[s->loglen] = '\0';
}

/* Feeds in in pieces of chunk bytes (0: at once) and returns the log. */
static struct seen *run(const char *in, size_t len, size_t chunk)
{
    struct seen *s = calloc(1, sizeof(*s));
    struct hr_mpitag t;

    cr_assert_not_null(s);
    hr_mpitag_init(&t);
    for (size_t off = 0; off < len;) {
        size_t n = chunk == 0 || chunk > len - off ? len - off : chunk;
        hr_mpitag_feed(&t, in + off, n, on_piece, s);
        off += n;
    }
    finish(&t, s);
    return s;
}

/* The same log whether fed at once or in pieces of any size. */
static void expect_log(const char *in, const char *want)
{
    size_t len = strlen(in);
    for (size_t chunk = 0; chunk <= len + 1; chunk++) {
        struct seen *s = run(in, len, chunk);
        cr_expect_str_eq(s->log, want, "chunk %zu", chunk);
        free(s);
    }
}

Test(mpitag, tagged_lines)
{
    expect_log("[1,0]<stdout>:hello\n[1,3]<stdout>:world\n",
               "0:hello\n3:world\n");
}

Test(mpitag, lines_without_a_tag_are_mpirun_s)
{
    expect_log("mpirun: warning\n[1,2]<stderr>:x\nplain\n\n",
               "-1:mpirun: warning\n2:x\n-1:plain\n-1:\n");
}

/* mpirun tags each piece it read, so one record may arrive in pieces
 * under several tags, mixed with other ranks'. */
Test(mpitag, records_cut_between_tags)
{
    expect_log("[1,0]<stdout>:o1hel[1,1]<stdout>:o1ab\n"
               "[1,0]<stdout>:lo\n",
               "1:o1ab\n0:o1hello\n");
}

Test(mpitag, empty_tagged_line)
{
    expect_log("[1,4]<stdout>:\n", "4:\n");
}

Test(mpitag, malformed_tags_are_data)
{
    /* Each is not a tag: its bytes belong to the line it began. */
    expect_log("[abc] text\n", "-1:[abc] text\n");
    expect_log("[1,0]<stdout>x\n", "-1:[1,0]<stdout>x\n");
    expect_log("[1,]<stdout>:x\n", "-1:[1,]<stdout>:x\n");
    expect_log("[,0]<stdout>:x\n", "-1:[,0]<stdout>:x\n");
    expect_log("[1,0]<>:x\n", "-1:[1,0]<>:x\n");
    expect_log("[1,0]<STDOUT>:x\n", "-1:[1,0]<STDOUT>:x\n");
    expect_log("[1,0\n", "-1:[1,0\n");
    /* The second '[' starts the tag; the first is mpirun's, a line of
     * its own that never ends. */
    expect_log("[[1,0]<stdout>:x\n", "0:x\n-1:[|");
    /* Within a rank's data the bytes stay that rank's. */
    expect_log("[1,2]<stdout>:a[b\n", "2:a[b\n");
    expect_log("[1,2]<stdout>:a[1,x]\n", "2:a[1,x]\n");
}

Test(mpitag, digits_are_bounded)
{
    /* A jobid or rank longer than nine digits is not a tag. */
    expect_log("[1234567890,0]<stdout>:x\n", "-1:[1234567890,0]<stdout>:x\n");
    expect_log("[1,1234567890]<stdout>:x\n", "-1:[1,1234567890]<stdout>:x\n");
    expect_log("[1,0]<abcdefghijk>:x\n", "-1:[1,0]<abcdefghijk>:x\n");
}

Test(mpitag, cut_off_at_the_end)
{
    /* A tag cut short by the end of the stream is data. */
    expect_log("[1,0]<std", "-1:[1,0]<std|");
    expect_log("[1,0]<stdout>:ab[1,", "0:ab[1,|");
    expect_log("[1,0]<stdout>:partial", "0:partial|");
    expect_log("no newline", "-1:no newline|");
    expect_log("[", "-1:[|");
    expect_log("", "");
}

/* A long line is passed on as it comes, never held: the tagger keeps no
 * more than a tag, whatever the line's length. */
Test(mpitag, huge_lines_are_not_buffered)
{
    size_t n = 4u << 20;
    char *in = malloc(n + 32);
    cr_assert_not_null(in);
    size_t len = (size_t)sprintf(in, "[1,3]<stdout>:");
    memset(in + len, 'y', n);
    len += n;
    in[len++] = '\n';

    struct seen *s = calloc(1, sizeof(*s));
    struct hr_mpitag t;
    cr_assert_not_null(s);
    s->count_only = 1;
    hr_mpitag_init(&t);
    for (size_t off = 0; off < len; off += 65536) {
        size_t c = len - off < 65536 ? len - off : 65536;
        hr_mpitag_feed(&t, in + off, c, on_piece, s);
        cr_expect_leq(t.taglen, sizeof(t.tag));
    }
    hr_mpitag_finish(&t, on_piece, s);
    s->log[s->loglen] = '\0';
    cr_expect_eq(s->bytes, n);
    cr_expect_leq(s->maxpiece, 65536);
    cr_expect_geq(s->pieces, n / 65536);
    cr_expect_str_eq(s->log, "3:\n");
    free(s);
    free(in);
}

/* ---- records through tags --------------------------------------------- */

/* What mpirun does to hvd-mpi-rank's output: tags every piece it read,
 * cutting records anywhere, and interleaves the ranks. */
Test(mpitag, records_survive_mpirun)
{
    struct hr_mpibuf rec[3] = {{0}};
    char *out = malloc(1 << 16);
    size_t len = 0, pos[3] = {0};
    struct hr_mpirec r;

    cr_assert_not_null(out);
    for (int i = 0; i < 3; i++) {
        char text[64];
        int n = snprintf(text, sizeof(text), "rank %d [says] 100%%\r", i);
        cr_assert_eq(hr_mpiwire_hello(&rec[i], i, "host[0]"), 0);
        cr_assert_eq(hr_mpiwire_line(&rec[i], HVD_STREAM_STDOUT, HVD_TERM_CR,
                                     text, (size_t)n),
                     0);
        cr_assert_eq(hr_mpiwire_exit(&rec[i], HVD_EXIT_CODE, i), 0);
    }
    /* Round robin, in pieces of 1 to 7 bytes, each behind its tag. */
    for (int more = 1, k = 0; more; k++) {
        more = 0;
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)(k * 3 + i) % 7 + 1;
            if (pos[i] >= rec[i].len)
                continue;
            if (n > rec[i].len - pos[i])
                n = rec[i].len - pos[i];
            /* mpirun tags every line of a piece, as it starts. */
            for (size_t j = 0; j < n; j++) {
                if (j == 0 || rec[i].p[pos[i] + j - 1] == '\n')
                    len += (size_t)sprintf(out + len, "[4,%d]<stdout>:", i);
                out[len++] = rec[i].p[pos[i] + j];
            }
            pos[i] += n;
            more = 1;
        }
    }
    struct seen *s = run(out, len, 5);
    /* Three records per rank, each whole. */
    int count[3] = {0};
    char *line = s->log;
    for (char *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        int rank = atoi(line);
        char *colon = strchr(line, ':');
        cr_assert(rank >= 0 && rank < 3 && colon && colon < nl, "%s", line);
        cr_assert_eq(hr_mpiwire_parse(colon + 1, (size_t)(nl - colon - 1), &r),
                     0, "%.*s", (int)(nl - line), line);
        if (count[rank] == 0) {
            cr_expect_eq(r.type, 'h');
            cr_expect_eq(r.local_rank, rank);
            cr_expect_eq(r.len, 7);
            cr_expect_eq(memcmp(r.text, "host[0]", 7), 0);
        } else if (count[rank] == 1) {
            char text[64];
            int n =
                snprintf(text, sizeof(text), "rank %d [says] 100%%\r", rank);
            cr_expect_eq(r.type, 'o');
            cr_expect_eq(r.term, HVD_TERM_CR);
            cr_expect_eq(r.len, (size_t)n);
            cr_expect_eq(memcmp(r.text, text, (size_t)n), 0);
        } else {
            cr_expect_eq(r.type, 'x');
            cr_expect_eq(r.code, rank);
        }
        count[rank]++;
    }
    cr_expect_str_eq(line, "");
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(count[i], 3, "rank %d", i);
        hr_mpibuf_close(&rec[i]);
    }
    free(s);
    free(out);
}
