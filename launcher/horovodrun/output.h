/* Rank output: prefixed lines on the terminal, raw per-rank files. */
#ifndef HR_OUTPUT_H
#define HR_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>
#include <uv.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/lib/plan.h"
#include "launcher/horovodrun/tty.h"

/*
 * Terminal output is queued and written by libuv's thread pool with plain
 * blocking writes, at most one write in flight per destination, so the
 * event loop never waits for a slow reader. Making stdout non-blocking
 * instead would change the open file description that horovodrun shares
 * with its shell, the local agent (its stderr) and hvd_log: they would see
 * EAGAIN. The pool (four threads unless UV_THREADPOOL_SIZE says otherwise)
 * holds at most three long waits: these two writes and the stdin read.
 *
 * The queue is bounded: at HR_OUTPUT_HIGH bytes the owner is told to stop
 * reading the agents, and at HR_OUTPUT_LOW to start again. It may exceed
 * HIGH by the rest of one agent read (64 KiB) or one line frame.
 */
#define HR_OUTPUT_HIGH (4u * 1024 * 1024)
#define HR_OUTPUT_LOW (1u * 1024 * 1024)
/* Most bytes and buffers handed to one write. */
#define HR_OUTPUT_BATCH (256u * 1024)
#define HR_OUTPUT_IOV 64
/* The ranks --output-ranks may name in an elastic job without --max-np. */
#define HR_OUTPUT_MAX_RANKS 65536
/* Most rows of a status block (fewer on a smaller terminal). */
#define HR_OUTPUT_ROWS 64

struct hr_output;
struct hr_chunk;

/* One destination (horovodrun's stdout or stderr) and its queue. */
struct hr_sink {
    struct hr_output *o;
    int fd;
    struct hr_chunk *head, *tail; /* waiting to be written */
    struct hr_chunk *flight;      /* being written by the worker */
    size_t waiting;               /* bytes from head to tail */
    size_t flight_bytes;
    uv_work_t work;
    struct iovec iov[HR_OUTPUT_IOV]; /* the worker's, while busy */
    int niov;
    int busy;    /* a write is in flight */
    int broken;  /* the reader went away: lines for it are dropped */
    int werr;    /* errno of the failed write, set by the worker */
    size_t done; /* bytes of the batch written, set by the worker */
    /* The terminal behind fd; with tty.redraw the status block below the
     * scrolled lines, as the queue will have drawn it: */
    struct hr_tty tty;
    int rows;          /* its rows on the screen (0: none) */
    int dirty;         /* what it shows changed */
    uint64_t drawn_at; /* when it was last drawn (uv_now, ms) */
};

/* A rank's progress line (the text before its last \r) on one stream. */
struct hr_live {
    char *text;
    size_t len, cap;
    int waiting; /* not a terminal: text is held back by the rate limit */
    uint64_t at; /* when the last one was written (uv_now, ms), or 0 */
};

/* A run of staged bytes for one per-rank file. */
struct hr_file_seg {
    int fd;
    size_t off, len;
};

struct hr_prefix {
    uint8_t len[2];
    uint8_t cols[2]; /* columns it takes: len without the colour */
    char text[2][40 + 2 * HR_TTY_SEQ]; /* "[rank,local_rank]<stdout>:" */
};

struct hr_output {
    uv_loop_t *loop;
    struct hr_sink sinks[2];
    struct hr_sink *sink[2]; /* per stream; one sink when both are one */
    size_t queued;           /* bytes waiting or in flight, all sinks */
    uint64_t written;        /* bytes written so far, all sinks */
    size_t peak;             /* most bytes ever queued */
    int paused;              /* the owner was told to stop reading */
    struct hr_chunk *spare;  /* freed chunks kept for reuse */
    int nspare;
    /* The ranks: in an elastic job one entry per process, whose .rank is
     * the rank it has now (or had last); the arrays below have cap
     * entries, grown with hr_output_grow. */
    const struct hvd_plan *plan;
    int cap;
    struct hr_prefix *prefix; /* per rank (process) */
    /* per rank stdout, stderr; NULL without a dir, whose name is dir and
     * whose rank folders' numbers are width digits wide */
    int (*files)[2];
    const char *dir;
    int width;
    /* File output gathered during a batch of lines, written at the flush:
     * one write per rank and batch instead of one per line. */
    char *stage;
    size_t stage_len, stage_cap;
    struct hr_file_seg *segs;
    size_t nsegs, segs_cap;
    /* Set by the owner after init: put the local time in front of each
     * rank line on the terminal, as Horovod's
     * --prefix-output-with-timestamp does ("Mon Nov 30 12:00:00 2026"
     * before "[rank,local_rank]"); the per-rank files stay raw. */
    int timestamp;
    time_t stamp_at; /* the second stamp was made for */
    char stamp[32];
    size_t stamp_len;
    /* Set by hr_output_terminal: */
    int status;           /* progress lines drawn in place or rate-limited */
    struct hr_live *live; /* per rank and stream: [2 * rank + stream] */
    unsigned char *show;  /* per rank: shown on the terminal; NULL: all */
    int nshow;            /* its entries (ranks above are not shown) */
    int max_ranks;    /* an elastic job's most ranks (--max-np or a bound) */
    char *start_line; /* horovodrun's start-up progress, or NULL */
    int started;      /* the ranks' output began: no more of it */
    uv_timer_t timer; /* the next redraw or held-back progress line */
    int timer_init;
    uint64_t timer_due; /* when it fires (uv_now, ms), or 0 */
    /* Set by the owner: stop (1) or resume (0) reading rank output, and
     * the queue became empty. */
    void (*on_pause)(void *arg, int pause);
    void (*on_idle)(void *arg);
    void *arg;
    /* Set by the owner: sees every rank line first (a detached job's
     * control socket), called with tap_arg and the line's rank (in an
     * elastic job, the rank its process has now). */
    void (*tap)(void *tap_arg, uint32_t rank, int stream, int term,
                const char *text, size_t len);
    void *tap_arg;
    int took_log; /* hr_output_take_log redirected hvd_log */
};

