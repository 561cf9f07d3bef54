/* hvd-mpi-rank's records and the tags of mpirun --tag-output. */
#include "launcher/lib/mpiwire.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/proto.h"

enum { S_LINE, S_DATA, S_TAG };

void hr_mpibuf_close(struct hr_mpibuf *b)
{
    if (b == NULL)
        return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int hr_mpibuf_reserve(struct hr_mpibuf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return HVD_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int needs_escape(unsigned char c)
{
    return c == '%' || c == '[' || c == '\n' || c == '\r';
}

/* Appends text with the bytes that records must not hold escaped; the
 * caller reserved 3 * len bytes. */
static void put_escaped(struct hr_mpibuf *b, const char *text, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *p = b->p + b->len;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (needs_escape(c)) {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        } else {
            *p++ = (char)c;
        }
    }
    b->len = (size_t)(p - b->p);
}

int hr_mpiwire_hello(struct hr_mpibuf *b, int local_rank, const char *host)
{
    size_t hlen = strlen(host);
    if (hr_mpibuf_reserve(b, 3 * hlen + 32) != 0)
        return HVD_ENOMEM;
    b->len += (size_t)sprintf(b->p + b->len, "h%d ", local_rank);
    put_escaped(b, host, hlen);
    b->p[b->len++] = '\n';
    return 0;
}

int hr_mpiwire_line(struct hr_mpibuf *b, int stream, int term, const char *text,
                    size_t len)
{
    if (len > (SIZE_MAX - 8) / 3 || hr_mpibuf_reserve(b, 3 * len + 8) != 0)
        return HVD_ENOMEM;
    b->p[b->len++] = stream == HVD_STREAM_STDERR ? 'e' : 'o';
    b->p[b->len++] = (char)('0' + (term & 7));
    put_escaped(b, text, len);
    b->p[b->len++] = '\n';
    return 0;
}

int hr_mpiwire_exit(struct hr_mpibuf *b, int kind, int32_t code)
{
    if (hr_mpibuf_reserve(b, 32) != 0)
        return HVD_ENOMEM;
    b->len += (size_t)sprintf(b->p + b->len, "x%d %ld\n", kind, (long)code);
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Undoes put_escaped in place; the decoded length, or -1. */
static long unescape(char *s, size_t len)
{
    char *out = s;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            *out++ = s[i];
            continue;
        }
        if (len - i < 3)
            return -1;
        int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
        if (hi < 0 || lo < 0)
            return -1;
        *out++ = (char)(hi << 4 | lo);
        i += 2;
    }
    return (long)(out - s);
}

/* A decimal integer of s[*i..len) that fits an int32, then stop. */
static int parse_int(const char *s, size_t len, size_t *i, char stop, long *out)
{
    int neg = *i < len && s[*i] == '-';
    if (neg)
        (*i)++;
    size_t start = *i;
    long v = 0;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9' && *i - start < 10)
        v = v * 10 + (s[(*i)++] - '0');
    /* INT32_MIN has no positive twin: the bound depends on the sign. */
    if (*i == start || v > (long)INT32_MAX + neg)
        return -1;
    if (stop) {
        if (*i >= len || s[*i] != stop)
            return -1;
        (*i)++;
    } else if (*i != len) {
        return -1;
    }
    *out = neg ? -v : v;
    return 0;
}

int hr_mpiwire_parse(char *rec, size_t len, struct hr_mpirec *out)
{
    size_t i = 1;
    long a, b, n;

    memset(out, 0, sizeof(*out));
    if (len < 2)
        return HVD_EPROTO;
    out->type = rec[0];
    switch (rec[0]) {
    case 'o':
    case 'e':
        if (rec[1] < '0' || rec[1] > '0' + HVD_TERM_PREVIEW)
            return HVD_EPROTO;
        out->stream = rec[0] == 'e' ? HVD_STREAM_STDERR : HVD_STREAM_STDOUT;
        out->term = rec[1] - '0';
        if ((n = unescape(rec + 2, len - 2)) < 0)
            return HVD_EPROTO;
        out->text = rec + 2;
        out->len = (size_t)n;
        return 0;
    case 'h':
        if (parse_int(rec, len, &i, ' ', &a) != 0 || a < 0 ||
            (n = unescape(rec + i, len - i)) < 0)
            return HVD_EPROTO;
        out->local_rank = (int)a;
        out->text = rec + i;
        out->len = (size_t)n;
        return 0;
    case 'x':
        if (parse_int(rec, len, &i, ' ', &a) != 0 || a < 0 ||
            a > HVD_EXIT_NOCWD || parse_int(rec, len, &i, 0, &b) != 0)
            return HVD_EPROTO;
        out->kind = (int)a;
        out->code = (int32_t)b;
        return 0;
    default:
        return HVD_EPROTO;
    }
}

