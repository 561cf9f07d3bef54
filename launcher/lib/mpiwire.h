/* What hvd-mpi-rank tells horovodrun through mpirun's tagged output. */
#ifndef HR_MPIWIRE_H
#define HR_MPIWIRE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Under --mpi every rank runs inside hvd-mpi-rank, which captures the
 * rank's stdout and stderr and writes records, one per line, to its own
 * stdout. mpirun --tag-output then carries them to horovodrun, putting
 * "[jobid,rank]<stdout>:" before every piece it read, which may cut a
 * record anywhere. Records never hold '[' (nor '\n' or '\r'), so a '['
 * in mpirun's output always starts a tag, and the pieces of each rank's
 * records can be joined again. The records are:
 *
 *   h<local_rank> <host>   the rank's place, before it starts
 *   o<term><text>          one line of the rank's stdout
 *   e<term><text>          one line of its stderr
 *   x<kind> <code>         how it ended (enum hvd_exit_kind)
 *
 * term is an hvd_line_term digit; host and text have '%', '[', '\n' and
 * '\r' written as %XX.
 */

/* A growable byte buffer that records are appended to. */
struct hr_mpibuf {
    char *p;
    size_t len, cap;
};

void hr_mpibuf_close(struct hr_mpibuf *b);
/* Room for more bytes after b->len (len unchanged): 0, or HVD_ENOMEM with
 * the buffer unchanged. */
int hr_mpibuf_reserve(struct hr_mpibuf *b, size_t more);
/* Each returns 0 or HVD_ENOMEM (the buffer is unchanged then). */
int hr_mpiwire_hello(struct hr_mpibuf *b, int local_rank, const char *host);
int hr_mpiwire_line(struct hr_mpibuf *b, int stream, int term, const char *text,
                    size_t len);
int hr_mpiwire_exit(struct hr_mpibuf *b, int kind, int32_t code);

struct hr_mpirec {
    char type;  /* 'h', 'o', 'e' or 'x' */
    int stream; /* HVD_STREAM_STDOUT or HVD_STREAM_STDERR for 'o', 'e' */
    int term;
    int local_rank;
    int kind;
    int32_t code;
    const char *text; /* line text or host, decoded in place */
    size_t len;
};

/* Decodes one record (without its '\n') in place: 0, or HVD_EPROTO when
 * it is not a record. */
int hr_mpiwire_parse(char *rec, size_t len, struct hr_mpirec *out);

/*
 * Splits mpirun's stdout or stderr into runs of bytes, each from one
 * rank (the rank of the tag before it) or from mpirun itself (rank -1,
 * a line without a tag). A run ends at a '\n' (eol 1; the '\n' is not
 * passed) or where the next tag starts (eol 0).
 */
typedef void (*hr_mpitag_cb)(void *ctx, int rank, const char *data, size_t len,
                             int eol);

struct hr_mpitag {
    int state;    /* at a line start, in data, or in a tag */
    int rank;     /* whose bytes these are: a rank, or -1 for mpirun */
    int tag_from; /* the state the tag started in */
    char tag[48];
    size_t taglen;
};

void hr_mpitag_init(struct hr_mpitag *t);
void hr_mpitag_feed(struct hr_mpitag *t, const char *data, size_t len,
                    hr_mpitag_cb cb, void *ctx);
/* End of the stream: a tag cut short is passed on as data. */
void hr_mpitag_finish(struct hr_mpitag *t, hr_mpitag_cb cb, void *ctx);

#endif
