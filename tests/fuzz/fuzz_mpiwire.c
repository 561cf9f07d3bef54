/* Fuzz target: mpirun --tag-output streams and hvd-mpi-rank's records. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/hvd_err.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/mpiwire.h"

/*
 * Input layout: bytes 0-1 seed the chunk sizes, the rest is what mpirun
 * wrote. The stream is split by the tagger twice, in random chunks and at
 * once, and joined into lines per rank as launcher/horovodrun/mpirun.c joins
 * them; every line is then read as a record.
 */
#define PARAMS 2

/* One rank's line being joined, or a finished one. */
struct line {
    int rank;
    int eol; /* ended by '\n' (else cut off by the end of the stream) */
    char *p;
    size_t len;
};

struct seen {
    struct line *open; /* unfinished lines, one per rank seen */
    size_t nopen;
    struct line *done; /* finished lines in the order they ended */
    size_t ndone;
    size_t cap;   /* of both arrays: never more lines than input bytes */
    size_t bytes; /* data passed on */
    size_t eols;
};

static struct line *open_line(struct seen *s, int rank)
{
    for (size_t i = 0; i < s->nopen; i++)
        if (s->open[i].rank == rank)
            return &s->open[i];
    FUZZ_CHECK(s->nopen < s->cap);
    s->open[s->nopen] = (struct line){.rank = rank};
    return &s->open[s->nopen++];
}

static void on_piece(void *ctx, int rank, const char *data, size_t len, int eol)
{
    struct seen *s = ctx;

    FUZZ_CHECK(rank >= -1 && rank <= 999999999);
    FUZZ_CHECK(len > 0 || eol);
    FUZZ_CHECK(eol == 0 || eol == 1);
    FUZZ_CHECK(len == 0 || memchr(data, '\n', len) == NULL);
    s->bytes += len;
    s->eols += (size_t)eol;
    struct line *l = open_line(s, rank);
    if (len > 0) {
        char *p = realloc(l->p, l->len + len);
        FUZZ_CHECK(p != NULL);
        memcpy(p + l->len, data, len);
        l->p = p;
        l->len += len;
    }
    if (eol) {
        FUZZ_CHECK(s->ndone < s->cap);
        s->done[s->ndone] = *l;
        s->done[s->ndone++].eol = 1;
        l->p = NULL;
        l->len = 0;
    }
}

/* Runs the tagger over s in chunks (at once when seed is 0). */
static void split(const uint8_t *in, size_t len, uint32_t seed, struct seen *s)
{
    struct hr_mpitag t;
    size_t pos = 0;

    *s = (struct seen){.cap = len + 1};
    s->open = calloc(s->cap, sizeof(*s->open));
    s->done = calloc(2 * s->cap, sizeof(*s->done));
    FUZZ_CHECK(s->open != NULL && s->done != NULL);
    hr_mpitag_init(&t);
    while (pos < len) {
        size_t chunk = len - pos;
        if (seed != 0) {
            uint32_t x = fuzz_next_rand(&seed);
            chunk = (x & 7) == 0 ? chunk : (x >> 3) % 23;
            if (chunk > len - pos)
                chunk = len - pos;
        }
        hr_mpitag_feed(&t, (const char *)in + pos, chunk, on_piece, s);
        pos += chunk;
        /* The tagger holds at most one tag, never data. */
        FUZZ_CHECK(t.taglen <= sizeof(t.tag));
    }
    hr_mpitag_finish(&t, on_piece, s);
    FUZZ_CHECK(t.taglen == 0);
    /* Lines cut off by the end, in the order their ranks first spoke. */
    s->cap *= 2;
    for (size_t i = 0; i < s->nopen; i++) {
        if (s->open[i].len > 0) {
            FUZZ_CHECK(s->ndone < s->cap);
            s->done[s->ndone++] = s->open[i];
        } else {
            free(s->open[i].p);
        }
    }
    free(s->open);
    s->open = NULL;
}

