/* Progress lines: a status block redrawn in place, or rate-limited lines. */
#include "launcher/horovodrun/output.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/ranklist.h"

/* A terminal's block is drawn at most this often. */
#define REDRAW_MS 100
/* Elsewhere, a rank's progress line is written at most this often. */
#define HOLD_MS 1000

static int set_text(char **text, size_t *len, size_t *cap, const char *s,
                    size_t n)
{
    if (n + 1 > *cap) {
        size_t c = n + 1 > 2 * *cap ? n + 1 : 2 * *cap;
        char *p = realloc(*text, c);
        if (p == NULL)
            return HVD_ENOMEM;
        *text = p;
        *cap = c;
    }
    memcpy(*text, s, n);
    (*text)[n] = '\0';
    *len = n;
    return 0;
}

int hr_output_terminal(struct hr_output *o, int status, int color,
                       const char *ranks, char *err, size_t errlen)
{
    int size = o->plan->size;
    o->status = status;
    if (ranks) {
        /* An elastic job has no process yet: its ranks go up to
         * --max-np. */
        int n = size > 0 ? size : o->max_ranks;
        if ((o->show = malloc((size_t)n)) == NULL)
            return HVD_ENOMEM;
        if (hr_ranklist_parse(ranks, n, o->show, err, errlen) != 0)
            return HVD_EINVAL;
        o->nshow = n;
    }
    if (!status && color == HR_COLOR_AUTO)
        color = HR_COLOR_NEVER;
    for (int k = 0; k < 2; k++)
        hr_tty_init(&o->sinks[k].tty, o->sinks[k].fd, status, color);
    for (int r = 0; r < size; r++)
        hr_output_relabel(o, (uint32_t)r, o->plan->ranks[r].local_rank);
    if (!status)
        return 0;
    o->live = calloc(size > 0 ? 2 * (size_t)size : 1, sizeof(*o->live));
    if (o->live == NULL || uv_timer_init(o->loop, &o->timer) != 0)
        return HVD_ENOMEM;
    o->timer.data = o;
    o->timer_init = 1;
    return 0;
}

static void take_line(void *arg, const char *line, size_t len)
{
    hr_output_raw(arg, HVD_STREAM_STDERR, line, len);
    hr_output_flush(arg);
}

void hr_output_take_log(struct hr_output *o, int on)
{
    int take =
        on && o->status && (o->sinks[0].tty.redraw || o->sinks[1].tty.redraw);
    /* Only its own redirection is undone: a detached job's stays. */
    if (take)
        hvd_log_redirect(take_line, o);
    else if (o->took_log)
        hvd_log_redirect(NULL, NULL);
    o->took_log = take;
}

static void on_timer(uv_timer_t *t)
{
    struct hr_output *o = t->data;
    o->timer_due = 0;
    hr_output_flush(o);
}

/* Makes the timer fire by due (uv_now, ms) at the latest. */
static void arm(struct hr_output *o, uint64_t due)
{
    if (o->timer_due != 0 && o->timer_due <= due)
        return;
    uint64_t now = uv_now(o->loop);
    o->timer_due = due;
    uv_timer_start(&o->timer, on_timer, due > now ? due - now : 0, 0);
}

/* Not a terminal: writes the held-back line. */
static void release(struct hr_output *o, uint32_t rank, int k)
{
    struct hr_live *l = &o->live[2 * rank + k];
    if (!l->waiting)
        return;
    l->waiting = 0;
    l->at = uv_now(o->loop);
    hr_output_commit(o, rank, k, l->text, l->len);
}

/* Not a terminal: a progress line now if none was written for HOLD_MS,
 * else held back for then. Lines that end one show its last state. */
static void live_pipe(struct hr_output *o, uint32_t rank, int k, int term,
                      const char *text, size_t len)
{
    struct hr_live *l = &o->live[2 * rank + k];
    uint64_t now = uv_now(o->loop);
    if (term == HVD_TERM_PREVIEW)
        return;
    if (term != HVD_TERM_CR) {
        release(o, rank, k);
        if (term != HVD_TERM_CRLF_TAIL)
            hr_output_commit(o, rank, k, text, len);
        return;
    }
    if (len == 0)
        return; /* the \r in front of a progress bar */
    if (!l->waiting && (l->at == 0 || now - l->at >= HOLD_MS)) {
        l->at = now;
        hr_output_commit(o, rank, k, text, len);
        return;
    }
    if (set_text(&l->text, &l->len, &l->cap, text, len) == 0) {
        l->waiting = 1;
        arm(o, l->at + HOLD_MS);
    }
}

void hr_output_live(struct hr_output *o, uint32_t rank, int k, int term,
                    const char *text, size_t len)
{
    struct hr_sink *s = o->sink[k];
    if (!s->tty.redraw) {
        live_pipe(o, rank, k, term, text, len);
        return;
    }
    struct hr_live *l = &o->live[2 * rank + k];
    switch (term) {
    case HVD_TERM_CR:
    case HVD_TERM_PREVIEW:
        /* The rank's live row shows it; an empty one (the \r in front of
         * a bar) changes nothing. */
        if (len > 0 && set_text(&l->text, &l->len, &l->cap, text, len) == 0)
            s->dirty = 1;
        return;
    case HVD_TERM_CRLF_TAIL:
        /* "\r\n" after a progress line: it stays, as a normal line. */
        if (l->len > 0)
            hr_output_commit(o, rank, k, l->text, l->len);
        break;
    default:
        /* A line after a progress line is its final state. */
        hr_output_commit(o, rank, k, text, len);
        break;
    }
    if (l->len > 0) {
        l->len = 0;
        s->dirty = 1;
    }
}

