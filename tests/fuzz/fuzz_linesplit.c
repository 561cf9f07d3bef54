/* Fuzz target: the line splitter fed arbitrary output in arbitrary chunks. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/hvd_err.h"
#include "launcher/lib/linesplit.h"

/*
 * Input layout: bytes 0-1 pick the line limit (0: the default), bytes 2-3
 * seed the chunk sizes, the rest is a rank's output.
 */
#define PARAMS 4

/* What the callback saw, as a stream of events. */
struct seen {
    uint8_t *bytes; /* the lines with their terminators put back */
    size_t len;
    size_t cap;
    size_t max;     /* the splitter's limit */
    size_t *events; /* line length * 4 + term, one per call */
    size_t nevents;
    int last_term; /* -1 before the first line */
};

static void add(struct seen *s, const void *p, size_t n)
{
    FUZZ_CHECK(s->len + n <= s->cap);
    if (n > 0)
        memcpy(s->bytes + s->len, p, n);
    s->len += n;
}

static void on_line(void *ctx, const char *line, size_t len,
                    enum hvd_line_term term)
{
    struct seen *s = ctx;

    FUZZ_CHECK(len <= s->max);
    FUZZ_CHECK(term >= HVD_TERM_NONE && term <= HVD_TERM_CRLF_TAIL);
    /* A line never holds its terminator, or any other. */
    FUZZ_CHECK(len == 0 || (memchr(line, '\n', len) == NULL &&
                            memchr(line, '\r', len) == NULL));
    /* The \n of a \r\n is reported alone, right after its \r. */
    FUZZ_CHECK(term != HVD_TERM_CRLF_TAIL ||
               (len == 0 && s->last_term == HVD_TERM_CR));
    add(s, line, len);
    if (term == HVD_TERM_LF || term == HVD_TERM_CRLF_TAIL)
        add(s, "\n", 1);
    else if (term == HVD_TERM_CR)
        add(s, "\r", 1);
    FUZZ_CHECK(s->nevents <= s->cap);
    s->events[s->nevents++] = len * 4 + (size_t)term;
    s->last_term = (int)term;
}

/* Splits s in chunks (or at once when seed is 0) and records the lines. */
static void split(const uint8_t *s, size_t len, size_t max, uint32_t seed,
                  struct seen *out)
{
    struct hvd_linesplit ls;
    size_t pos = 0;

    hvd_linesplit_init(&ls, max);
    *out = (struct seen){.cap = len, .max = ls.max, .last_term = -1};
    out->bytes = malloc(len + 1);
    /* Each byte ends at most one line, and the tail one more. */
    out->events = malloc((len + 1) * sizeof(*out->events));
    FUZZ_CHECK(out->bytes != NULL && out->events != NULL);
    while (pos < len) {
        size_t chunk = len - pos;
        if (seed != 0) {
            uint32_t x = fuzz_next_rand(&seed);
            chunk = (x & 7) == 0 ? chunk : (x >> 3) % 41;
            if (chunk > len - pos)
                chunk = len - pos;
        }
        FUZZ_CHECK(hvd_linesplit_feed(&ls, (const char *)s + pos, chunk,
                                      on_line, out) == 0);
        pos += chunk;
        /* The partial line never outgrows the limit. */
        FUZZ_CHECK(ls.len <= ls.max && ls.cap <= ls.max);
    }
    hvd_linesplit_finish(&ls, on_line, out);
    FUZZ_CHECK(ls.len == 0);
    hvd_linesplit_close(&ls);
    hvd_linesplit_close(&ls); /* closing twice is safe */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen chunked, whole;

    if (size < PARAMS)
        return 0;
    size_t max = ((size_t)data[0] << 8 | data[1]) % 1031;
    uint32_t seed = (uint32_t)data[2] << 8 | data[3] | 0x10000u;
    const uint8_t *s = data + PARAMS;
    size_t len = size - PARAMS;

    split(s, len, max, seed, &chunked);
    split(s, len, max, 0, &whole);
    /* Nothing is lost, added or reordered, however the bytes arrive. */
    FUZZ_CHECK(chunked.len == len && memcmp(chunked.bytes, s, len) == 0);
    FUZZ_CHECK(chunked.nevents == whole.nevents);
    FUZZ_CHECK(memcmp(chunked.events, whole.events,
                      chunked.nevents * sizeof(*chunked.events)) == 0);
    free(chunked.bytes);
    free(chunked.events);
    free(whole.bytes);
    free(whole.events);
    return 0;
}
