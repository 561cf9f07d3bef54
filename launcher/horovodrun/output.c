/* Writes rank lines whole to the terminal and raw to per-rank files. */
#include "launcher/horovodrun/output.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/proto.h"

/* Lines are packed into chunks of this size; a longer line gets a chunk of
 * its own. */
#define CHUNK_SIZE (64u * 1024)
/* Freed chunks kept for the next lines instead of going back to malloc. */
#define MAX_SPARE 16
/* File output is written once this much is staged, and a stage grown
 * beyond twice that by a long line is freed after its write. */
#define STAGE_FLUSH (256u * 1024)

struct hr_chunk {
    struct hr_chunk *next;
    size_t len, cap;
    char data[];
};

/* mkdir -p: creates every missing component of path. */
static int mkdir_p(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Whether two descriptors lead to the same file, pipe or terminal. */
static int same_file(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static void init_sink(struct hr_output *o, struct hr_sink *s, int fd)
{
    s->o = o;
    s->fd = fd;
    s->work.data = s;
}

/* Opens the files of ranks first to size-1. */
static int open_files(struct hr_output *o, int first, char *err, size_t errlen)
{
    const struct hvd_plan *p = o->plan;
    const char *dir = o->dir;
    char path[4096];

    int width = o->width;
    for (int r = first; r < p->size; r++)
        o->files[r][0] = o->files[r][1] = -1;
    for (int r = first; r < p->size; r++) {
        snprintf(path, sizeof(path), "%s/rank.%0*d", dir, width, r);
        if (mkdir_p(path) != 0) {
            snprintf(err, errlen, "cannot create output directory '%s': %s",
                     path, strerror(errno));
            return HVD_EIO;
        }
        static const char *names[2] = {"stdout", "stderr"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof(path), "%s/rank.%0*d/%s", dir, width, r,
                     names[k]);
            o->files[r][k] =
                open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
            if (o->files[r][k] < 0) {
                snprintf(err, errlen, "cannot create output file '%s': %s",
                         path, strerror(errno));
                return HVD_EIO;
            }
        }
    }
    return 0;
}

int hr_output_init(struct hr_output *o, uv_loop_t *loop,
                   const struct hvd_plan *p, const struct hr_opts *opts,
                   char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    o->loop = loop;
    o->plan = p;
    init_sink(o, &o->sinks[0], STDOUT_FILENO);
    init_sink(o, &o->sinks[1], STDERR_FILENO);
    o->sink[0] = &o->sinks[0];
    /* stdout and stderr on one terminal or pipe (2>&1) share one queue:
     * two writers at once could cut each other's lines, and the lines keep
     * the order in which they arrived. */
    o->sink[1] =
        same_file(STDOUT_FILENO, STDERR_FILENO) ? &o->sinks[0] : &o->sinks[1];
    /* An elastic job starts with no process; -np sizes the rank folders'
     * names. */
    o->prefix = calloc(p->size > 0 ? (size_t)p->size : 1, sizeof(*o->prefix));
    if (o->prefix == NULL)
        return HVD_ENOMEM;
    o->cap = p->size;
    o->timestamp = opts->prefix_timestamp;
    o->max_ranks = opts->max_np > 0 ? opts->max_np : HR_OUTPUT_MAX_RANKS;
    int rc = hr_output_terminal(o, !opts->no_tty_status, opts->color,
                                opts->output_ranks, err, errlen);
    if (rc != 0 || opts->output_dir == NULL)
        return rc;
    o->dir = opts->output_dir;
    int np = p->size > opts->np ? p->size : opts->np;
    o->width = snprintf(NULL, 0, "%d", np > 1 ? np - 1 : 0);
    o->files = malloc(p->size > 0 ? (size_t)p->size * sizeof(*o->files) : 1);
    if (o->files == NULL)
        return HVD_ENOMEM;
    return open_files(o, 0, err, errlen);
}

int hr_output_grow(struct hr_output *o, char *err, size_t errlen)
{
    int old = o->cap, n = o->plan->size;
    if (n <= old)
        return 0;
    struct hr_prefix *x = realloc(o->prefix, (size_t)n * sizeof(*x));
    if (x == NULL)
        return HVD_ENOMEM;
    o->prefix = x;
    if (o->live) {
        struct hr_live *l = realloc(o->live, 2 * (size_t)n * sizeof(*l));
        if (l == NULL)
            return HVD_ENOMEM;
        memset(l + 2 * old, 0, 2 * (size_t)(n - old) * sizeof(*l));
        o->live = l;
    }
    if (o->files) {
        int(*f)[2] = realloc(o->files, (size_t)n * sizeof(*f));
        if (f == NULL)
            return HVD_ENOMEM;
        o->files = f;
    }
    o->cap = n;
    for (int r = old; r < n; r++)
        hr_output_relabel(o, (uint32_t)r, o->plan->ranks[r].local_rank);
    return o->files ? open_files(o, old, err, errlen) : 0;
}

static void free_chunks(struct hr_chunk *c)
{
    while (c) {
        struct hr_chunk *next = c->next;
        free(c);
        c = next;
    }
}

static void files_flush(struct hr_output *o);

void hr_output_close(struct hr_output *o)
{
    if (o == NULL)
        return;
    files_flush(o);
    free(o->stage);
    free(o->segs);
    o->stage = NULL;
    o->segs = NULL;
    o->stage_len = o->stage_cap = o->nsegs = o->segs_cap = 0;
    for (int k = 0; k < 2; k++) {
        struct hr_sink *s = &o->sinks[k];
        free_chunks(s->head);
        s->head = s->tail = NULL;
        s->waiting = 0;
        /* flight is set only while busy, and then a worker still inside a
         * write owns its chunks: the process is about to leave without
         * waiting for it. */
        s->flight = NULL;
    }
    free_chunks(o->spare);
    o->spare = NULL;
    o->nspare = 0;
    free(o->prefix);
    o->prefix = NULL;
    for (int i = 0; o->live && i < 2 * o->cap; i++)
        free(o->live[i].text);
    free(o->live);
    free(o->show);
    free(o->start_line);
    o->live = NULL;
    o->show = NULL;
    o->start_line = NULL;
    if (o->files == NULL)
        return;
    for (int r = 0; r < o->cap; r++)
        for (int k = 0; k < 2; k++)
            if (o->files[r][k] >= 0)
                close(o->files[r][k]);
    free(o->files);
    o->files = NULL;
}

/* Writes all of iov, even to a descriptor someone left non-blocking. */
static int write_all(int fd, struct iovec *iov, int n, size_t *done)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                poll(&pfd, 1, -1);
                continue;
            }
            return errno;
        }
        if (done)
            *done += (size_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Runs on a worker thread: only the batch in s->iov is touched. */
static void sink_write(uv_work_t *w)
{
    struct hr_sink *s = w->data;
    s->done = 0;
    s->werr = write_all(s->fd, s->iov, s->niov, &s->done);
}

static void sink_written(uv_work_t *w, int status);

/* Hands the oldest queued chunks, up to one batch, to a worker. */
static void sink_kick(struct hr_sink *s)
{
    if (s->busy || s->head == NULL)
        return;
    struct hr_chunk *c = s->head, *last = NULL;
    size_t bytes = 0;
    s->niov = 0;
    while (c && s->niov < HR_OUTPUT_IOV &&
           (bytes == 0 || bytes + c->len <= HR_OUTPUT_BATCH)) {
        s->iov[s->niov++] = (struct iovec){c->data, c->len};
        bytes += c->len;
        last = c;
        c = c->next;
    }
    s->flight = s->head;
    s->waiting -= bytes;
    last->next = NULL;
    s->head = c;
    if (c == NULL)
        s->tail = NULL;
    s->flight_bytes = bytes;
    s->busy = 1;
    if (uv_queue_work(s->o->loop, &s->work, sink_write, sink_written) != 0) {
        s->werr = EINVAL; /* cannot happen: the sink is dropped */
        s->done = 0;
        sink_written(&s->work, 0);
    }
}

static void recycle(struct hr_output *o, struct hr_chunk *c)
{
    while (c) {
        struct hr_chunk *next = c->next;
        if (c->cap == CHUNK_SIZE && o->nspare < MAX_SPARE) {
            c->next = o->spare;
            o->spare = c;
            o->nspare++;
        } else {
            free(c);
        }
        c = next;
    }
}

/* Tells the owner what changed, once the queue's state is consistent. */
static void notify(struct hr_output *o)
{
    if (o->paused && o->queued <= HR_OUTPUT_LOW) {
        o->paused = 0;
        if (o->on_pause)
            o->on_pause(o->arg, 0);
    }
    if (o->queued == 0 && !hr_output_busy(o) && o->on_idle)
        o->on_idle(o->arg);
}

static void drop_queue(struct hr_sink *s)
{
    s->o->queued -= s->waiting;
    s->waiting = 0;
    recycle(s->o, s->head);
    s->head = s->tail = NULL;
}

static void sink_written(uv_work_t *w, int status)
{
    struct hr_sink *s = w->data;
    struct hr_output *o = s->o;
    (void)status;
    s->busy = 0;
    recycle(o, s->flight);
    s->flight = NULL;
    o->queued -= s->flight_bytes;
    o->written += s->done;
    s->flight_bytes = 0;
    /* A closed terminal (horovodrun | head) must not stop the job or its
     * files: that side is dropped instead. Other errors lose the batch. */
    if (s->werr == EPIPE || s->werr == EBADF || s->werr == EINVAL) {
        s->broken = 1;
        drop_queue(s);
    }
    sink_kick(s);
    notify(o);
}

static struct hr_chunk *chunk_new(struct hr_output *o, size_t need)
{
    struct hr_chunk *c;
    if (need <= CHUNK_SIZE && o->spare) {
        c = o->spare;
        o->spare = c->next;
        o->nspare--;
    } else {
        size_t cap = need > CHUNK_SIZE ? need : CHUNK_SIZE;
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->cap = cap;
    }
    c->next = NULL;
    c->len = 0;
    return c;
}

void hr_output_put(struct hr_sink *s, const struct iovec *v, int n)
{
    struct hr_output *o = s->o;
    size_t need = 0;
    for (int i = 0; i < n; i++)
        need += v[i].iov_len;
    struct hr_chunk *c = s->tail;
    if (c == NULL || c->cap - c->len < need) {
        c = chunk_new(o, need);
        if (c == NULL)
            return; /* out of memory: the terminal loses the line */
        if (s->tail)
            s->tail->next = c;
        else
            s->head = c;
        s->tail = c;
    }
    for (int i = 0; i < n; i++) {
        memcpy(c->data + c->len, v[i].iov_base, v[i].iov_len);
        c->len += v[i].iov_len;
    }
    s->waiting += need;
    o->queued += need;
    if (o->queued > o->peak)
        o->peak = o->queued;
    if (s->waiting >= HR_OUTPUT_BATCH)
        sink_kick(s);
    if (!o->paused && o->queued >= HR_OUTPUT_HIGH) {
        o->paused = 1;
        if (o->on_pause)
            o->on_pause(o->arg, 1);
    }
}

/* Erases s's status block before a line scrolls in; it is drawn again at
 * the flush. */
static void lift_block(struct hr_sink *s)
{
    if (s->rows == 0)
        return;
    char buf[HR_TTY_ERASE_MAX(HR_OUTPUT_ROWS)];
    int rows = s->rows < HR_OUTPUT_ROWS ? s->rows : HR_OUTPUT_ROWS;
    struct iovec v = {buf, hr_tty_erase(&s->tty, rows, buf, sizeof(buf))};
    hr_output_put(s, &v, 1);
    s->rows = 0;
    s->dirty = 1;
}

/* Appends stamp, prefix, text and \n to the sink's queue as one piece. */
static void sink_line(struct hr_sink *s, const char *stamp, size_t slen,
                      const char *prefix, size_t plen, const char *text,
                      size_t len)
{
    lift_block(s);
    struct iovec v[4] = {{(void *)stamp, slen},
                         {(void *)prefix, plen},
                         {(void *)text, len},
                         {"\n", 1}};
    hr_output_put(s, v, 4);
}

/* Per-rank files are regular files: written from the loop, whole. */
static void files_flush(struct hr_output *o)
{
    for (size_t i = 0; i < o->nsegs; i++) {
        struct iovec iov = {o->stage + o->segs[i].off, o->segs[i].len};
        write_all(o->segs[i].fd, &iov, 1, NULL);
    }
    o->nsegs = 0;
    o->stage_len = 0;
    if (o->stage_cap > 2 * STAGE_FLUSH) {
        free(o->stage);
        o->stage = NULL;
        o->stage_cap = 0;
    }
}

/* Stages text and its end for fd; lines of one rank in a row make one
 * run. Without memory, writes at once. */
static void file_line(struct hr_output *o, int fd, const char *text, size_t len,
                      const char *end, size_t elen)
{
    size_t need = len + elen;
    if (o->stage_cap - o->stage_len < need) {
        size_t cap = o->stage_len + need;
        if (cap < STAGE_FLUSH + CHUNK_SIZE)
            cap = STAGE_FLUSH + CHUNK_SIZE;
        char *p = realloc(o->stage, cap);
        if (p == NULL)
            goto direct;
        o->stage = p;
        o->stage_cap = cap;
    }
    struct hr_file_seg *last = o->nsegs ? &o->segs[o->nsegs - 1] : NULL;
    if (last == NULL || last->fd != fd) {
        if (o->nsegs == o->segs_cap) {
            size_t n = o->segs_cap ? 2 * o->segs_cap : 64;
            struct hr_file_seg *p = realloc(o->segs, n * sizeof(*p));
            if (p == NULL)
                goto direct;
            o->segs = p;
            o->segs_cap = n;
        }
        last = &o->segs[o->nsegs++];
        *last = (struct hr_file_seg){fd, o->stage_len, 0};
    }
    memcpy(o->stage + o->stage_len, text, len);
    memcpy(o->stage + o->stage_len + len, end, elen);
    o->stage_len += need;
    last->len += need;
    if (o->stage_len >= STAGE_FLUSH)
        files_flush(o);
    return;
direct:
    files_flush(o);
    struct iovec raw[2] = {{(void *)text, len}, {(void *)end, elen}};
    write_all(fd, raw, 2, NULL);
}

/*
 * The local time as Python's time.asctime() writes it, which Horovod puts
 * in front of its lines: "Mon Nov  3 09:05:00 2026" (the day padded with
 * a blank). The names are spelled out because strftime's follow the
 * locale and asctime_r is obsolescent. Made once a second.
 */
static void stamp(struct hr_output *o)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed",
                                    "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr",
                                       "May", "Jun", "Jul", "Aug",
                                       "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    if (o->stamp_len > 0 && now == o->stamp_at)
        return;
    if (localtime_r(&now, &tm) == NULL) {
        o->stamp_len = 0;
        return;
    }
    int n = snprintf(o->stamp, sizeof(o->stamp), "%s %s %2d %02d:%02d:%02d %d",
                     days[tm.tm_wday % 7], months[tm.tm_mon % 12], tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_year + 1900);
    o->stamp_len = n > 0 && (size_t)n < sizeof(o->stamp) ? (size_t)n : 0;
    o->stamp_at = now;
}