/*
 * Opens DIR/rank.N/stdout and stderr for every rank with --output-filename
 * DIR (N zero-padded to the width of size-1), and sets up the terminal
 * as the options say (hr_output_terminal). On failure writes one line to
 * err and returns a negative code: HVD_ENOMEM, or HVD_EIO or HVD_EINVAL
 * for what the user gave.
 */
int hr_output_init(struct hr_output *o, uv_loop_t *loop,
                   const struct hvd_plan *p, const struct hr_opts *opts,
                   char *err, size_t errlen);
/*
 * How the terminal shows rank output (hr_output_init's second half). With
 * status (no --no-tty-status): on a terminal, each rank's \r-ended
 * progress line is redrawn in a block below the scrolled lines, changes
 * at most 10 times a second; elsewhere it is written at most once a
 * second, the last one always. Without status, lines are written as they
 * come. color is an enum hr_color (auto becomes never without status).
 * ranks, when not NULL, is --output-ranks: only those reach the terminal
 * (the files get all). 0, HVD_ENOMEM, or HVD_EINVAL with err set.
 */
int hr_output_terminal(struct hr_output *o, int status, int color,
                       const char *ranks, char *err, size_t errlen);
/* The plan grew (an elastic job started processes): the arrays follow,
 * and the new ranks' files are opened. 0, HVD_ENOMEM, or HVD_EIO with err
 * set. */
int hr_output_grow(struct hr_output *o, char *err, size_t errlen);
/* horovodrun's start-up progress ("3/4 ranks connected ..."), drawn as
 * the first row of the block until text is NULL or the first rank line
 * comes; nothing unless stderr's terminal draws the block. */
void hr_output_start_line(struct hr_output *o, const char *text);
/* The ranks are done: writes the held-back progress lines and erases the
 * block. */
void hr_output_end(struct hr_output *o);
/* With on, while a terminal may draw the status block, horovodrun's own
 * messages (hvd_log) go through the stderr queue, in order with the rank
 * lines and never inside the block; with 0 they are written directly
 * again. For the loop's run only: the queue is written by the loop. */
void hr_output_take_log(struct hr_output *o, int on);
/* Frees what is not being written; see hr_output_busy. */
void hr_output_close(struct hr_output *o);
/*
 * Queues one line: "[rank,local_rank]<stdout>:text\n" for the terminal,
 * written whole by one write, and writes text with its original
 * terminator to the rank's file. stream is HVD_STREAM_STDOUT or
 * HVD_STREAM_STDERR; term an hvd_line_term.
 */
void hr_output_line(struct hr_output *o, uint32_t rank, int stream, int term,
                    const char *text, size_t len);
/* Queues one line for the terminal as it is, with a newline and no
 * prefix (messages of mpirun itself under --mpi). */
void hr_output_raw(struct hr_output *o, int stream, const char *text,
                   size_t len);
/* Rank's prefix names the plan's rank for it and local_rank from now on
 * (under --mpi, where mpirun's placement is what counts; in an elastic
 * job, after a reset). */
void hr_output_relabel(struct hr_output *o, uint32_t rank, int local_rank);
/* Writes the batch's file output and starts writing what was queued for
 * the terminal (call after a batch of lines). */
void hr_output_flush(struct hr_output *o);
/* Between output.c and output_live.c. */
/* Appends the pieces to s's queue as one piece, written whole. */
void hr_output_put(struct hr_sink *s, const struct iovec *v, int n);
/* Queues one of rank's lines, erasing the block first. */
void hr_output_commit(struct hr_output *o, uint32_t rank, int k,
                      const char *text, size_t len);
/* Progress segments: CR, and the lines that end them (output_live.c). */
void hr_output_live(struct hr_output *o, uint32_t rank, int k, int term,
                    const char *text, size_t len);
/* Starts writing what s has queued. */
void hr_output_kick(struct hr_sink *s);
/* Draws changed blocks and writes due progress lines, or arms the timer
 * for when they are due. */
void hr_output_live_flush(struct hr_output *o);

/* Bytes queued for the terminal and not yet written. */
size_t hr_output_pending(const struct hr_output *o);
/* A worker thread is inside a write: the process must not wait for it to
 * exit (a terminal that takes nothing would hold it forever). */
int hr_output_busy(const struct hr_output *o);

#endif
