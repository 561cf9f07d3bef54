/* Splits a byte stream into lines ended by \n, \r or \r\n. */
#ifndef HVD_LINESPLIT_H
#define HVD_LINESPLIT_H

#include <stddef.h>

enum hvd_line_term {
    HVD_TERM_NONE = 0,      /* split at the length limit, or the tail at EOF */
    HVD_TERM_LF = 1,        /* ended by \n */
    HVD_TERM_CR = 2,        /* ended by \r (progress bars) */
    HVD_TERM_CRLF_TAIL = 3, /* the \n of a \r\n: empty, raw output only */
    /* Not the splitter's: the partial line after a \r so far (a progress
     * bar drawn as "\r" + text), for a terminal to show; not output. */
    HVD_TERM_PREVIEW = 4
};

/* Called once per line; line is not NUL-terminated and excludes the end. */
typedef void (*hvd_line_cb)(void *ctx, const char *line, size_t len,
                            enum hvd_line_term term);

struct hvd_linesplit {
    char *buf;
    size_t len;
    size_t cap;
    size_t max;     /* longest line emitted whole */
    int pending_cr; /* last byte seen was \r */
    int after_cr;   /* the partial line follows a \r */
};

void hvd_linesplit_init(struct hvd_linesplit *ls, size_t max);
void hvd_linesplit_close(struct hvd_linesplit *ls);
/* Feeds bytes; calls cb for every completed line. 0 or HVD_ENOMEM. */
int hvd_linesplit_feed(struct hvd_linesplit *ls, const char *data, size_t len,
                       hvd_line_cb cb, void *ctx);
/* The partial line when it follows a \r (*text, its length), else 0. */
size_t hvd_linesplit_preview(const struct hvd_linesplit *ls, const char **text);
/* End of stream: emits a pending partial line with HVD_TERM_NONE. */
void hvd_linesplit_finish(struct hvd_linesplit *ls, hvd_line_cb cb, void *ctx);

#endif
