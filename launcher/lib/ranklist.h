/* Rank lists as --output-ranks takes them: "0", "0,4-7". */
#ifndef HR_RANKLIST_H
#define HR_RANKLIST_H

#include <stddef.h>

/*
 * Parses a comma-separated list of ranks and ranges (a-b, a <= b). With
 * size > 0 every rank must be below it, and show (size bytes) gets 1 for
 * each listed rank and 0 for the others; with size 0 only the syntax is
 * checked (show may be NULL). 0, or -1 with one line in err.
 */
int hr_ranklist_parse(const char *list, int size, unsigned char *show,
                      char *err, size_t errlen);

#endif
