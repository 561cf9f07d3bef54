/* Reduction kernels: element-wise ops, half-precision conversion, widening. */
#include "reduce.h"

#include <string.h>

/* Element sizes live here, next to the kernels that depend on them. */
HVD_EXPORT size_t hvd_dtype_size(hvd_dtype dt)
{
    switch (dt) {
    case HVD_UINT8:
    case HVD_INT8:
        return 1;
    case HVD_FLOAT16:
    case HVD_BFLOAT16:
        return 2;
    case HVD_INT32:
    case HVD_FLOAT32:
        return 4;
    case HVD_INT64:
    case HVD_FLOAT64:
        return 8;
    }
    return 0;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * The conversions work on the bit patterns with integer arithmetic only, so
 * that their results do not depend on the floating-point environment
 * (rounding mode, x87 excess precision, flush-to-zero).
 */
static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) {
        /*
         * Infinity keeps its zero mantissa. A NaN keeps its payload and
         * becomes quiet, as the hardware conversion (vcvtph2ps) does.
         */
        uint32_t quiet = mant ? 0x400000u : 0;
        return bits_f32(sign | 0x7f800000u | quiet | (mant << 13));
    }
    if (exp == 0) {
        if (mant == 0)
            return bits_f32(sign);
        /*
         * A subnormal is mant * 2^-24; every one of them is a normal
         * float32, so shift the leading one into the implicit bit.
         */
        exp = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            exp--;
        }
        return bits_f32(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) {
        /* NaN: keep the top of the payload and set the quiet bit, so that
         * a payload held only in the low bits cannot turn into infinity. */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) {
        /* 65520 is halfway between 65504 and 2^16; the even side is
         * infinity, so it and everything above overflow. */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) {
        /*
         * Normal float16 (at least 2^-14): rebias the exponent from 127 to
         * 15, then round the 13 dropped bits to nearest even. A carry out
         * of the mantissa correctly bumps the exponent.
         */
        ax -= 0x38000000u;
        ax += 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | (ax >> 13));
    }
    if (ax < 0x33000000u) {
        /* Below 2^-25, half the smallest subnormal: rounds to zero. */
        return (uint16_t)sign;
    }
    /*
     * Subnormal float16: the result is the value in units of 2^-24, that
     * is the 24-bit significand shifted right by 14 to 24 places, rounded
     * to nearest even. Rounding up from 0x3ff gives 0x400, which is the
     * encoding of the smallest normal, as it should be.
     */
    uint32_t shift = 126 - (ax >> 23);
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

static inline float bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);

    if ((x & 0x7fffffffu) > 0x7f800000u) {
        /* Set the quiet bit: a NaN whose payload sits only in the low 16
         * bits would otherwise truncate to infinity. */
        return (uint16_t)((x >> 16) | 0x0040u);
    }
    /* Round to nearest even; overflow carries into infinity. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float hvd__f16_to_f32(uint16_t h)
{
    return f16_to_f32(h);
}

uint16_t hvd__f32_to_f16(float f)
{
    return f32_to_f16(f);
}

float hvd__bf16_to_f32(uint16_t h)
{
    return bf16_to_f32(h);
}

uint16_t hvd__f32_to_bf16(float f)
{
    return f32_to_bf16(f);
}

hvd_dtype hvd__acc_dtype(hvd_dtype dt)
{
    if (dt == HVD_FLOAT16 || dt == HVD_BFLOAT16)
        return HVD_FLOAT32;
    return dt;
}

void hvd__widen(void *acc, const void *src, size_t n, hvd_dtype dt)
{
    float *a = acc;
    const uint16_t *s = src;

    if (n == 0)
        return;
    /*
     * Walk backwards so that widening in place (acc == src) works: element
     * i is written at bytes [4i, 4i+4), above every source element j < i
     * that is still to be read (so is any overlap with acc above src).
     */
    switch (dt) {
    case HVD_FLOAT16:
        for (size_t i = n; i-- > 0;)
            a[i] = f16_to_f32(s[i]);
        break;
    case HVD_BFLOAT16:
        for (size_t i = n; i-- > 0;)
            a[i] = bf16_to_f32(s[i]);
        break;
    default:
        if (acc != src)
            memmove(acc, src, n * hvd_dtype_size(dt));
        break;
    }
}

