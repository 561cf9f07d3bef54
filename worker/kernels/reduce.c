/* Reduction kernels: element-wise ops, half-precision conversion, widening. */
#include "worker/kernels/reduce.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* Element sizes live here, next to the kernels that depend on them. */
HVD_EXPORT size_t hvd_dtype_size(hvd_dtype dt)
{
    switch (dt) {
    case HVD_UINT8:
    case HVD_INT8:
        return 1;
    case HVD_INT16:
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

/*
 * Every kernel loop runs in two parts: a main part over a multiple of
 * VBLOCK elements and a short tail. GCC's -O2 cost model ("very cheap")
 * vectorizes a loop only when no scalar epilogue is needed, which it can
 * prove for the main part; VBLOCK, 64, covers the widest vector of the
 * narrowest type (AVX-512, uint8). So the library's default -O2 build
 * (the project's buildtype is debugoptimized) vectorizes with no extra
 * flags, and stays baseline x86-64 (SSE2) code.
 */
#define VBLOCK ((size_t)64)

/* Runs body for i from 0 to n - 1, split as above. */
#define LOOP(n, body)                                                          \
    do {                                                                       \
        size_t m_ = (n) & ~(VBLOCK - 1);                                       \
        for (size_t i = 0; i < m_; i++) {                                      \
            body;                                                              \
        }                                                                      \
        for (size_t i = m_; i < (n); i++) {                                    \
            body;                                                              \
        }                                                                      \
    } while (0)

/*
 * The same for 64-bit elements, with the main part taking four elements
 * per step, written out (GCC does not unroll an inner loop before it
 * vectorizes): on SSE2, GCC's generic cost model keeps a two-lane loop
 * over single elements scalar, but vectorizes the group of four, as two
 * 16-byte vectors (with AVX2, one 32-byte vector). Smaller elements must
 * not be grouped: GCC then picks narrower vectors for them.
 */
#define LOOP4_ONE(k, body)                                                     \
    do {                                                                       \
        size_t i = (k);                                                        \
        body;                                                                  \
    } while (0)

#define LOOP4(n, body)                                                         \
    do {                                                                       \
        size_t m_ = (n) & ~(VBLOCK - 1);                                       \
        for (size_t k_ = 0; k_ < m_; k_ += 4) {                                \
            LOOP4_ONE(k_, body);                                               \
            LOOP4_ONE(k_ + 1, body);                                           \
            LOOP4_ONE(k_ + 2, body);                                           \
            LOOP4_ONE(k_ + 3, body);                                           \
        }                                                                      \
        for (size_t i = m_; i < (n); i++) {                                    \
            body;                                                              \
        }                                                                      \
    } while (0)

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
 * The conversions work on the bit patterns with integer arithmetic, plus,
 * for float16 subnormals, floating-point operations that are exact on
 * normal numbers (scaling by a power of two, truncation, a subtraction
 * with an exact difference), so that their results do not depend on the
 * floating-point environment: rounding mode, x87 excess precision,
 * flush-to-zero, denormals-are-zero. They are also branch-free, so that
 * the compiler vectorizes the loops over them: every case is computed and
 * the right one selected with a mask. (Written as ?: chains, GCC turns
 * them into branches, and does not if-convert a branch holding a
 * floating-point operation back, since it could trap.) Comparisons of a
 * magnitude, which is below 2^31, are made on int32_t, because SSE2 only
 * compares signed integers.
 */

/*
 * The conversions are forced inline: at -O2, GCC would otherwise call the
 * larger ones from the loops, which then do not vectorize.
 */
#define CONVERSION static inline __attribute__((always_inline))

/* All ones when c is true, else zero. */
static inline uint32_t mask(int c)
{
    return 0u - (uint32_t)c;
}

/* a where m is all ones, b where it is zero. */
static inline uint32_t pick(uint32_t m, uint32_t a, uint32_t b)
{
    return (a & m) | (b & ~m);
}

CONVERSION float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t exp = em & 0x7c00u;
    uint32_t mant = em & 0x3ffu;
    /* A normal number: move the fields and rebias from 15 to 127. */
    uint32_t r = (em << 13) + 0x38000000u;
    /*
     * Infinity or NaN: rebias once more to set all exponent bits. A NaN
     * keeps its payload and becomes quiet, as the hardware conversion
     * (vcvtph2ps) does: mant + 0x3ff has bit 10 set exactly when mant is
     * not zero.
     */
    uint32_t special = (r + 0x38000000u) | ((mant + 0x3ffu) & 0x400u) << 12;
    /*
     * Zero or a subnormal, mant * 2^-24: an exact product, and a normal
     * float32 unless zero.
     */
    uint32_t sub = f32_bits((float)(int32_t)mant * 0x1p-24f);

    r = pick(mask(exp == 0x7c00u), special, r);
    r = pick(mask(exp == 0), sub, r);
    return bits_f32(sign | r);
}

/*
 * A float16 subnormal from ax, the bits of a float32 magnitude below
 * 2^-14 (the caller uses the result from 2^-25 up): the value in units of
 * 2^-24, rounded to nearest even. y, the value scaled by 2^24, is exact
 * and below 1024; t, its integer part, and frac = y - t are exact too. Round up
 * when frac is above one half, or is one half and t is odd: frac is not
 * negative, so its bits order like integers, and adding t's low bit turns
 * "above" into "at least". Rounding up from 0x3ff gives 0x400, the encoding of
 * the smallest normal, as it should.
 */
CONVERSION uint32_t f16_subnormal(uint32_t ax)
{
    float y = bits_f32(ax) * 0x1p24f;
    int32_t t = (int32_t)y;
    uint32_t frac = f32_bits(y - (float)t);
    uint32_t odd = (uint32_t)t & 1u;

    return (uint32_t)t + ((int32_t)(frac + odd) > 0x3f000000);
}

CONVERSION uint32_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    int32_t sax = (int32_t)ax;
    uint32_t small = mask(sax < 0x38800000);
    /*
     * Normal float16 (at least 2^-14): rebias the exponent from 127 to
     * 15, then round the 13 dropped bits to nearest even. A carry out of
     * the mantissa correctly bumps the exponent. (For other inputs this
     * wraps around harmlessly; the result is not selected.)
     */
    uint32_t r = (ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13;
    /* NaN: keep the top of the payload and set the quiet bit, so that a
     * payload held only in the low bits cannot turn into infinity. */
    uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);

    /* Larger magnitudes pass 0 to f16_subnormal, so that its
     * floating-point operations never overflow nor meet a NaN. */
    r = pick(small, f16_subnormal(ax & small), r);
    /* Below 2^-25, half the smallest subnormal: rounds to zero. */
    r &= ~mask(sax < 0x33000000);
    /* 65520 is halfway between 65504 and 2^16; the even side is
     * infinity, so it and everything above overflow. */
    r = pick(mask(sax >= 0x477ff000), 0x7c00u, r);
    r = pick(mask(sax > 0x7f800000), nan, r);
    return sign | r;
}

