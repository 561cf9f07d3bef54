/* Splits a byte stream into lines ended by \n, \r or \r\n. */
#include "launcher/lib/linesplit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"

/* Line limit used when the caller passes 0: longer than any sane log line. */
#define DEFAULT_MAX 65536
/* First buffer size; it doubles from there up to max. */
#define FIRST_CAP 256

void hvd_linesplit_init(struct hvd_linesplit *ls, size_t max)
{
    if (ls == NULL)
        return;
    ls->buf = NULL;
    ls->len = 0;
    ls->cap = 0;
    if (max == 0)
        max = DEFAULT_MAX;
    /* The parser looks at max + 1 bytes; keep that and doubling in range. */
    if (max > SIZE_MAX / 4)
        max = SIZE_MAX / 4;
    ls->max = max;
    ls->pending_cr = 0;
}

void hvd_linesplit_close(struct hvd_linesplit *ls)
{
    if (ls == NULL)
        return;
    free(ls->buf);
    ls->buf = NULL;
    ls->len = 0;
    ls->cap = 0;
    ls->pending_cr = 0;
}

/* Appends to the partial line; the caller keeps ls->len + n <= ls->max. */
static int append(struct hvd_linesplit *ls, const char *data, size_t n)
{
    size_t need = ls->len + n;
    size_t ncap;
    char *nbuf;

    if (n == 0)
        return 0;
    if (need > ls->cap) {
        ncap = ls->cap ? ls->cap : FIRST_CAP;
        while (ncap < need)
            ncap *= 2;
        if (ncap > ls->max)
            ncap = ls->max;
        nbuf = realloc(ls->buf, ncap);
        if (nbuf == NULL)
            return HVD_ENOMEM;
        ls->buf = nbuf;
        ls->cap = ncap;
    }
    memcpy(ls->buf + ls->len, data, n);
    ls->len = need;
    return 0;
}

/*
 * First '\n' or '\r' in s[0..n), or NULL. Two memchr calls (vectorized in
 * libc) beat one byte loop: the second looks only before the first \n.
 */
static const char *find_term(const char *s, size_t n)
{
    const char *nl = memchr(s, '\n', n);
    const char *cr = memchr(s, '\r', nl ? (size_t)(nl - s) : n);
    return cr ? cr : nl;
}

/*
 * Emits a line made of the partial line plus data[0..n). With nothing
 * pending the line goes straight from the input, without a copy.
 */
static int emit(struct hvd_linesplit *ls, const char *data, size_t n,
                enum hvd_line_term term, hvd_line_cb cb, void *ctx)
{
    int rc;

    if (ls->len == 0) {
        cb(ctx, data, n, term);
        return 0;
    }
    rc = append(ls, data, n);
    if (rc < 0)
        return rc;
    cb(ctx, ls->buf, ls->len, term);
    ls->len = 0;
    return 0;
}

int hvd_linesplit_feed(struct hvd_linesplit *ls, const char *data, size_t len,
                       hvd_line_cb cb, void *ctx)
{
    const char *t;
    size_t i = 0;
    size_t avail;
    size_t window;
    size_t take;
    int rc = 0;

    if (ls == NULL || cb == NULL || (data == NULL && len > 0))
        return HVD_EINVAL;
    if (len == 0)
        return 0;

    /* The \n of a \r\n split across two calls. */
    if (ls->pending_cr) {
        ls->pending_cr = 0;
        if (data[0] == '\n') {
            cb(ctx, data, 0, HVD_TERM_CRLF_TAIL);
            i = 1;
        }
    }

    while (i < len) {
        avail = len - i;
        /*
         * Look at most one byte past a full line: a terminator there still
         * ends a line of exactly max bytes whole.
         */
        window = ls->max + 1 - ls->len;
        t = find_term(data + i, avail < window ? avail : window);
        if (t != NULL) {
            take = (size_t)(t - (data + i));
            rc = emit(ls, data + i, take,
                      *t == '\n' ? HVD_TERM_LF : HVD_TERM_CR, cb, ctx);
            if (rc < 0)
                goto out;
            ls->after_cr = *t == '\r';
            i += take + 1;
            if (*t == '\r' && i == len)
                ls->pending_cr = 1;
            else if (*t == '\r' && data[i] == '\n') {
                cb(ctx, data + i, 0, HVD_TERM_CRLF_TAIL);
                i++;
            }
        } else if (avail >= window) {
            /* max bytes and no terminator after them: split here. */
            take = ls->max - ls->len;
            rc = emit(ls, data + i, take, HVD_TERM_NONE, cb, ctx);
            if (rc < 0)
                goto out;
            ls->after_cr = 0;
            i += take;
        } else {
            rc = append(ls, data + i, avail);
            if (rc < 0)
                goto out;
            i = len;
        }
    }
out:
    return rc;
}

size_t hvd_linesplit_preview(const struct hvd_linesplit *ls, const char **text)
{
    if (!ls->after_cr || ls->len == 0)
        return 0;
    *text = ls->buf;
    return ls->len;
}

void hvd_linesplit_finish(struct hvd_linesplit *ls, hvd_line_cb cb, void *ctx)
{
    if (ls == NULL)
        return;
    if (ls->len > 0 && cb != NULL)
        cb(ctx, ls->buf, ls->len, HVD_TERM_NONE);
    ls->len = 0;
    ls->pending_cr = 0;
    ls->after_cr = 0;
}
