/* Invariant checks for the fuzz targets: a broken one aborts the run. */
#ifndef HVD_FUZZ_CHECK_H
#define HVD_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/*
 * libFuzzer reports an abort as a crash and saves the input, so a broken
 * invariant is a finding like any sanitizer report.
 */
#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