CONVERSION float bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

CONVERSION uint32_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    /* Round to nearest even; overflow carries into infinity. */
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    /* NaN: set the quiet bit, since a NaN whose payload sits only in the
     * low 16 bits would otherwise truncate to infinity. */
    uint32_t nan = (x >> 16) | 0x0040u;

    return pick(mask((int32_t)(x & 0x7fffffffu) > 0x7f800000), nan, r);
}

float hvd__f16_to_f32(uint16_t h)
{
    return f16_to_f32(h);
}

uint16_t hvd__f32_to_f16(float f)
{
    return (uint16_t)f32_to_f16(f);
}

float hvd__bf16_to_f32(uint16_t h)
{
    return bf16_to_f32(h);
}

uint16_t hvd__f32_to_bf16(float f)
{
    return (uint16_t)f32_to_bf16(f);
}

/*
 * Whether the float16 loops use F16C: 0 not decided yet, 1 the portable
 * code, 2 F16C. Deciding twice at once is harmless (both threads find the
 * same answer); the compare-exchange only keeps a racing first decision
 * from undoing hvd__reduce_force_portable.
 */
static atomic_int f16c_state;

static int use_f16c(void)
{
    int s = atomic_load_explicit(&f16c_state, memory_order_relaxed);

    if (s == 0) {
        int undecided = 0;
        s = hvd__f16c_supported() ? 2 : 1;
        if (!atomic_compare_exchange_strong(&f16c_state, &undecided, s))
            s = undecided;
    }
    return s == 2;
}

