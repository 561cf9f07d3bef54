/* A detached job's kept output: per-rank lists of lines, bounded. */
#include "launcher/horovodrun/keep.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/proto.h"

/* What a line counts against the bound: empty lines too. */
#define COST(len) ((len) + sizeof(struct hr_keep_rec))

struct hr_keep_rec {
    struct hr_keep_rec *next, *prev;
    uint64_t seq;
    uint32_t rank;
    size_t len;
    uint8_t stream, term;
    char text[];
};

int hr_keep_init(struct hr_keep *k, uint32_t size)
{
    memset(k, 0, sizeof(*k));
    k->lists = calloc((size_t)size + 1, sizeof(*k->lists));
    if (k->lists == NULL)
        return HVD_ENOMEM;
    k->size = size;
    return 0;
}

int hr_keep_grow(struct hr_keep *k, uint32_t size)
{
    if (size <= k->size)
        return 0;
    struct hr_keep_list *l = realloc(k->lists, ((size_t)size + 1) * sizeof(*l));
    if (l == NULL)
        return HVD_ENOMEM;
    /* horovodrun's own list moves to the end. */
    l[size] = l[k->size];
    memset(&l[k->size], 0, (size_t)(size - k->size) * sizeof(*l));
    k->lists = l;
    k->size = size;
    return 0;
}

void hr_keep_close(struct hr_keep *k)
{
    for (uint32_t i = 0; k->lists && i <= k->size; i++) {
        struct hr_keep_rec *r = k->lists[i].head;
        while (r) {
            struct hr_keep_rec *next = r->next;
            free(r);
            r = next;
        }
    }
    free(k->lists);
    memset(k, 0, sizeof(*k));
}

/* Unlinks r from l and frees it. */
static void unlink_rec(struct hr_keep_list *l, struct hr_keep_rec *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    if (l->last[r->stream == HVD_STREAM_STDERR] == r)
        l->last[r->stream == HVD_STREAM_STDERR] = NULL;
    l->bytes -= COST(r->len);
    free(r);
}

int hr_keep_add(struct hr_keep *k, const struct hr_keep_line *line)
{
    if (line->term == HVD_TERM_PREVIEW)
        return 0;
    if (line->rank != HR_KEEP_SELF && line->rank >= k->size)
        return 0;
    uint32_t i = line->rank == HR_KEEP_SELF ? k->size : line->rank;
    struct hr_keep_list *l = &k->lists[i];
    size_t len = line->len < HR_KEEP_LINE_MAX ? line->len : HR_KEEP_LINE_MAX;
    struct hr_keep_rec *r = malloc(sizeof(*r) + len);
    if (r == NULL)
        return HVD_ENOMEM;
    r->seq = k->seq++;
    r->rank = line->rank;
    r->len = len;
    r->stream = line->stream;
    r->term = line->term;
    memcpy(r->text, line->text, len);
    /* A progress bar keeps only its last state: a later update, or the
     * line that ends it, replaces it (a \r\n's tail commits it). */
    int s = r->stream == HVD_STREAM_STDERR;
    struct hr_keep_rec *t = l->last[s];
    if (t && t->term == HVD_TERM_CR && line->term != HVD_TERM_CRLF_TAIL)
        unlink_rec(l, t);
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->last[s] = r;
    l->bytes += COST(len);
    while (l->bytes > HR_KEEP_RANK_BYTES)
        unlink_rec(l, l->head);
    return 0;
}

static int by_seq(const void *a, const void *b)
{
    const struct hr_keep_rec *x = *(struct hr_keep_rec *const *)a;
    const struct hr_keep_rec *y = *(struct hr_keep_rec *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int hr_keep_each(const struct hr_keep *k, int rank, long tail,
                 int (*fn)(void *arg, const struct hr_keep_line *l), void *arg)
{
    size_t n = 0, m = 0;
    struct hr_keep_rec **v = NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i <= k->size; i++) {
            if (rank >= 0 && i != (uint32_t)rank && i != k->size)
                continue;
            for (struct hr_keep_rec *r = k->lists[i].head; r; r = r->next) {
                if (pass == 0)
                    n++;
                else
                    v[m++] = r;
            }
        }
        if (pass == 0 && n == 0)
            return 0;
        if (pass == 0 && (v = malloc(n * sizeof(*v))) == NULL)
            return HVD_ENOMEM;
    }
    qsort(v, n, sizeof(*v), by_seq);
    size_t from = tail >= 0 && (size_t)tail < n ? n - (size_t)tail : 0;
    int rc = 0;
    for (size_t j = from; j < n && rc == 0; j++) {
        const struct hr_keep_line l = {v[j]->rank, v[j]->stream, v[j]->term,
                                       v[j]->text, v[j]->len};
        rc = fn(arg, &l);
    }
    free(v);
    return rc;
}