/*
 * Every kernel loop runs in two parts: a main part over a multiple of
 * VBLOCK elements and a short tail. GCC's -O2 cost model ("very cheap")
 * vectorizes a loop only when no scalar epilogue is needed, which it can
 * prove for the main part; VBLOCK, 64, covers the widest vector of the
 * narrowest type (AVX-512, uint8). On baseline x86-64 (SSE2) the cost
 * model still keeps some two-lane (64-bit) loops scalar; with AVX2 all
 * of them vectorize.
 */
#define VBLOCK ((size_t)64)

/*
 * KERNEL defines fn(a, b, n): a[i] = expr, where expr reads x = a[i] and
 * y = b[i]. One such loop per dtype and op, over restrict-qualified
 * pointers and with a branch-free body, so that the compiler vectorizes
 * it.
 */
#define KERNEL(fn, T, expr)                                                    \
    static void fn(T *restrict a, const T *restrict b, size_t n)               \
    {                                                                          \
        size_t i = 0;                                                          \
        size_t m = n & ~(VBLOCK - 1);                                          \
        for (; i < m; i++) {                                                   \
            T x = a[i], y = b[i];                                              \
            a[i] = (expr);                                                     \
        }                                                                      \
        for (; i < n; i++) {                                                   \
            T x = a[i], y = b[i];                                              \
            a[i] = (expr);                                                     \
        }                                                                      \
    }

/*
 * Integers go through the unsigned type U of the same width: unsigned
 * arithmetic wraps by definition, and converting back to a signed type is
 * the modulo conversion on every compiler we support (GCC and Clang
 * define it so).
 */