void hvd__reduce_force_portable(int on)
{
    atomic_store(&f16c_state, on ? 1 : 0);
}

int hvd__reduce_uses_f16c(void)
{
    return use_f16c();
}

hvd_dtype hvd__acc_dtype(hvd_dtype dt)
{
    if (dt == HVD_FLOAT16 || dt == HVD_BFLOAT16)
        return HVD_FLOAT32;
    return dt;
}

/* The portable conversion loops, over buffers that do not overlap. */
static void f16_widen(float *restrict a, const uint16_t *restrict s, size_t n)
{
    LOOP(n, a[i] = f16_to_f32(s[i]));
}

static void bf16_widen(float *restrict a, const uint16_t *restrict s, size_t n)
{
    LOOP(n, a[i] = bf16_to_f32(s[i]));
}

/*
 * Narrowing, with the average's division by size done in float32 before
 * the single rounding. The loops convert a block into 32-bit lanes, then
 * copy the block truncated to 16 bits: in one loop, GCC would narrow every
 * intermediate value to 16 bits, with a shuffle sequence each on SSE2.
 * The blocks' constant trip counts also let -O2 vectorize them.
 */
#define NBLOCK ((size_t)256)

/* fn(d, a, n, size): d[i] = conv(expr), where expr reads v = a[i]. */
#define NARROW(fn, conv, expr)                                                 \
    static void fn(uint16_t *restrict d, const float *restrict a, size_t n,    \
                   float size)                                                 \
    {                                                                          \
        uint32_t t[NBLOCK];                                                    \
        size_t o = 0;                                                          \
                                                                               \
        (void)size;                                                            \
        for (; n - o >= NBLOCK; o += NBLOCK) {                                 \
            for (size_t i = 0; i < NBLOCK; i++) {                              \
                float v = a[o + i];                                            \
                t[i] = conv(expr);                                             \
            }                                                                  \
            for (size_t i = 0; i < NBLOCK; i++)                                \
                d[o + i] = (uint16_t)t[i];                                     \
        }                                                                      \
        for (; o < n; o++) {                                                   \
            float v = a[o];                                                    \
            d[o] = (uint16_t)conv(expr);                                       \
        }                                                                      \
    }

NARROW(f16_narrow, f32_to_f16, v)
NARROW(f16_narrow_div, f32_to_f16, v / size)
NARROW(bf16_narrow, f32_to_bf16, v)
NARROW(bf16_narrow_div, f32_to_bf16, v / size)

typedef void widen_fn(float *restrict a, const uint16_t *restrict s, size_t n);
typedef void narrow_fn(uint16_t *restrict d, const float *restrict a, size_t n,
                       float size);

/* Overlapping buffers go through a bounce buffer of this many elements. */
#define BOUNCE ((size_t)1024)

int hvd__overlap(const void *p, size_t plen, const void *q, size_t qlen)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;

    return plen > 0 && qlen > 0 && a < b + qlen && b < a + plen;
}

/*
 * The loops take restrict pointers, so overlapping buffers (widening in
 * place, acc == src) are converted a block at a time through a copy of
 * the source block. Walking backwards keeps that correct: block [o, o+k)
 * is written at bytes [4o, 4o+4k), above every source element j < o that
 * is still to be read (so is any overlap with acc above src).
 */
static void widen_with(widen_fn *fn, float *a, const uint16_t *s, size_t n)
{
    uint16_t tmp[BOUNCE];

    if (!hvd__overlap(a, n * 4, s, n * 2)) {
        fn(a, s, n);
        return;
    }
    for (size_t end = n; end > 0;) {
        size_t k = end < BOUNCE ? end : BOUNCE;
        end -= k;
        memcpy(tmp, s + end, k * sizeof(*s));
        fn(a + end, tmp, k);
    }
}

/*
 * Narrowing in place is the mirror image, walking forwards: block
 * [o, o+k) is written at bytes [2o, 2o+2k), below every float32 j >= o+k
 * that is still to be read (so is any overlap with d below a).
 */
