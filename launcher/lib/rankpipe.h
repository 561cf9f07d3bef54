/* A rank's stdout or stderr pipe, read and cut into lines for its owner. */
#ifndef HR_RANKPIPE_H
#define HR_RANKPIPE_H

#include <stddef.h>
#include <uv.h>

#include "launcher/lib/linesplit.h"

/* Longest line of a rank handed on whole; longer lines go on in pieces of
 * this size. hvd-agent and hvd-mpi-rank cut lines so, and horovodrun
 * --mpi sizes what it holds of a rank's records by it. */
#define HR_RANKPIPE_LINE_MAX (8u * 1024 * 1024)
/* How long a rank's pipes may stay open after it exited (grandchildren
 * that hold them) before they are read one last time and closed. */
#define HR_RANKPIPE_DRAIN_MS 2000

/*
 * What the pipes of one program share. The callbacks get the ctx of the
 * pipe (its owner, a rank) and which stream it is.
 */
struct hr_rankpipe_cfg {
    /* One line of the rank's output, as the line splitter cut it. */
    void (*line)(void *ctx, int which, const char *text, size_t len,
                 enum hvd_line_term term);
    /* After the lines of one read: hand them on together. */
    void (*flush)(void *ctx);
    /* EOF or a failed read, after the last (partial) line; once. */
    void (*ended)(void *ctx, int which);
    char *buf; /* read buffer; the program's other reads may share it */
    size_t buflen;
    size_t line_max; /* longest line handed on whole */
};

struct hr_rankpipe {
    uv_pipe_t pipe;
    struct hvd_linesplit split;
    const struct hr_rankpipe_cfg *cfg;
    void *ctx;
    int which; /* HVD_STREAM_STDOUT or HVD_STREAM_STDERR */
    int open;  /* not ended yet */
};

/*
 * Initializes the pipe, open but not reading yet: then either give it the
 * read end with hr_rankpipe_open, or hand hr_rankpipe_stream to uv_spawn
 * as a UV_CREATE_PIPE. Returns 0, or a libuv error (the pipe is not open).
 */
int hr_rankpipe_init(struct hr_rankpipe *p, uv_loop_t *loop,
                     const struct hr_rankpipe_cfg *cfg, void *ctx, int which);
/* Takes fd, the read end; on failure closes it and ends the pipe. */
int hr_rankpipe_open(struct hr_rankpipe *p, int fd);
/* The libuv stream, for uv_spawn's stdio. */
uv_stream_t *hr_rankpipe_stream(struct hr_rankpipe *p);
/* Starts or stops reading (backpressure); nothing once ended. */
void hr_rankpipe_start(struct hr_rankpipe *p);
void hr_rankpipe_stop(struct hr_rankpipe *p);
/*
 * Reads at once what the pipe holds, up to about max bytes, without the
 * loop; ends the pipe at EOF. Does not flush.
 */
void hr_rankpipe_drain(struct hr_rankpipe *p, size_t max);
/* Ends the pipe as at EOF: the partial line, closing, ended. Once. */
void hr_rankpipe_end(struct hr_rankpipe *p);
/* Frees the line buffer once the handle is closed (by hr_rankpipe_end or
 * by closing the loop's handles). NULL or a zeroed pipe: nothing. */
void hr_rankpipe_close(struct hr_rankpipe *p);

#endif