#define INT_KERNELS(name, T, U)                                                \
    KERNEL(name##_sum, T, (T)(U)((U)x + (U)y))                                 \
    KERNEL(name##_prod, T, (T)(U)((U)x * (U)y))                                \
    KERNEL(name##_min, T, y < x ? y : x)                                       \
    KERNEL(name##_max, T, y > x ? y : x)

/*
 * For float min and max, x != x is true only for NaN: keep x when it wins
 * or is NaN, otherwise take y, which is then either the winner or NaN. The
 * bitwise | keeps the body branch-free.
 */
#define FLOAT_KERNELS(name, T)                                                 \
    KERNEL(name##_sum, T, x + y)                                               \
    KERNEL(name##_prod, T, (x * y))                                            \
    KERNEL(name##_min, T, ((x < y) | (x != x)) ? x : y)                        \
    KERNEL(name##_max, T, ((x > y) | (x != x)) ? x : y)

INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)

#define DISPATCH_OP(name)                                                      \
    do {                                                                       \
        switch (op) {                                                          \
        case HVD_SUM:                                                          \
        case HVD_AVERAGE:                                                      \
            name##_sum(acc, src, n);                                           \
            break;                                                             \
        case HVD_PRODUCT:                                                      \
            name##_prod(acc, src, n);                                          \
            break;                                                             \
        case HVD_MIN:                                                          \
            name##_min(acc, src, n);                                           \
            break;                                                             \
        case HVD_MAX:                                                          \
            name##_max(acc, src, n);                                           \
            break;                                                             \
        }                                                                      \
    } while (0)

void hvd__reduce(void *acc, const void *src, size_t n, hvd_dtype acc_dt,
                 hvd_op op)
{
    if (n == 0)
        return;
    switch (acc_dt) {
    case HVD_UINT8:
        DISPATCH_OP(u8);
        break;
    case HVD_INT8:
        DISPATCH_OP(i8);
        break;
    case HVD_INT32:
        DISPATCH_OP(i32);
        break;
    case HVD_INT64:
        DISPATCH_OP(i64);
        break;
    case HVD_FLOAT32:
        DISPATCH_OP(f32);
        break;
    case HVD_FLOAT64:
        DISPATCH_OP(f64);
        break;
    case HVD_FLOAT16:
    case HVD_BFLOAT16:
        /* Never an accumulator type: a caller bug, so leave acc alone. */
        break;
    }
}

/*
 * Averaging divides each element of a by size in place. Integers divide
 * in W, a type that holds both the element and size; the quotient is no
 * larger in magnitude than the element, so it fits back into T, and since
 * size > 0 there is no INT_MIN / -1.
 */
#define INT_AVERAGE(name, T, W)                                                \
    static void name##_average(T *a, size_t n, int size)                       \
    {                                                                          \
        for (size_t i = 0; i < n; i++)                                         \
            a[i] = (T)((W)a[i] / (W)size);                                     \
    }

#define FLOAT_AVERAGE(name, T)                                                 \
    static void name##_average(T *a, size_t n, int size)                       \
    {                                                                          \
        T s = (T)size;                                                         \
        size_t i = 0;                                                          \
        size_t m = n & ~(VBLOCK - 1);                                          \
        for (; i < m; i++)                                                     \
            a[i] = a[i] / s;                                                   \
        for (; i < n; i++)                                                     \
            a[i] = a[i] / s;                                                   \
    }

INT_AVERAGE(u8, uint8_t, int)
INT_AVERAGE(i8, int8_t, int)
INT_AVERAGE(i32, int32_t, int)
INT_AVERAGE(i64, int64_t, int64_t)
FLOAT_AVERAGE(f32, float)
FLOAT_AVERAGE(f64, double)

/*
 * Narrowing from float32 to a 16-bit type, with the average's division
 * done in float32 before the single rounding. Walking forwards is safe in
 * place: element i is written at bytes [2i, 2i+2), below every float32
 * j > i that is still to be read (so is any overlap with d below a).
 */
#define NARROW(name, conv)                                                     \
    static void name##_narrow(uint16_t *d, const float *a, size_t n,           \
                              int average, int size)                           \
    {                                                                          \
        if (average) {                                                         \
            float s = (float)size;                                             \
            for (size_t i = 0; i < n; i++)                                     \
                d[i] = conv(a[i] / s);                                         \
        } else {                                                               \
            for (size_t i = 0; i < n; i++)                                     \
                d[i] = conv(a[i]);                                             \
        }                                                                      \
    }

NARROW(f16, f32_to_f16)
NARROW(bf16, f32_to_bf16)

void hvd__finish(void *dst, const void *acc, size_t n, hvd_dtype dt, hvd_op op,
                 int size)
{
    int average = op == HVD_AVERAGE;

    if (n == 0)
        return;
    /* size is a job size and always positive; never divide by zero. */
    if (size < 1)
        size = 1;
    switch (dt) {
    case HVD_FLOAT16:
        f16_narrow(dst, acc, n, average, size);
        return;
    case HVD_BFLOAT16:
        bf16_narrow(dst, acc, n, average, size);
        return;
    default:
        break;
    }
    /*
     * Same-size types: copy first, then average in place, so that one
     * kernel serves both dst == acc and separate buffers.
     */
    if (dst != acc)
        memmove(dst, acc, n * hvd_dtype_size(dt));
    if (!average)
        return;
    switch (dt) {
    case HVD_UINT8:
        u8_average(dst, n, size);
        break;
    case HVD_INT8:
        i8_average(dst, n, size);
        break;
    case HVD_INT32:
        i32_average(dst, n, size);
        break;
    case HVD_INT64:
        i64_average(dst, n, size);
        break;
    case HVD_FLOAT32:
        f32_average(dst, n, size);
        break;
    case HVD_FLOAT64:
        f64_average(dst, n, size);
        break;
    case HVD_FLOAT16:
    case HVD_BFLOAT16:
        break;
    }
}

void hvd__scale(void *buf, size_t n, hvd_dtype dt, double f)
{
    if (f == 1)
        return;
    switch (dt) {
    case HVD_FLOAT32: {
        float *p = buf, ff = (float)f;
        for (size_t i = 0; i < n; i++)
            p[i] *= ff;
        break;
    }
    case HVD_FLOAT64: {
        double *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] *= f;
        break;
    }
    case HVD_FLOAT16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] = hvd__f32_to_f16(hvd__f16_to_f32(p[i]) * (float)f);
        break;
    }
    case HVD_BFLOAT16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] = hvd__f32_to_bf16(hvd__bf16_to_f32(p[i]) * (float)f);
        break;
    }
    default:
        break;
    }
}
