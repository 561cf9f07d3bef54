/* Reduction kernels: element-wise ops for every dtype, half-precision
 * conversion, and the accumulate-wide-then-round-once scheme. */
#ifndef HVD_REDUCE_H
#define HVD_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

/*
 * float16 and bfloat16 are accumulated in float32: partial results travel
 * and are combined in the accumulator type and rounded to the user's type
 * once, at the end. Every other dtype is its own accumulator type.
 */
hvd_dtype hvd__acc_dtype(hvd_dtype dt);

/* Converts n elements of dt at src to the accumulator type at acc; acc may
 * be src itself, or overlap src starting above it. */
void hvd__widen(void *acc, const void *src, size_t n, hvd_dtype dt);

/*
 * acc[i] = acc[i] op src[i] for n elements of accumulator type acc_dt;
 * acc and src must not overlap. HVD_AVERAGE accumulates like HVD_SUM.
 * Integers wrap modulo 2^bits (no undefined behaviour for signed types).
 * For floats, min and max return NaN if either input is NaN.
 */
void hvd__reduce(void *acc, const void *src, size_t n, hvd_dtype acc_dt,
                 hvd_op op);
/* dst[i] = a[i] op b[i], as hvd__reduce computes it; none may overlap.
 * Saves a pass over dst where the first two inputs are folded. */
void hvd__reduce3(void *dst, const void *a, const void *b, size_t n,
                  hvd_dtype acc_dt, hvd_op op);

/*
 * Converts n accumulated elements back to dt (round to nearest even for
 * float16/bfloat16, NaN stays NaN, overflow gives infinity). For
 * HVD_AVERAGE first divides by size, once: float types in their
 * accumulator type, integers with C division (truncation towards zero).
 * dst and acc may be the same buffer.
 */
void hvd__finish(void *dst, const void *acc, size_t n, hvd_dtype dt, hvd_op op,
                 int size);

/* Multiplies n elements by f: float16/bfloat16 through float32, rounded
 * once; integers in float64, truncated toward zero. Does nothing when f
 * is 1. */
void hvd__scale(void *buf, size_t n, hvd_dtype dt, double f);

/* Fills n elements of dt with op's identity: 0 for sums and averages, 1
 * for products, the largest value (+inf for floats) for min, the least
 * (-inf) for max. What a rank with nothing to add contributes. */
void hvd__identity(void *buf, size_t n, hvd_dtype dt, hvd_op op);

/* Whether [p, p + plen) and [q, q + qlen) share a byte (never when
 * either is empty). */
int hvd__overlap(const void *p, size_t plen, const void *q, size_t qlen);

/* Scalar conversions, exposed for tests and for the staging paths. */
float hvd__f16_to_f32(uint16_t h);
uint16_t hvd__f32_to_f16(float f);
float hvd__bf16_to_f32(uint16_t h);
uint16_t hvd__f32_to_bf16(float f);

/*
 * float16 loops use the F16C instructions where the CPU has them (decided
 * once, at the first call) and give the same bits as the portable code for
 * every input. Tests switch to the portable code with on = 1 and back to
 * the automatic choice with on = 0; hvd__reduce_uses_f16c says which one
 * the loops take now.
 */
void hvd__reduce_force_portable(int on);
int hvd__reduce_uses_f16c(void);

/* The F16C kernels, in reduce_f16c.c, compiled for x86 only. */
#if defined(__x86_64__) || defined(__i386__)
#define HVD_REDUCE_X86 1
#else
#define HVD_REDUCE_X86 0
#endif

/* Whether this CPU (and its OS) can run the F16C kernels; 0 off x86. */
int hvd__f16c_supported(void);

/*
 * Like the portable loops: buffers do not overlap; narrowing divides by
 * size in float32 before the rounding, unless size is 1 (the quotient
 * would round to the same float16). Call only if hvd__f16c_supported().
 */
void hvd__f16c_widen(float *restrict a, const uint16_t *restrict s, size_t n);
void hvd__f16c_narrow(uint16_t *restrict d, const float *restrict a, size_t n,
                      float size);

#endif
