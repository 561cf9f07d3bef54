/* Rank output: prefixed lines on the terminal, raw per-rank files. */
#ifndef HR_OUTPUT_H
#define HR_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/plan.h"

struct hr_output {
    int out_fd; /* horovodrun's stdout: rank stdout lines */
    int err_fd; /* horovodrun's stderr: rank stderr lines */
    int broken; /* the terminal side stopped accepting writes */
    const struct hvd_plan *plan;
    int (*files)[2]; /* per rank stdout, stderr; NULL without a dir */
};

/*
 * Opens DIR/rank.N/stdout and stderr for every rank when dir is non-NULL
 * (N zero-padded to the width of size-1). On failure writes one line to
 * err and returns a negative code.
 */
int hr_output_init(struct hr_output *o, const struct hvd_plan *p,
                   const char *dir, char *err, size_t errlen);
void hr_output_close(struct hr_output *o);
/*
 * Writes one line: "[rank,local_rank]<stdout>:text\n" to the terminal in
 * one write, and text with its original terminator to the rank's file.
 * stream is HVD_STREAM_STDOUT or HVD_STREAM_STDERR; term an hvd_line_term.
 */
void hr_output_line(struct hr_output *o, uint32_t rank, int stream, int term,
                    const char *text, size_t len);

#endif
