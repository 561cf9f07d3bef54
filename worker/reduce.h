/* Reduction kernels: element-wise ops for every dtype, half-precision
 * conversion, and the accumulate-wide-then-round-once scheme. */
#ifndef HVD_REDUCE_H
#define HVD_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "include/hvd.h"

/*
 * float16 and bfloat16 are accumulated in float32: partial results travel
 * and are combined in the accumulator type and rounded to the user's type
 * once, at the end. Every other dtype is its own accumulator type.
 */
hvd_dtype hvd__acc_dtype(hvd_dtype dt);

/* Converts n elements of dt at src to the accumulator type at acc. */
void hvd__widen(void *acc, const void *src, size_t n, hvd_dtype dt);

/*
 * acc[i] = acc[i] op src[i] for n elements of accumulator type acc_dt.
 * HVD_AVERAGE accumulates like HVD_SUM. Integers wrap modulo 2^bits (no
 * undefined behaviour for signed types). For floats, min and max return
 * NaN if either input is NaN.
 */
void hvd__reduce(void *acc, const void *src, size_t n, hvd_dtype acc_dt,
                 hvd_op op);

/*
 * Converts n accumulated elements back to dt (round to nearest even for
 * float16/bfloat16, NaN stays NaN, overflow gives infinity). For
 * HVD_AVERAGE first divides by size, once: float types in their
 * accumulator type, integers with C division (truncation towards zero).
 * dst and acc may be the same buffer.
 */
void hvd__finish(void *dst, const void *acc, size_t n, hvd_dtype dt, hvd_op op,
                 int size);

/* Multiplies n floating-point elements by f (float16/bfloat16 through
 * float32, rounded once); does nothing when f is 1. */
void hvd__scale(void *buf, size_t n, hvd_dtype dt, double f);

/* Scalar conversions, exposed for tests and for the staging paths. */
float hvd__f16_to_f32(uint16_t h);
uint16_t hvd__f32_to_f16(float f);
float hvd__bf16_to_f32(uint16_t h);
uint16_t hvd__f32_to_bf16(float f);

#endif