void hr_mpitag_init(struct hr_mpitag *t)
{
    memset(t, 0, sizeof(*t));
    t->state = S_LINE;
    t->rank = -1;
}

/*
 * Whether s[0..n) is a tag "[jobid,rank]<name>:" (1, with *rank set), a
 * beginning of one (0), or not one (-1).
 */
static int tag_check(const char *s, size_t n, int *rank)
{
    /* The parts in order: '[' digits ',' digits ']' '<' letters '>' ':'. */
    int part = 0;
    size_t run = 0;
    long vpid = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int digit = c >= '0' && c <= '9';
        int letter = c >= 'a' && c <= 'z';
        switch (part) {
        case 0: /* '[' */
            if (c != '[')
                return -1;
            part = 1;
            run = 0;
            break;
        case 1: /* jobid digits, then ',' */
        case 2: /* rank digits, then ']' */
            if (digit && run < 9) {
                if (part == 2)
                    vpid = vpid * 10 + (c - '0');
                run++;
            } else if (run > 0 && c == (part == 1 ? ',' : ']')) {
                part++;
                run = 0;
            } else {
                return -1;
            }
            break;
        case 3: /* '<' */
            if (c != '<')
                return -1;
            part = 4;
            break;
        case 4: /* the stream's name, then '>' */
            if (letter && run < 10) {
                run++;
            } else if (run > 0 && c == '>') {
                part = 5;
            } else {
                return -1;
            }
            break;
        case 5: /* ':' ends the tag */
            if (c != ':' || i != n - 1)
                return -1;
            *rank = (int)vpid;
            return 1;
        }
    }
    return 0;
}

void hr_mpitag_feed(struct hr_mpitag *t, const char *data, size_t len,
                    hr_mpitag_cb cb, void *ctx)
{
    size_t i = 0;
    while (i < len) {
        char c = data[i];
        if (t->state == S_LINE) {
            if (c == '[') {
                t->tag_from = S_LINE;
                t->state = S_TAG;
                t->tag[0] = c;
                t->taglen = 1;
                i++;
            } else {
                /* A line without a tag is mpirun's own. */
                t->rank = -1;
                t->state = S_DATA;
            }
        } else if (t->state == S_TAG) {
            int rank = -1, r = -1;
            if (t->taglen < sizeof(t->tag)) {
                t->tag[t->taglen] = c;
                r = tag_check(t->tag, t->taglen + 1, &rank);
            }
            if (r >= 0) {
                t->taglen++;
                i++;
                if (r == 1) {
                    t->rank = rank;
                    t->state = S_DATA;
                    t->taglen = 0;
                }
                continue;
            }
            /* Not a tag after all: its bytes are data of the line it
             * appeared in, and c is looked at again. */
            if (t->tag_from == S_LINE)
                t->rank = -1;
            t->state = S_DATA;
            cb(ctx, t->rank, t->tag, t->taglen, 0);
            t->taglen = 0;
        } else {
            const char *p = data + i;
            size_t n = len - i;
            const char *nl = memchr(p, '\n', n);
            const char *br = memchr(p, '[', nl ? (size_t)(nl - p) : n);
            const char *end = br ? br : nl;
            size_t run = end ? (size_t)(end - p) : n;
            if (run > 0 || (end && *end == '\n'))
                cb(ctx, t->rank, p, run, end && *end == '\n');
            i += run;
            if (end == NULL)
                break;
            i++;
            if (*end == '\n') {
                t->state = S_LINE;
            } else {
                t->tag_from = S_DATA;
                t->state = S_TAG;
                t->tag[0] = '[';
                t->taglen = 1;
            }
        }
    }
}

void hr_mpitag_finish(struct hr_mpitag *t, hr_mpitag_cb cb, void *ctx)
{
    if (t->state == S_TAG && t->taglen > 0) {
        if (t->tag_from == S_LINE)
            t->rank = -1;
        cb(ctx, t->rank, t->tag, t->taglen, 0);
    }
    t->taglen = 0;
    t->state = S_LINE;
}