static void narrow_with(narrow_fn *fn, uint16_t *d, const float *a, size_t n,
                        float size)
{
    float tmp[BOUNCE];

    if (!hvd__overlap(d, n * 2, a, n * 4)) {
        fn(d, a, n, size);
        return;
    }
    for (size_t o = 0; o < n;) {
        size_t k = n - o < BOUNCE ? n - o : BOUNCE;
        memcpy(tmp, a + o, k * sizeof(*a));
        fn(d + o, tmp, k, size);
        o += k;
    }
}

void hvd__widen(void *acc, const void *src, size_t n, hvd_dtype dt)
{
    if (n == 0)
        return;
    switch (dt) {
    case HVD_FLOAT16:
#if HVD_REDUCE_X86
        if (use_f16c()) {
            widen_with(hvd__f16c_widen, acc, src, n);
            break;
        }
#endif
        widen_with(f16_widen, acc, src, n);
        break;
    case HVD_BFLOAT16:
        widen_with(bf16_widen, acc, src, n);
        break;
    default:
        if (acc != src)
            memmove(acc, src, n * hvd_dtype_size(dt));
        break;
    }
}

/*
 * KERNEL defines fn(a, b, n): a[i] = expr, where expr reads x = a[i] and
 * y = b[i], looping with L (LOOP, or LOOP4 for 64-bit types). One
 * such loop per dtype and op, over restrict-qualified pointers and with a
 * branch-free body, so that the compiler vectorizes it.
 */
#define KERNEL(fn, T, L, expr)                                                 \
    static void fn(T *restrict a, const T *restrict b, size_t n)               \
    {                                                                          \
        L(n, T x = a[i]; T y = b[i]; a[i] = (expr));                           \
    }                                                                          \
    static void fn##3(T *restrict d, const T *restrict a, const T *restrict b, \
                      size_t n)                                                \
    {                                                                          \
        L(n, T x = a[i]; T y = b[i]; d[i] = (expr));                           \
    }

/*
 * Integers go through the unsigned type U of the same width: unsigned
 * arithmetic wraps by definition, and converting back to a signed type is
 * the modulo conversion on every compiler we support (GCC and Clang
 * define it so).
 */