void hr_output_commit(struct hr_output *o, uint32_t rank, int k,
                      const char *text, size_t len)
{
    const struct hr_prefix *x = &o->prefix[rank];
    if (o->timestamp)
        stamp(o);
    sink_line(o->sink[k], o->stamp, o->timestamp ? o->stamp_len : 0, x->text[k],
              x->len[k], text, len);
}

void hr_output_line(struct hr_output *o, uint32_t rank, int stream, int term,
                    const char *text, size_t len)
{
    if (rank >= (uint32_t)o->cap)
        return;
    /* In an elastic job rank is a process, whose rank may change. */
    int now = o->plan->ranks[rank].rank;
    if (o->tap)
        o->tap(o->tap_arg, (uint32_t)now, stream, term, text, len);
    int k = stream == HVD_STREAM_STDERR;
    if (o->files && term != HVD_TERM_PREVIEW) {
        static const char *ends[] = {"", "\n", "\r", "\n"};
        const char *end = ends[term & 3];
        file_line(o, o->files[now][k], text, len, end, strlen(end));
    }
    if (!o->started && o->status && term != HVD_TERM_PREVIEW) {
        o->started = 1;
        hr_output_start_line(o, NULL);
    }
    if (o->sink[k]->broken || (o->show && (now >= o->nshow || !o->show[now])))
        return;
    if (o->status)
        hr_output_live(o, rank, k, term, text, len);
    else if (term != HVD_TERM_CRLF_TAIL && term != HVD_TERM_PREVIEW)
        hr_output_commit(o, rank, k, text, len); /* \r\n: with its line */
}