/* Appends one block row: prefix and text cut to the terminal's width. */
static size_t row(char *buf, size_t n, size_t cap, const char *prefix,
                  size_t plen, int pcols, const char *text, size_t len,
                  int cols)
{
    int room = cols - 1 - pcols; /* the last column would wrap */
    size_t fit = room > 0 ? hr_tty_fit(text, len, room) : 0;
    if (n > 0 && n < cap)
        buf[n++] = '\n';
    if (n + plen + fit + HR_TTY_SEQ > cap)
        return n;
    memcpy(buf + n, prefix, plen);
    memcpy(buf + n + plen, text, fit);
    return n + plen + fit;
}

/* Draws s's block again: the start-up line, then each live row. */
static void draw(struct hr_output *o, struct hr_sink *s)
{
    int cols, lines, rows = 0;
    hr_tty_size(&s->tty, &cols, &lines);
    int max = lines - 1 < HR_OUTPUT_ROWS ? lines - 1 : HR_OUTPUT_ROWS;
    int want = 0, start = o->start_line != NULL && s == o->sink[1];
    for (int i = 0; i < 2 * o->cap; i++)
        want += o->live[i].len > 0 && o->sink[i & 1] == s;
    want += start;
    size_t cap = (size_t)(max > 0 ? max : 1) * (size_t)(cols + 128) + 256;
    char *buf = malloc(cap);
    if (buf == NULL)
        return;
    size_t n = 0;
    char erase[HR_TTY_ERASE_MAX(HR_OUTPUT_ROWS)];
    size_t elen = hr_tty_erase(&s->tty, s->rows, erase, sizeof(erase));
    if (s->rows == 0)
        elen = 0;
    if (start && rows < max) {
        n = row(buf, n, cap, "", 0, 0, o->start_line, strlen(o->start_line),
                cols);
        rows++;
    }
    for (int i = 0; i < 2 * o->cap && rows < max; i++) {
        const struct hr_live *l = &o->live[i];
        if (l->len == 0 || o->sink[i & 1] != s)
            continue;
        if (rows == max - 1 && want > max) {
            char more[96];
            int m = snprintf(more, sizeof(more),
                             "horovodrun: %d more progress lines", want - rows);
            n = row(buf, n, cap, "", 0, 0, more, (size_t)m, cols);
            rows++;
            break;
        }
        const struct hr_prefix *x = &o->prefix[i / 2];
        n = row(buf, n, cap, x->text[i & 1], x->len[i & 1], x->cols[i & 1],
                l->text, l->len, cols);
        rows++;
    }
    struct iovec v[2] = {{erase, elen}, {buf, n}};
    hr_output_put(s, v, 2);
    free(buf);
    s->rows = rows;
    s->dirty = 0;
    s->drawn_at = uv_now(o->loop);
}

void hr_output_live_flush(struct hr_output *o)
{
    uint64_t now = uv_now(o->loop);
    for (int k = 0; k < 2; k++) {
        struct hr_sink *s = &o->sinks[k];
        if (!s->tty.redraw || !s->dirty || s->broken)
            continue;
        if (s->rows > 0 && now - s->drawn_at < REDRAW_MS)
            arm(o, s->drawn_at + REDRAW_MS);
        else
            draw(o, s);
    }
    for (int i = 0; i < 2 * o->cap; i++) {
        struct hr_live *l = &o->live[i];
        if (!l->waiting)
            continue;
        if (now - l->at >= HOLD_MS)
            release(o, (uint32_t)(i / 2), i & 1);
        else
            arm(o, l->at + HOLD_MS);
    }
    for (int k = 0; k < 2; k++)
        hr_output_kick(&o->sinks[k]);
}

void hr_output_start_line(struct hr_output *o, const char *text)
{
    struct hr_sink *s = o->sink[1];
    if (!o->status || !s->tty.redraw || (text && o->started))
        return;
    if (text && o->start_line && strcmp(text, o->start_line) == 0)
        return;
    free(o->start_line);
    o->start_line = text ? strdup(text) : NULL;
    s->dirty = 1;
    hr_output_flush(o);
}

void hr_output_end(struct hr_output *o)
{
    if (!o->status)
        return;
    free(o->start_line);
    o->start_line = NULL;
    for (int i = 0; i < 2 * o->cap; i++) {
        release(o, (uint32_t)(i / 2), i & 1);
        o->live[i].len = 0;
    }
    for (int k = 0; k < 2; k++) {
        struct hr_sink *s = &o->sinks[k];
        if (s->rows > 0) {
            char buf[HR_TTY_ERASE_MAX(HR_OUTPUT_ROWS)];
            struct iovec v = {buf,
                              hr_tty_erase(&s->tty, s->rows, buf, sizeof(buf))};
            hr_output_put(s, &v, 1);
            s->rows = 0;
        }
        s->dirty = 0;
        hr_output_kick(s);
    }
    if (o->timer_init)
        uv_timer_stop(&o->timer);
    o->timer_due = 0;
}
