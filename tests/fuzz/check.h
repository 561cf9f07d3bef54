/* What the fuzz targets share: invariant checks (a broken one aborts the
 * run), the job secret and nonce of sealed inputs, a small PRNG. */
#ifndef HVD_FUZZ_CHECK_H
#define HVD_FUZZ_CHECK_H

#include <stdint.h>
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

/* The job secret and nonce that fuzz_rdvproto seals with and gen_corpus
 * seals its seeds with, so that sealed seeds pass the MAC check. */
#define FUZZ_SECRET "fuzz-secret-0123456789abcdefghi"
#define FUZZ_NONCE "fuzz-nonce-0123456789abcdefghijk"

/* xorshift32: chunk sizes drawn from an input's own bytes. */
static inline uint32_t fuzz_next_rand(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

#endif