static void free_seen(struct seen *s)
{
    for (size_t i = 0; i < s->ndone; i++)
        free(s->done[i].p);
    free(s->done);
}

/* A record that parses encodes again to one that parses the same. */
static void check_record(const struct line *l)
{
    char *rec = malloc(l->len + 1);
    struct hr_mpirec a, b;
    struct hr_mpibuf w = {0};

    FUZZ_CHECK(rec != NULL);
    if (l->len > 0)
        memcpy(rec, l->p, l->len);
    if (hr_mpiwire_parse(rec, l->len, &a) != 0)
        goto out;
    FUZZ_CHECK(a.len <= l->len);
    switch (a.type) {
    case 'o':
    case 'e':
        FUZZ_CHECK(a.term >= HVD_TERM_NONE && a.term <= HVD_TERM_PREVIEW);
        FUZZ_CHECK(hr_mpiwire_line(&w, a.stream, a.term, a.text, a.len) == 0);
        break;
    case 'h': {
        /* The host goes in as a C string: up to its first NUL. */
        char *host = malloc(a.len + 1);
        FUZZ_CHECK(host != NULL);
        if (a.len > 0)
            memcpy(host, a.text, a.len);
        host[a.len] = '\0';
        a.len = strlen(host);
        FUZZ_CHECK(a.local_rank >= 0);
        FUZZ_CHECK(hr_mpiwire_hello(&w, a.local_rank, host) == 0);
        free(host);
        break;
    }
    case 'x':
        FUZZ_CHECK(a.kind >= HVD_EXIT_CODE && a.kind <= HVD_EXIT_NOCWD);
        FUZZ_CHECK(hr_mpiwire_exit(&w, a.kind, a.code) == 0);
        break;
    default:
        FUZZ_CHECK(0);
    }
    /* One line, nothing a tag or a line end could be mistaken for. */
    FUZZ_CHECK(w.len > 0 && w.p[w.len - 1] == '\n');
    FUZZ_CHECK(memchr(w.p, '\n', w.len - 1) == NULL);
    FUZZ_CHECK(memchr(w.p, '[', w.len) == NULL);
    FUZZ_CHECK(memchr(w.p, '\r', w.len) == NULL);
    FUZZ_CHECK(hr_mpiwire_parse(w.p, w.len - 1, &b) == 0);
    FUZZ_CHECK(a.type == b.type && a.stream == b.stream && a.term == b.term &&
               a.local_rank == b.local_rank && a.kind == b.kind &&
               a.code == b.code && a.len == b.len);
    FUZZ_CHECK(a.len == 0 || memcmp(a.text, b.text, a.len) == 0);
out:
    hr_mpibuf_close(&w);
    free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen chunked, whole;

    if (size < PARAMS)
        return 0;
    uint32_t seed = (uint32_t)data[0] << 8 | data[1] | 0x10000u;
    const uint8_t *in = data + PARAMS;
    size_t len = size - PARAMS;

    split(in, len, seed, &chunked);
    split(in, len, 0, &whole);
    /* Every '\n' ends one line; tags only take bytes away. */
    size_t nl = 0;
    for (size_t i = 0; i < len; i++)
        nl += in[i] == '\n';
    FUZZ_CHECK(whole.eols == nl);
    FUZZ_CHECK(whole.bytes + whole.eols <= len);
    /* However the bytes arrive, each rank gets the same lines. */
    FUZZ_CHECK(chunked.eols == whole.eols && chunked.bytes == whole.bytes);
    FUZZ_CHECK(chunked.ndone == whole.ndone);
    for (size_t i = 0; i < whole.ndone; i++) {
        const struct line *a = &chunked.done[i], *b = &whole.done[i];
        FUZZ_CHECK(a->rank == b->rank && a->eol == b->eol && a->len == b->len);
        FUZZ_CHECK(a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
        check_record(b);
    }
    free_seen(&chunked);
    free_seen(&whole);
    return 0;
}