#define INT_KERNELS(name, T, U, L)                                             \
    KERNEL(name##_sum, T, L, (T)(U)((U)x + (U)y))                              \
    KERNEL(name##_prod, T, L, (T)(U)((U)x * (U)y))                             \
    KERNEL(name##_min, T, L, y < x ? y : x)                                    \
    KERNEL(name##_max, T, L, y > x ? y : x)

/*
 * For float min and max, x != x is true only for NaN: keep x when it wins
 * or is NaN, otherwise take y, which is then either the winner or NaN. The
 * bitwise | keeps the body branch-free; it compiles to two compares, an or
 * and a blend (or and/andnot/or on SSE2).
 */
#define FLOAT_KERNELS(name, T, L)                                              \
    KERNEL(name##_sum, T, L, x + y)                                            \
    KERNEL(name##_prod, T, L, (x * y))                                         \
    KERNEL(name##_min, T, L, ((x < y) | (x != x)) ? x : y)                     \
    KERNEL(name##_max, T, L, ((x > y) | (x != x)) ? x : y)

INT_KERNELS(u8, uint8_t, uint8_t, LOOP)
INT_KERNELS(i8, int8_t, uint8_t, LOOP)
INT_KERNELS(i16, int16_t, uint16_t, LOOP)
INT_KERNELS(i32, int32_t, uint32_t, LOOP)
INT_KERNELS(i64, int64_t, uint64_t, LOOP4)
FLOAT_KERNELS(f32, float, LOOP)
FLOAT_KERNELS(f64, double, LOOP4)

/* Calls the kernel of type name and op with args; sfx is empty for the
 * two-operand kernels and 3 for the three-operand ones. */
#define DISPATCH_OP(name, sfx, ...)                                            \
    do {                                                                       \
        switch (op) {                                                          \
        case HVD_SUM:                                                          \
        case HVD_AVERAGE:                                                      \
            name##_sum##sfx(__VA_ARGS__);                                      \
            break;                                                             \
        case HVD_PRODUCT:                                                      \
            name##_prod##sfx(__VA_ARGS__);                                     \
            break;                                                             \
        case HVD_MIN:                                                          \
            name##_min##sfx(__VA_ARGS__);                                      \
            break;                                                             \
        case HVD_MAX:                                                          \
            name##_max##sfx(__VA_ARGS__);                                      \
            break;                                                             \
        case HVD_ADASUM: /* exec.c's own, never an element-wise kernel */      \
            break;                                                             \
        }                                                                      \
    } while (0)

#define DISPATCH_TYPE(sfx, ...)                                                \
    do {                                                                       \
        switch (acc_dt) {                                                      \
        case HVD_UINT8:                                                        \
            DISPATCH_OP(u8, sfx, __VA_ARGS__);                                 \
            break;                                                             \
        case HVD_INT8:                                                         \
            DISPATCH_OP(i8, sfx, __VA_ARGS__);                                 \
            break;                                                             \
        case HVD_INT16:                                                        \
            DISPATCH_OP(i16, sfx, __VA_ARGS__);                                \
            break;                                                             \
        case HVD_INT32:                                                        \
            DISPATCH_OP(i32, sfx, __VA_ARGS__);                                \
            break;                                                             \
        case HVD_INT64:                                                        \
            DISPATCH_OP(i64, sfx, __VA_ARGS__);                                \
            break;                                                             \
        case HVD_FLOAT32:                                                      \
            DISPATCH_OP(f32, sfx, __VA_ARGS__);                                \
            break;                                                             \
        case HVD_FLOAT64:                                                      \
            DISPATCH_OP(f64, sfx, __VA_ARGS__);                                \
            break;                                                             \
        case HVD_FLOAT16:                                                      \
        case HVD_BFLOAT16:                                                     \
            /* Never an accumulator type: a caller bug; do nothing. */         \
            break;                                                             \
        }                                                                      \
    } while (0)

void hvd__reduce(void *acc, const void *src, size_t n, hvd_dtype acc_dt,
                 hvd_op op)
{
    if (n > 0)
        DISPATCH_TYPE(, acc, src, n);
}

void hvd__reduce3(void *dst, const void *a, const void *b, size_t n,
                  hvd_dtype acc_dt, hvd_op op)
{
    if (n > 0)
        DISPATCH_TYPE(3, dst, a, b, n);
}

/*
 * Averaging divides each element of a by size in place, truncating
 * towards zero for integers as C division does. There is no vector
 * integer division, so the narrow integers divide in float and int32 in
 * double, which gives the same quotient: an integer quotient is exact,
 * and otherwise the true quotient q is at least 1/size away from the
 * nearest integer while the rounding error is at most |q| * 2^-23 (float,
 * |a| <= 2^15) or |q| * 2^-52 (double, |a| <= 2^31), both well below
 * 1/size, so truncation cannot cross an integer. When size exceeds 2^24
 * (float) it may round, but then |q| < 1 and both give 0. int64 has
 * neither an exact floating type nor vector division, and stays scalar.
 * The quotient is no larger in magnitude than the element, so it fits
 * back into T, and since size > 0 there is no INT_MIN / -1.
 */
#define AVERAGE(name, T, F)                                                    \
    static void name##_average(T *restrict a, size_t n, int size)              \
    {                                                                          \
        F s = (F)size;                                                         \
        LOOP(n, a[i] = (T)((F)a[i] / s));                                      \
    }

AVERAGE(u8, uint8_t, float)
AVERAGE(i8, int8_t, float)
AVERAGE(i16, int16_t, float)
AVERAGE(i32, int32_t, double)
AVERAGE(f32, float, float)
AVERAGE(f64, double, double)

static void i64_average(int64_t *a, size_t n, int size)
{
    for (size_t i = 0; i < n; i++)
        a[i] = a[i] / (int64_t)size;
}

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
#if HVD_REDUCE_X86
        if (use_f16c()) {
            /* It skips a division by 1, which cannot change a result. */
            narrow_with(hvd__f16c_narrow, dst, acc, n,
                        average ? (float)size : 1.0f);
            return;
        }
#endif
        narrow_with(average ? f16_narrow_div : f16_narrow, dst, acc, n,
                    (float)size);
        return;
    case HVD_BFLOAT16:
        narrow_with(average ? bf16_narrow_div : bf16_narrow, dst, acc, n,
                    (float)size);
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
    case HVD_INT16:
        i16_average(dst, n, size);
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

static void f32_scale(float *restrict p, size_t n, float f)
{
    LOOP(n, p[i] *= f);
}

static void f64_scale(double *restrict p, size_t n, double f)
{
    LOOP4(n, p[i] *= f);
}

/* Integers are scaled in float64 and truncated toward zero, as Horovod's
 * CPU path does (a C cast of the product). */
#define INT_SCALE(name, T)                                                     \
    static void name##_scale(T *restrict p, size_t n, double f)                \
    {                                                                          \
        LOOP4(n, p[i] = (T)((double)p[i] * f));                                \
    }

INT_SCALE(u8, uint8_t)
INT_SCALE(i8, int8_t)
INT_SCALE(i16, int16_t)
INT_SCALE(i32, int32_t)
INT_SCALE(i64, int64_t)

/*
 * Half types go through float32, a block at a time, and are rounded once:
 * widened (exactly), scaled in float32, narrowed.
 */
static void half_scale(widen_fn *widen, narrow_fn *narrow, uint16_t *p,
                       size_t n, float f)
{
    float t[NBLOCK];

    for (size_t o = 0; o < n;) {
        size_t k = n - o < NBLOCK ? n - o : NBLOCK;
        widen(t, p + o, k);
        f32_scale(t, k, f);
        narrow(p + o, t, k, 1.0f);
        o += k;
    }
}

void hvd__scale(void *buf, size_t n, hvd_dtype dt, double f)
{
    if (f == 1 || n == 0)
        return;
    switch (dt) {
    case HVD_FLOAT32:
        f32_scale(buf, n, (float)f);
        break;
    case HVD_FLOAT64:
        f64_scale(buf, n, f);
        break;
    case HVD_FLOAT16:
#if HVD_REDUCE_X86
        if (use_f16c()) {
            half_scale(hvd__f16c_widen, hvd__f16c_narrow, buf, n, (float)f);
            break;
        }
#endif
        half_scale(f16_widen, f16_narrow, buf, n, (float)f);
        break;
    case HVD_BFLOAT16:
        half_scale(bf16_widen, bf16_narrow, buf, n, (float)f);
        break;
    case HVD_UINT8:
        u8_scale(buf, n, f);
        break;
    case HVD_INT8:
        i8_scale(buf, n, f);
        break;
    case HVD_INT16:
        i16_scale(buf, n, f);
        break;
    case HVD_INT32:
        i32_scale(buf, n, f);
        break;
    case HVD_INT64:
        i64_scale(buf, n, f);
        break;
    }
}

/* One element of dt equal to v (finite and exact in every float dtype:
 * 0, 1, or the infinities for the float identities). */
static void put_float(void *p, hvd_dtype dt, double v)
{
    float f = (float)v;
    uint16_t h;
    switch (dt) {
    case HVD_FLOAT16:
        h = hvd__f32_to_f16(f);
        memcpy(p, &h, 2);
        break;
    case HVD_BFLOAT16:
        h = hvd__f32_to_bf16(f);
        memcpy(p, &h, 2);
        break;
    case HVD_FLOAT32:
        memcpy(p, &f, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

void hvd__identity(void *buf, size_t n, hvd_dtype dt, hvd_op op)
{
    size_t es = hvd_dtype_size(dt);
    uint8_t one[8] = {0};
    int is_float = dt == HVD_FLOAT16 || dt == HVD_BFLOAT16 ||
                   dt == HVD_FLOAT32 || dt == HVD_FLOAT64;
    if (es == 0 || n == 0)
        return;
    if (op != HVD_MIN && op != HVD_MAX && op != HVD_PRODUCT) {
        memset(buf, 0, n * es);
        return;
    }
    if (is_float)
        put_float(one, dt,
                  op == HVD_PRODUCT ? 1.0
                  : op == HVD_MIN   ? INFINITY
                                    : -INFINITY);
    else if (op == HVD_PRODUCT)
        one[0] = 1; /* little-endian, as every reduction here */
    else if (dt == HVD_UINT8)
        one[0] = op == HVD_MIN ? 0xff : 0;
    else {
        /* Two's complement: the largest value is 0x7f.. ff, the least
         * 0x80 00.., both little-endian. */
        memset(one, op == HVD_MIN ? 0xff : 0, es);
        one[es - 1] = op == HVD_MIN ? 0x7f : 0x80;
    }
    for (size_t i = 0; i < n; i++)
        memcpy((uint8_t *)buf + i * es, one, es);
}