void hr_output_raw(struct hr_output *o, int stream, const char *text,
                   size_t len)
{
    struct hr_sink *s = o->sink[stream == HVD_STREAM_STDERR];
    if (!s->broken)
        sink_line(s, "", 0, "", 0, text, len);
}

void hr_output_relabel(struct hr_output *o, uint32_t rank, int local_rank)
{
    static const char *names[2] = {"stdout", "stderr"};
    if (rank >= (uint32_t)o->cap)
        return;
    int now = o->plan->ranks[rank].rank;
    for (int k = 0; k < 2; k++) {
        struct hr_prefix *x = &o->prefix[rank];
        const struct hr_tty *t = &o->sink[k]->tty;
        const char *on = t->color ? t->fg[now % HR_TTY_COLORS] : "";
        int cols = snprintf(NULL, 0, "[%d,%d]<%s>:", now, local_rank, names[k]);
        int n = snprintf(x->text[k], sizeof(x->text[k]), "%s[%d,%d]<%s>:%s", on,
                         now, local_rank, names[k], t->color ? t->reset : "");
        x->len[k] = (uint8_t)n;
        x->cols[k] = (uint8_t)cols;
    }
}

void hr_output_flush(struct hr_output *o)
{
    files_flush(o);
    if (o->status)
        hr_output_live_flush(o);
    sink_kick(&o->sinks[0]);
    sink_kick(&o->sinks[1]);
}

void hr_output_kick(struct hr_sink *s)
{
    sink_kick(s);
}

size_t hr_output_pending(const struct hr_output *o)
{
    return o->queued;
}

int hr_output_busy(const struct hr_output *o)
{
    return o->sinks[0].busy || o->sinks[1].busy;
}
