/* A detached job's kept output: the last lines of each rank, bounded. */
#ifndef HR_KEEP_H
#define HR_KEEP_H

#include <stddef.h>
#include <stdint.h>

/* Bytes kept per rank, and for horovodrun's own messages (each line
 * counts its text and a record's size). */
#define HR_KEEP_RANK_BYTES (256u * 1024)
/* A longer line is kept cut to this many bytes. */
#define HR_KEEP_LINE_MAX (HR_KEEP_RANK_BYTES / 4)
/* The rank number of horovodrun's own messages. */
#define HR_KEEP_SELF UINT32_MAX

struct hr_keep_rec;

/* One rank's lines, oldest first. */
struct hr_keep_list {
    struct hr_keep_rec *head, *tail;
    struct hr_keep_rec *last[2]; /* the last line of each stream */
    size_t bytes;
};

struct hr_keep {
    struct hr_keep_list *lists; /* size + 1: the ranks, then horovodrun */
    uint32_t size;
    uint64_t seq; /* lines added so far */
};

/* One line as hr_keep_each hands it over. */
struct hr_keep_line {
    uint32_t rank; /* or HR_KEEP_SELF */
    uint8_t stream, term;
    const char *text;
    size_t len;
};

/* 0 or HVD_ENOMEM. */
int hr_keep_init(struct hr_keep *k, uint32_t size);
/* Keeps lines of ranks up to size-1 from now on (an elastic job grew);
 * what is kept stays. 0 or HVD_ENOMEM. */
int hr_keep_grow(struct hr_keep *k, uint32_t size);
void hr_keep_close(struct hr_keep *k);
/*
 * Keeps one line (term an hvd_line_term; cut to HR_KEEP_LINE_MAX); the
 * rank's oldest lines go once
 * it holds more than HR_KEEP_RANK_BYTES. A progress update (\r) is
 * replaced by the rank's next line on that stream (the next update, or
 * the text a newline ends), unless that is the tail of a \r\n;
 * previews (HVD_TERM_PREVIEW) are not kept. Lines for ranks out of range
 * other than HR_KEEP_SELF are dropped. 0 or HVD_ENOMEM.
 */
int hr_keep_add(struct hr_keep *k, const struct hr_keep_line *l);
/*
 * Calls fn on the kept lines in the order they came: only rank's (and
 * horovodrun's own) when rank >= 0, and only the last tail of those when
 * tail >= 0. Stops at fn's first nonzero return, which it returns.
 */
int hr_keep_each(const struct hr_keep *k, int rank, long tail,
                 int (*fn)(void *arg, const struct hr_keep_line *l), void *arg);

#endif
