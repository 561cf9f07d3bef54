/* Unit tests for worker/kernels/reduce.c: reduction kernels and half
 * conversion. */
#include <criterion/criterion.h>

#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kernels/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#else
#define HAVE_MXCSR 0
#endif

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const hvd_dtype all_dtypes[] = {
    HVD_UINT8,    HVD_INT8,    HVD_INT32,   HVD_INT64, HVD_FLOAT16,
    HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64, HVD_INT16,
};
static const hvd_op all_ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX,
                                 HVD_PRODUCT};

static uint32_t fbits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bitsf(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint64_t dbits(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

/* A fixed-seed xorshift generator: the same inputs on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int f16_is_nan(uint16_t h)
{
    return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

static int bf16_is_nan(uint16_t h)
{
    return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

/*
 * Reference conversions, written from the definitions rather than with bit
 * tricks, so that they share no code or method with the module.
 */
static double ref_f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    double sign = (h & 0x8000u) ? -1.0 : 1.0;

    if (exp == 0x1f)
        return mant ? NAN : sign * INFINITY;
    if (exp == 0)
        return sign * ldexp(mant, -24);
    return sign * ldexp(1024 + mant, exp - 25);
}

/* Picks lo or hi (adjacent encodings) for a, ties to the even encoding. */
static uint16_t nearest(double a, uint16_t lo, double vlo, double vhi)
{
    double dlo = a - vlo, dhi = vhi - a;

    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return (uint16_t)(lo + 1);
    return (lo & 1u) ? (uint16_t)(lo + 1) : lo;
}

/* f32 -> f16 by binary search over the positive finite encodings. */
static uint16_t ref_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    double a = fabs((double)f);
    unsigned lo = 0, hi = 0x7bff;

    if (isnan(f))
        return sign | 0x7e00u;
    if (isinf(f))
        return sign | 0x7c00u;
    /* Largest encoding whose value is <= a. */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_f16_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    /* Above 65504 the next step up is 2^16, which encodes as infinity. */
    double vhi = lo == 0x7bff ? 65536.0 : ref_f16_value((uint16_t)(lo + 1));
    return sign | nearest(a, (uint16_t)lo, ref_f16_value((uint16_t)lo), vhi);
}

static double ref_bf16_value(uint16_t h)
{
    return (double)bitsf((uint32_t)h << 16);
}

/* f32 -> bf16: the truncation and the next encoding up, nearest wins. */
static uint16_t ref_f32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000u : 0;
    uint16_t lo = (uint16_t)((fbits(f) >> 16) & 0x7fffu);
    double a = fabs((double)f);

    if (isnan(f))
        return sign | 0x7fc0u;
    if (isinf(f))
        return sign | 0x7f80u;
    double vhi =
        lo == 0x7f7f ? ldexp(1.0, 128) : ref_bf16_value((uint16_t)(lo + 1));
    return sign | nearest(a, lo, ref_bf16_value(lo), vhi);
}

Test(reduce, acc_dtype)
{
    cr_expect_eq(hvd__acc_dtype(HVD_FLOAT16), HVD_FLOAT32);
    cr_expect_eq(hvd__acc_dtype(HVD_BFLOAT16), HVD_FLOAT32);
    cr_expect_eq(hvd__acc_dtype(HVD_UINT8), HVD_UINT8);
    cr_expect_eq(hvd__acc_dtype(HVD_INT8), HVD_INT8);
    cr_expect_eq(hvd__acc_dtype(HVD_INT16), HVD_INT16);
    cr_expect_eq(hvd__acc_dtype(HVD_INT32), HVD_INT32);
    cr_expect_eq(hvd__acc_dtype(HVD_INT64), HVD_INT64);
    cr_expect_eq(hvd__acc_dtype(HVD_FLOAT32), HVD_FLOAT32);
    cr_expect_eq(hvd__acc_dtype(HVD_FLOAT64), HVD_FLOAT64);
}

Test(f16, widening_matches_the_definition_for_all_patterns)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = hvd__f16_to_f32((uint16_t)h);
        double want = ref_f16_value((uint16_t)h);

        cr_assert_eq(!!signbit(f), !!(h & 0x8000u), "sign of 0x%04x", h);
        if (f16_is_nan((uint16_t)h))
            cr_assert(isnan(f), "0x%04x should widen to NaN", h);
        else
            cr_assert((double)f == want, "0x%04x: got %a want %a", h, (double)f,
                      want);
    }
}

Test(f16, all_patterns_round_trip)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        uint16_t back = hvd__f32_to_f16(hvd__f16_to_f32((uint16_t)h));

        if (f16_is_nan((uint16_t)h)) {
            cr_assert(f16_is_nan(back), "NaN 0x%04x came back 0x%04x", h, back);
            cr_assert_eq(back & 0x8000u, h & 0x8000u, "NaN sign 0x%04x", h);
        } else {
            cr_assert_eq(back, h, "0x%04x came back 0x%04x", h, back);
        }
    }
}

struct f16_case {
    float f;
    uint16_t want;
};

Test(f16, rounding_cases)
{
    const struct f16_case cases[] = {
        {1.0f, 0x3c00},
        /* Halfway between 1 and 1 + 2^-10: ties to even, 1. */
        {1.0f + 0x1p-11f, 0x3c00},
        /* Halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up. */
        {1.0f + 0x3p-11f, 0x3c02},
        /* Just below and just above halfway. */
        {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},
        {-(1.0f + 0x1p-11f + 0x1p-23f), 0xbc01},
        {65504.0f, 0x7bff},
        {65519.0f, 0x7bff},
        {0x1.ffdffep+15f, 0x7bff}, /* the float just below 65520 */
        {65520.0f, 0x7c00},
        {-65520.0f, 0xfc00},
        {1e10f, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},            /* smallest normal */
        {0x1p-14f - 0x1p-25f, 0x0400}, /* halfway 0x3ff/0x400: even */
        {0x1p-14f - 0x1p-25f - 0x1p-38f, 0x03ff},
        {0x1p-24f, 0x0001}, /* smallest subnormal */
        {-0x1p-24f, 0x8001},
        {0x1p-25f, 0x0000},            /* halfway 0/1: even is 0 */
        {0x1p-25f + 0x1p-48f, 0x0001}, /* an ulp above halfway */
        {0x3p-25f, 0x0002},            /* halfway 1/2: even is 2 */
        {0x5p-25f, 0x0002},            /* halfway 2/3: even is 2 */
        {0x1p-26f, 0x0000},
        {1e-30f, 0x0000},
        {-1e-30f, 0x8000},
        {0x1p-149f, 0x0000}, /* float32 subnormal */
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
    };

    for (size_t i = 0; i < NELEMS(cases); i++) {
        uint16_t got = hvd__f32_to_f16(cases[i].f);
        cr_expect_eq(got, cases[i].want, "%a: got 0x%04x want 0x%04x",
                     (double)cases[i].f, got, cases[i].want);
        cr_expect_eq(got, ref_f32_to_f16(cases[i].f), "reference for %a",
                     (double)cases[i].f);
    }
}

Test(f16, nan_stays_nan_and_never_becomes_inf)
{
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                             0x7f801fffu, 0x7fffffffu, 0x7fa00000u};

    for (size_t i = 0; i < NELEMS(nans); i++) {
        uint16_t got = hvd__f32_to_f16(bitsf(nans[i]));
        cr_expect(f16_is_nan(got), "0x%08x gave 0x%04x", nans[i], got);
        cr_expect(got & 0x0200u, "0x%08x gave a signalling NaN", nans[i]);
        cr_expect_eq(!!(got & 0x8000u), !!(nans[i] & 0x80000000u));
    }
    /* Widening quietens too, as the F16C instruction does. */
    for (uint16_t m = 1; m < 0x400; m++) {
        uint32_t w = fbits(hvd__f16_to_f32((uint16_t)(0x7c00u | m)));
        cr_expect(w & 0x00400000u, "0x%04x widened to 0x%08x", 0x7c00u | m, w);
    }
}

Test(f16, narrowing_matches_reference_on_random_floats)
{
    for (int i = 0; i < 300000; i++) {
        uint32_t u = (uint32_t)rnd();
        if (i & 1) {
            /* Mostly around the float16 range, with every low bit set
             * at random so that ties and near-ties show up. */
            uint32_t exp = 98 + (uint32_t)(rnd() % 46);
            u = (u & 0x807fffffu) | (exp << 23);
            if (i & 2)
                u &= ~0xfffu | (uint32_t)(rnd() & 0x1000u);
        }
        float f = bitsf(u);
        if (isnan(f))
            continue;
        uint16_t got = hvd__f32_to_f16(f);
        uint16_t want = ref_f32_to_f16(f);
        cr_assert_eq(got, want, "%a (0x%08x): got 0x%04x want 0x%04x",
                     (double)f, u, got, want);
    }
}

Test(bf16, all_patterns_round_trip)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = hvd__bf16_to_f32((uint16_t)h);
        uint16_t back = hvd__f32_to_bf16(f);

        if (bf16_is_nan((uint16_t)h)) {
            cr_assert(isnan(f), "0x%04x should widen to NaN", h);
            cr_assert(bf16_is_nan(back), "NaN 0x%04x came back 0x%04x", h,
                      back);
            cr_assert_eq(back & 0x8000u, h & 0x8000u);
        } else {
            cr_assert_eq(fbits(f), h << 16, "0x%04x widened wrong", h);
            cr_assert_eq(back, h, "0x%04x came back 0x%04x", h, back);
        }
    }
}

Test(bf16, rounding_cases)
{
    const struct f16_case cases[] = {
        {1.0f, 0x3f80},
        /* Halfway between 1 and 1 + 2^-7: ties to even, 1. */
        {1.0f + 0x1p-8f, 0x3f80},
        /* Halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up. */
        {1.0f + 0x3p-8f, 0x3f82},
        {1.0f + 0x1p-8f - 0x1p-23f, 0x3f80},
        {1.0f + 0x1p-8f + 0x1p-23f, 0x3f81},
        {-(1.0f + 0x1p-8f + 0x1p-23f), 0xbf81},
        {0x1.fep+127f, 0x7f7f},     /* max finite bfloat16 */
        {0x1.ffp+127f, 0x7f80},     /* halfway to 2^128: even is inf */
        {0x1.fefffep+127f, 0x7f7f}, /* just below that */
        {0x1.fffffep+127f, 0x7f80}, /* FLT_MAX */
        {-0x1.fffffep+127f, 0xff80},
        {INFINITY, 0x7f80},
        {-INFINITY, 0xff80},
        {0x1p-133f, 0x0001}, /* smallest bfloat16 subnormal */
        {0x1p-134f, 0x0000}, /* halfway 0/1: even */
        {0x3p-134f, 0x0002}, /* halfway 1/2: even */
        {0x1p-149f, 0x0000},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
    };

    for (size_t i = 0; i < NELEMS(cases); i++) {
        uint16_t got = hvd__f32_to_bf16(cases[i].f);
        cr_expect_eq(got, cases[i].want, "%a: got 0x%04x want 0x%04x",
                     (double)cases[i].f, got, cases[i].want);
        cr_expect_eq(got, ref_f32_to_bf16(cases[i].f), "reference for %a",
                     (double)cases[i].f);
    }
}

Test(bf16, nan_stays_nan_and_never_becomes_inf)
{
    /* Payloads only in the low 16 bits would truncate to infinity. */
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u,
                             0xff800001u, 0x7f80ffffu, 0x7fffffffu};

    for (size_t i = 0; i < NELEMS(nans); i++) {
        uint16_t got = hvd__f32_to_bf16(bitsf(nans[i]));
        cr_expect(bf16_is_nan(got), "0x%08x gave 0x%04x", nans[i], got);
        cr_expect(got & 0x0040u, "0x%08x gave a signalling NaN", nans[i]);
        cr_expect_eq(!!(got & 0x8000u), !!(nans[i] & 0x80000000u));
    }
}

Test(bf16, narrowing_matches_reference_on_random_floats)
{
    for (int i = 0; i < 300000; i++) {
        uint32_t u = (uint32_t)rnd();
        if (i & 1)
            u &= ~0x7fffu | (uint32_t)(rnd() & 0x8000u); /* near ties */
        float f = bitsf(u);
        if (isnan(f))
            continue;
        uint16_t got = hvd__f32_to_bf16(f);
        uint16_t want = ref_f32_to_bf16(f);
        cr_assert_eq(got, want, "%a (0x%08x): got 0x%04x want 0x%04x",
                     (double)f, u, got, want);
    }
}

/*
 * The reference for a whole reduction: element i of the result of nr ranks'
 * inputs, computed one element at a time with plain arithmetic. Integer
 * wrap-around is done with explicit modulo on wide values, and integer
 * averages with magnitudes, so that no step copies the kernels' method.
 */
static int64_t wrap_signed(int64_t v, int bits)
{
    int64_t mod = (int64_t)1 << bits;
    int64_t r = ((v % mod) + mod) % mod;
    return r >= mod / 2 ? r - mod : r;
}

static int64_t trunc_div(int64_t v, int d)
{
    /* Magnitudes, so INT64_MIN needs its own branch. */
    if (v == INT64_MIN)
        return -(int64_t)((UINT64_C(1) << 63) / (uint64_t)d);
    int64_t q = (v < 0 ? -v : v) / d;
    return v < 0 ? -q : q;
}

static int64_t ref_int(hvd_op op, const int64_t *v, int nr, int bits)
{
    int64_t acc = v[0];

    for (int r = 1; r < nr; r++) {
        switch (op) {
        case HVD_SUM:
        case HVD_AVERAGE:
            acc = bits == 64 ? (int64_t)((uint64_t)acc + (uint64_t)v[r])
                             : wrap_signed(acc + v[r], bits);
            break;
        case HVD_PRODUCT:
            acc = bits == 64 ? (int64_t)((uint64_t)acc * (uint64_t)v[r])
                             : wrap_signed(acc * v[r], bits);
            break;
        case HVD_MIN:
            acc = v[r] < acc ? v[r] : acc;
            break;
        case HVD_MAX:
            acc = v[r] > acc ? v[r] : acc;
            break;
        case HVD_ADASUM: /* not an element-wise kernel */
            break;
        }
    }
    return op == HVD_AVERAGE ? trunc_div(acc, nr) : acc;
}

static int64_t ref_u8(hvd_op op, const int64_t *v, int nr)
{
    int64_t acc = v[0];

    for (int r = 1; r < nr; r++) {
        switch (op) {
        case HVD_SUM:
        case HVD_AVERAGE:
            acc = (acc + v[r]) % 256;
            break;
        case HVD_PRODUCT:
            acc = (acc * v[r]) % 256;
            break;
        case HVD_MIN:
            acc = v[r] < acc ? v[r] : acc;
            break;
        case HVD_MAX:
            acc = v[r] > acc ? v[r] : acc;
            break;
        case HVD_ADASUM: /* not an element-wise kernel */
            break;
        }
    }
    return op == HVD_AVERAGE ? acc / nr : acc;
}

static double ref_float(hvd_op op, const double *v, int nr, int is_f64)
{
    double acc = v[0];

    for (int r = 1; r < nr; r++) {
        if (op == HVD_MIN || op == HVD_MAX) {
            if (isnan(acc) || isnan(v[r]))
                acc = NAN;
            else if (op == HVD_MIN)
                acc = fmin(acc, v[r]);
            else
                acc = fmax(acc, v[r]);
            continue;
        }
        /* Rounded to the accumulator type after every step. */
        acc = op == HVD_PRODUCT ? acc * v[r] : acc + v[r];
        if (!is_f64)
            acc = (float)acc;
    }
    if (op == HVD_AVERAGE)
        acc = is_f64 ? acc / nr : (double)((float)acc / (float)nr);
    return acc;
}

/* Reads element i of buf as a wide value (integers exactly). */
static int64_t get_int(const void *buf, size_t i, hvd_dtype dt)
{
    switch (dt) {
    case HVD_UINT8:
        return ((const uint8_t *)buf)[i];
    case HVD_INT8:
        return ((const int8_t *)buf)[i];
    case HVD_INT16:
        return ((const int16_t *)buf)[i];
    case HVD_INT32:
        return ((const int32_t *)buf)[i];
    case HVD_INT64:
        return ((const int64_t *)buf)[i];
    default:
        return 0;
    }
}

static double get_float(const void *buf, size_t i, hvd_dtype dt)
{
    switch (dt) {
    case HVD_FLOAT16:
        return ref_f16_value(((const uint16_t *)buf)[i]);
    case HVD_BFLOAT16:
        return ref_bf16_value(((const uint16_t *)buf)[i]);
    case HVD_FLOAT32:
        return ((const float *)buf)[i];
    case HVD_FLOAT64:
        return ((const double *)buf)[i];
    default:
        return 0;
    }
}

static void fill_random(void *buf, size_t n, hvd_dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        switch (dt) {
        case HVD_UINT8:
        case HVD_INT8:
            ((uint8_t *)buf)[i] = (uint8_t)r;
            break;
        case HVD_INT16:
            ((uint16_t *)buf)[i] = (uint16_t)r;
            break;
        case HVD_INT32:
            ((uint32_t *)buf)[i] = (uint32_t)r;
            break;
        case HVD_INT64:
            ((uint64_t *)buf)[i] = r;
            break;
        case HVD_FLOAT16:
        case HVD_BFLOAT16: {
            /*
             * Any finite value but -0: which zero min(-0, +0) returns is
             * not specified, so the reference could not check it.
             */
            uint16_t top = dt == HVD_FLOAT16 ? 0x7c00u : 0x7f80u;
            uint16_t h = (uint16_t)(r % top);
            ((uint16_t *)buf)[i] = h ? (uint16_t)(h | (r >> 32 & 0x8000u)) : 0;
            break;
        }
        case HVD_FLOAT32:
            /* Small integers give exact sums; the rest are any value. */
            ((float *)buf)[i] = (r & 1) ? (float)((int)(r >> 8 & 15) - 7)
                                        : (float)((double)(int64_t)r * 1e-15);
            break;
        case HVD_FLOAT64:
            ((double *)buf)[i] = (r & 1) ? (double)((int)(r >> 8 & 15) - 7)
                                         : (double)(int64_t)r * 1e-15;
            break;
        }
    }
}

/* The whole pipeline of one allreduce: widen, reduce each rank, finish. */
static void run_pipeline(void *out, void *const *in, int nr, size_t n,
                         hvd_dtype dt, hvd_op op)
{
    hvd_dtype adt = hvd__acc_dtype(dt);
    size_t asz = hvd_dtype_size(adt) * (n ? n : 1);
    void *acc = malloc(asz);
    void *tmp = malloc(asz);

    cr_assert(acc && tmp);
    hvd__widen(acc, in[0], n, dt);
    for (int r = 1; r < nr; r++) {
        hvd__widen(tmp, in[r], n, dt);
        hvd__reduce(acc, tmp, n, adt, op);
    }
    hvd__finish(out, acc, n, dt, op, nr);
    free(tmp);
    free(acc);
}

static void check_against_reference(hvd_dtype dt, hvd_op op, size_t n, int nr)
{
    void *in[4];
    void *out = malloc(hvd_dtype_size(dt) * (n ? n : 1));

    cr_assert(nr <= 4 && out);
    for (int r = 0; r < nr; r++) {
        in[r] = malloc(hvd_dtype_size(dt) * (n ? n : 1));
        cr_assert(in[r]);
        fill_random(in[r], n, dt);
    }
    run_pipeline(out, in, nr, n, dt, op);

    for (size_t i = 0; i < n; i++) {
        if (dt == HVD_UINT8 || dt == HVD_INT8 || dt == HVD_INT16 ||
            dt == HVD_INT32 || dt == HVD_INT64) {
            int64_t v[4];
            int bits = (int)hvd_dtype_size(dt) * 8;
            for (int r = 0; r < nr; r++)
                v[r] = get_int(in[r], i, dt);
            int64_t want;
            if (dt == HVD_UINT8)
                want = ref_u8(op, v, nr);
            else
                want = ref_int(op, v, nr, bits);
            int64_t got = get_int(out, i, dt);
            cr_assert_eq(got, want,
                         "dtype %d op %d n %zu elem %zu: got %lld want %lld",
                         dt, op, n, i, (long long)got, (long long)want);
            continue;
        }

        double v[4];
        for (int r = 0; r < nr; r++)
            v[r] = get_float(in[r], i, dt);
        double want = ref_float(op, v, nr, dt == HVD_FLOAT64);
        int ok;
        if (dt == HVD_FLOAT16 || dt == HVD_BFLOAT16) {
            uint16_t got = ((uint16_t *)out)[i];
            uint16_t w = dt == HVD_FLOAT16 ? ref_f32_to_f16((float)want)
                                           : ref_f32_to_bf16((float)want);
            ok = dt == HVD_FLOAT16 ? (f16_is_nan(got) && f16_is_nan(w))
                                   : (bf16_is_nan(got) && bf16_is_nan(w));
            ok = ok || got == w;
            cr_assert(ok, "dtype %d op %d n %zu elem %zu: 0x%04x want 0x%04x",
                      dt, op, n, i, got, w);
        } else {
            double got = get_float(out, i, dt);
            if (dt == HVD_FLOAT32)
                ok = fbits((float)got) == fbits((float)want);
            else
                ok = dbits(got) == dbits(want);
            ok = ok || (isnan(got) && isnan(want));
            cr_assert(ok, "dtype %d op %d n %zu elem %zu: got %a want %a", dt,
                      op, n, i, got, want);
        }
    }
    for (int r = 0; r < nr; r++)
        free(in[r]);
    free(out);
}

Test(reduce, every_dtype_and_op_against_reference)
{
    /* Sizes around the vector block (64), so both loop parts run. */
    const size_t sizes[] = {1, 3, 63, 64, 65, 130, 1003};

    for (size_t d = 0; d < NELEMS(all_dtypes); d++)
        for (size_t o = 0; o < NELEMS(all_ops); o++)
            for (size_t s = 0; s < NELEMS(sizes); s++)
                for (int nr = 1; nr <= 4; nr++)
                    check_against_reference(all_dtypes[d], all_ops[o], sizes[s],
                                            nr);
}

Test(reduce, three_operand_kernels_match_copy_then_reduce)
{
    const size_t sizes[] = {1, 63, 64, 65, 1003};
    const hvd_dtype accs[] = {HVD_UINT8, HVD_INT8,    HVD_INT16,  HVD_INT32,
                              HVD_INT64, HVD_FLOAT32, HVD_FLOAT64};
    uint8_t a[1003 * 8], b[1003 * 8], want[1003 * 8], got[1003 * 8 + 1];
    uint32_t x = 12345;

    for (size_t i = 0; i < sizeof(a); i++) {
        x = x * 1103515245u + 12345u;
        a[i] = (uint8_t)(x >> 16);
        b[i] = (uint8_t)(x >> 8);
    }
    for (size_t d = 0; d < NELEMS(accs); d++)
        for (size_t o = 0; o < NELEMS(all_ops); o++)
            for (size_t s = 0; s < NELEMS(sizes); s++) {
                size_t n = sizes[s], bytes = n * hvd_dtype_size(accs[d]);
                memcpy(want, a, bytes);
                hvd__reduce(want, b, n, accs[d], all_ops[o]);
                memset(got, 0xa5, sizeof(got));
                hvd__reduce3(got, a, b, n, accs[d], all_ops[o]);
                cr_assert(memcmp(got, want, bytes) == 0, "dtype %d op %d n %zu",
                          accs[d], all_ops[o], n);
                /* Nothing past the end is written. */
                cr_assert(got[bytes] == 0xa5);
            }
}

Test(reduce, average_accumulates_like_sum)
{
    int32_t a[5] = {1, -2, 3, INT32_MAX, 7};
    int32_t b[5] = {1, -2, 3, INT32_MAX, 7};
    const int32_t src[5] = {10, 20, -30, 1, 0};

    hvd__reduce(a, src, 5, HVD_INT32, HVD_SUM);
    hvd__reduce(b, src, 5, HVD_INT32, HVD_AVERAGE);
    cr_expect_arr_eq(a, b, sizeof(a));
}

/* Runs one op over two float32 or float64 vectors into a. */
#define CHECK_SPECIALS(T, dt, op, want)                                        \
    do {                                                                       \
        T a_[] = {NAN, 1, NAN, INFINITY, -INFINITY, INFINITY, 1, -INFINITY};   \
        const T b_[] = {1, NAN, NAN, -INFINITY, 1, NAN, INFINITY, -INFINITY};  \
        const T w_[] = want;                                                   \
        hvd__reduce(a_, b_, NELEMS(a_), dt, op);                               \
        for (size_t i_ = 0; i_ < NELEMS(a_); i_++) {                           \
            if (isnan(w_[i_]))                                                 \
                cr_expect(isnan(a_[i_]), #T " op %d elem %zu: %a", op, i_,     \
                          (double)a_[i_]);                                     \
            else                                                               \
                cr_expect(a_[i_] == w_[i_], #T " op %d elem %zu: %a", op, i_,  \
                          (double)a_[i_]);                                     \
        }                                                                      \
    } while (0)

#define LIST(...)                                                              \
    {                                                                          \
        __VA_ARGS__                                                            \
    }

Test(reduce, nan_and_infinity)
{
    /* a:    NaN  1    NaN  inf   -inf  inf  1    -inf
     * b:    1    NaN  NaN  -inf  1     NaN  inf  -inf */
#define WANT_SUM LIST(NAN, NAN, NAN, NAN, -INFINITY, NAN, INFINITY, -INFINITY)
#define WANT_MIN LIST(NAN, NAN, NAN, -INFINITY, -INFINITY, NAN, 1, -INFINITY)
#define WANT_MAX LIST(NAN, NAN, NAN, INFINITY, 1, NAN, INFINITY, -INFINITY)
#define WANT_PROD                                                              \
    LIST(NAN, NAN, NAN, -INFINITY, -INFINITY, NAN, INFINITY, INFINITY)
    CHECK_SPECIALS(float, HVD_FLOAT32, HVD_SUM, WANT_SUM);
    CHECK_SPECIALS(float, HVD_FLOAT32, HVD_MIN, WANT_MIN);
    CHECK_SPECIALS(float, HVD_FLOAT32, HVD_MAX, WANT_MAX);
    CHECK_SPECIALS(float, HVD_FLOAT32, HVD_PRODUCT, WANT_PROD);
    CHECK_SPECIALS(double, HVD_FLOAT64, HVD_SUM, WANT_SUM);
    CHECK_SPECIALS(double, HVD_FLOAT64, HVD_MIN, WANT_MIN);
    CHECK_SPECIALS(double, HVD_FLOAT64, HVD_MAX, WANT_MAX);
    CHECK_SPECIALS(double, HVD_FLOAT64, HVD_PRODUCT, WANT_PROD);
}

Test(reduce, nan_propagates_in_every_lane)
{
    /* A NaN at each position of a vector-sized run, on either side. */
    enum { N = 200 };
    static float a[N], b[N];
    const hvd_op ops[] = {HVD_MIN, HVD_MAX};

    for (size_t o = 0; o < NELEMS(ops); o++) {
        for (size_t k = 0; k < 2 * N; k++) {
            for (size_t i = 0; i < N; i++) {
                a[i] = (float)i;
                b[i] = (float)(N - i);
            }
            if (k < N)
                a[k] = NAN;
            else
                b[k - N] = NAN;
            hvd__reduce(a, b, N, HVD_FLOAT32, ops[o]);
            for (size_t i = 0; i < N; i++)
                cr_assert_eq(!!isnan(a[i]), i == k % N, "op %d k %zu i %zu",
                             ops[o], k, i);
        }
    }
}

Test(reduce, half_nan_and_inf_survive_the_pipeline)
{
    /* float16: NaN, 1, inf, -inf; float32 sums and min/max, then back. */
    uint16_t x[4] = {0x7e00, 0x3c00, 0x7c00, 0xfc00};
    uint16_t y[4] = {0x3c00, 0xfe00, 0xfc00, 0x3c00};
    void *in[2] = {x, y};
    uint16_t out[4];

    run_pipeline(out, in, 2, 4, HVD_FLOAT16, HVD_SUM);
    cr_expect(f16_is_nan(out[0]) && f16_is_nan(out[1]) && f16_is_nan(out[2]));
    cr_expect_eq(out[3], 0xfc00);
    run_pipeline(out, in, 2, 4, HVD_FLOAT16, HVD_MIN);
    cr_expect(f16_is_nan(out[0]) && f16_is_nan(out[1]));
    cr_expect_eq(out[2], 0xfc00);
    cr_expect_eq(out[3], 0xfc00);
    run_pipeline(out, in, 2, 4, HVD_FLOAT16, HVD_MAX);
    cr_expect(f16_is_nan(out[0]) && f16_is_nan(out[1]));
    cr_expect_eq(out[2], 0x7c00);
    cr_expect_eq(out[3], 0x3c00);

    /* bfloat16: the same with its encodings. */
    uint16_t bx[2] = {0x7fc0, 0x7f80};
    uint16_t by[2] = {0x3f80, 0xff80};
    void *bin[2] = {bx, by};
    run_pipeline(out, bin, 2, 2, HVD_BFLOAT16, HVD_SUM);
    cr_expect(bf16_is_nan(out[0]) && bf16_is_nan(out[1]));
    run_pipeline(out, bin, 2, 2, HVD_BFLOAT16, HVD_MAX);
    cr_expect(bf16_is_nan(out[0]));
    cr_expect_eq(out[1], 0x7f80);
}

Test(reduce, integer_wraparound)
{
    uint8_t u8a[] = {250, 255, 16, 0};
    const uint8_t u8b[] = {10, 1, 16, 255};
    hvd__reduce(u8a, u8b, 4, HVD_UINT8, HVD_SUM);
    cr_expect_eq(u8a[0], 4);
    cr_expect_eq(u8a[1], 0);
    cr_expect_eq(u8a[2], 32);
    cr_expect_eq(u8a[3], 255);
    uint8_t u8p[] = {16, 255, 3};
    const uint8_t u8q[] = {16, 255, 200};
    hvd__reduce(u8p, u8q, 3, HVD_UINT8, HVD_PRODUCT);
    cr_expect_eq(u8p[0], 0);
    cr_expect_eq(u8p[1], 1);  /* 65025 mod 256 */
    cr_expect_eq(u8p[2], 88); /* 600 mod 256 */

    int8_t i8a[] = {127, -128, -100, 5};
    const int8_t i8b[] = {1, -1, -100, -10};
    hvd__reduce(i8a, i8b, 4, HVD_INT8, HVD_SUM);
    cr_expect_eq(i8a[0], -128);
    cr_expect_eq(i8a[1], 127);
    cr_expect_eq(i8a[2], 56);
    cr_expect_eq(i8a[3], -5);
    int8_t i8p[] = {64, -128, -128, 11};
    const int8_t i8q[] = {2, -1, -128, -12};
    hvd__reduce(i8p, i8q, 4, HVD_INT8, HVD_PRODUCT);
    cr_expect_eq(i8p[0], -128);
    cr_expect_eq(i8p[1], -128);
    cr_expect_eq(i8p[2], 0);
    cr_expect_eq(i8p[3], 124); /* -132 + 256 */

    int16_t i16a[] = {INT16_MAX, INT16_MIN, -300, 5};
    const int16_t i16b[] = {1, -1, -32600, -10};
    hvd__reduce(i16a, i16b, 4, HVD_INT16, HVD_SUM);
    cr_expect_eq(i16a[0], INT16_MIN);
    cr_expect_eq(i16a[1], INT16_MAX);
    cr_expect_eq(i16a[2], 32636); /* -32900 + 65536 */
    cr_expect_eq(i16a[3], -5);
    int16_t i16p[] = {256, INT16_MIN, 181, -3};
    const int16_t i16q[] = {256, -1, 182, 5};
    hvd__reduce(i16p, i16q, 4, HVD_INT16, HVD_PRODUCT);
    cr_expect_eq(i16p[0], 0);
    cr_expect_eq(i16p[1], INT16_MIN);
    cr_expect_eq(i16p[2], -32594); /* 32942 - 65536 */
    cr_expect_eq(i16p[3], -15);

    int32_t i32a[] = {INT32_MAX, INT32_MIN, -5};
    const int32_t i32b[] = {1, -1, 3};
    hvd__reduce(i32a, i32b, 3, HVD_INT32, HVD_SUM);
    cr_expect_eq(i32a[0], INT32_MIN);
    cr_expect_eq(i32a[1], INT32_MAX);
    cr_expect_eq(i32a[2], -2);
    int32_t i32p[] = {65536, INT32_MIN, 65537, -3};
    const int32_t i32q[] = {65536, -1, 65537, 5};
    hvd__reduce(i32p, i32q, 4, HVD_INT32, HVD_PRODUCT);
    cr_expect_eq(i32p[0], 0);
    cr_expect_eq(i32p[1], INT32_MIN);
    cr_expect_eq(i32p[2], 131073); /* 2^32 + 2^17 + 1 mod 2^32 */
    cr_expect_eq(i32p[3], -15);

    int64_t i64a[] = {INT64_MAX, INT64_MIN, -5};
    const int64_t i64b[] = {1, -1, 3};
    hvd__reduce(i64a, i64b, 3, HVD_INT64, HVD_SUM);
    cr_expect_eq(i64a[0], INT64_MIN);
    cr_expect_eq(i64a[1], INT64_MAX);
    cr_expect_eq(i64a[2], -2);
    int64_t i64p[] = {(int64_t)1 << 32, INT64_MIN, INT64_MAX, -3};
    const int64_t i64q[] = {(int64_t)1 << 32, -1, 2, 5};
    hvd__reduce(i64p, i64q, 4, HVD_INT64, HVD_PRODUCT);
    cr_expect_eq(i64p[0], 0);
    cr_expect_eq(i64p[1], INT64_MIN);
    cr_expect_eq(i64p[2], -2);
    cr_expect_eq(i64p[3], -15);
}

Test(reduce, integer_min_max_are_signed_aware)
{
    int8_t a[] = {-128, 127, -1};
    const int8_t b[] = {0, -1, 1};
    int8_t c[] = {-128, 127, -1};

    hvd__reduce(a, b, 3, HVD_INT8, HVD_MIN);
    hvd__reduce(c, b, 3, HVD_INT8, HVD_MAX);
    cr_expect_eq(a[0], -128);
    cr_expect_eq(a[1], -1);
    cr_expect_eq(a[2], -1);
    cr_expect_eq(c[0], 0);
    cr_expect_eq(c[1], 127);
    cr_expect_eq(c[2], 1);

    int16_t s[] = {INT16_MIN, INT16_MAX, -1};
    const int16_t t[] = {0, -1, 1};
    int16_t w[] = {INT16_MIN, INT16_MAX, -1};
    hvd__reduce(s, t, 3, HVD_INT16, HVD_MIN);
    hvd__reduce(w, t, 3, HVD_INT16, HVD_MAX);
    cr_expect_eq(s[0], INT16_MIN);
    cr_expect_eq(s[1], -1);
    cr_expect_eq(s[2], -1);
    cr_expect_eq(w[0], 0);
    cr_expect_eq(w[1], INT16_MAX);
    cr_expect_eq(w[2], 1);

    uint8_t u[] = {200, 0};
    const uint8_t v[] = {100, 255};
    hvd__reduce(u, v, 2, HVD_UINT8, HVD_MAX);
    cr_expect_eq(u[0], 200);
    cr_expect_eq(u[1], 255);
}

Test(reduce, integer_average_truncates_towards_zero)
{
    int32_t i32[] = {7, -7, INT32_MIN, INT32_MAX, 1, -1};
    hvd__finish(i32, i32, 6, HVD_INT32, HVD_AVERAGE, 2);
    cr_expect_eq(i32[0], 3);
    cr_expect_eq(i32[1], -3);
    cr_expect_eq(i32[2], INT32_MIN / 2);
    cr_expect_eq(i32[3], 1073741823);
    cr_expect_eq(i32[4], 0);
    cr_expect_eq(i32[5], 0);

    int8_t i8[] = {-7, 7, -128, 127};
    int8_t i8out[4];
    hvd__finish(i8out, i8, 4, HVD_INT8, HVD_AVERAGE, 3);
    cr_expect_eq(i8out[0], -2);
    cr_expect_eq(i8out[1], 2);
    cr_expect_eq(i8out[2], -42);
    cr_expect_eq(i8out[3], 42);
    /* A size beyond the element type's range still divides. */
    hvd__finish(i8out, i8, 4, HVD_INT8, HVD_AVERAGE, 200);
    cr_expect_eq(i8out[2], 0);
    hvd__finish(i8out, i8, 4, HVD_INT8, HVD_AVERAGE, 1);
    cr_expect_arr_eq(i8out, i8, sizeof(i8));

    int16_t i16[] = {-7, 7, INT16_MIN, INT16_MAX};
    int16_t i16out[4];
    hvd__finish(i16out, i16, 4, HVD_INT16, HVD_AVERAGE, 3);
    cr_expect_eq(i16out[0], -2);
    cr_expect_eq(i16out[1], 2);
    cr_expect_eq(i16out[2], -10922);
    cr_expect_eq(i16out[3], 10922);
    hvd__finish(i16out, i16, 4, HVD_INT16, HVD_AVERAGE, 40000);
    cr_expect_eq(i16out[2], 0);
    cr_expect_eq(i16out[3], 0);

    uint8_t u8[] = {7, 255};
    hvd__finish(u8, u8, 2, HVD_UINT8, HVD_AVERAGE, 2);
    cr_expect_eq(u8[0], 3);
    cr_expect_eq(u8[1], 127);
    uint8_t u8b[] = {255};
    hvd__finish(u8b, u8b, 1, HVD_UINT8, HVD_AVERAGE, 300);
    cr_expect_eq(u8b[0], 0);

    int64_t i64[] = {-7, INT64_MIN, INT64_MAX};
    hvd__finish(i64, i64, 3, HVD_INT64, HVD_AVERAGE, 2);
    cr_expect_eq(i64[0], -3);
    cr_expect_eq(i64[1], INT64_MIN / 2);
    cr_expect_eq(i64[2], INT64_MAX / 2);
}

/*
 * The vector loops divide integers in float (8- and 16-bit) or double
 * (int32): they must give C's truncating division for every 8- and 16-bit
 * value and for int32 extremes, whatever the size, over enough elements
 * (a multiple of 64 and more) that the vector part runs.
 */
Test(reduce, integer_average_matches_c_division_in_the_vector_loops)
{
    enum { N = 4096 + 3 };
    static uint8_t u8[N];
    static int8_t i8[N];
    static int16_t i16[65536];
    static int32_t i32[N], in32[N];
    const int sizes[] = {1,          2,        3,     7,       100,
                         255,        256,      65537, 1 << 24, (1 << 24) + 1,
                         1000000007, INT32_MAX};
    const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -1,           0,
                             1,         INT32_MAX,     INT32_MAX - 1};

    for (size_t s = 0; s < NELEMS(sizes); s++) {
        int size = sizes[s];
        for (size_t i = 0; i < N; i++) {
            u8[i] = (uint8_t)i;
            i8[i] = (int8_t)(uint8_t)i;
            /* Multiples of size and their neighbours, where truncation
             * is decided, then any values. */
            int64_t k = (int64_t)(rnd() % ((uint64_t)INT32_MAX / size + 1));
            int64_t v = (rnd() & 1 ? k : -k) * size + (int64_t)(i % 3) - 1;
            if (i < NELEMS(edges))
                v = edges[i];
            else if (i % 2 || v < INT32_MIN || v > INT32_MAX)
                v = (int32_t)(uint32_t)rnd();
            in32[i] = (int32_t)v;
        }
        for (size_t i = 0; i < 65536; i++)
            i16[i] = (int16_t)(uint16_t)i;
        hvd__finish(i16, i16, 65536, HVD_INT16, HVD_AVERAGE, size);
        for (size_t i = 0; i < 65536; i++)
            cr_assert_eq(i16[i], (int16_t)((int)(int16_t)(uint16_t)i / size),
                         "int16 %d / %d: got %d", (int16_t)(uint16_t)i, size,
                         i16[i]);
        memcpy(i32, in32, sizeof(i32));
        hvd__finish(u8, u8, N, HVD_UINT8, HVD_AVERAGE, size);
        hvd__finish(i8, i8, N, HVD_INT8, HVD_AVERAGE, size);
        hvd__finish(i32, i32, N, HVD_INT32, HVD_AVERAGE, size);
        for (size_t i = 0; i < N; i++) {
            cr_assert_eq(u8[i], (uint8_t)((int)(uint8_t)i / size),
                         "uint8 %zu / %d", i & 255, size);
            cr_assert_eq(i8[i], (int8_t)((int)(int8_t)(uint8_t)i / size),
                         "int8 %d / %d", (int8_t)(uint8_t)i, size);
            cr_assert_eq(i32[i], (int32_t)((int64_t)in32[i] / size),
                         "int32 %d / %d: got %d", in32[i], size, i32[i]);
        }
    }
}

Test(reduce, float_average_divides_once)
{
    float f[] = {7.0f, -1.0f, 1.0f};
    hvd__finish(f, f, 3, HVD_FLOAT32, HVD_AVERAGE, 2);
    cr_expect_eq(f[0], 3.5f);
    cr_expect_eq(f[1], -0.5f);
    cr_expect_eq(f[2], 0.5f);
    double d[] = {1.0, -0.0};
    hvd__finish(d, d, 2, HVD_FLOAT64, HVD_AVERAGE, 3);
    cr_expect_eq(d[0], 1.0 / 3.0);
    cr_expect(d[1] == 0.0 && signbit(d[1]), "-0 / 3 stays -0");
}

Test(reduce, f16_average_divides_in_f32_and_rounds_once)
{
    /*
     * Three ranks give 1, 1 and 2^-11. In float32 the sum is 2 + 2^-11 and
     * a third of it, 0.66683, rounds to 1366 * 2^-11 (0x3956). Summing in
     * float16 loses the 2^-11 (a quarter of an ulp at 2), and 2/3 rounds
     * to 1365 * 2^-11 (0x3955); so does dividing each input by 3 in
     * float16 before summing.
     */
    const uint16_t vals[3] = {0x3c00, 0x3c00, 0x1000};
    uint16_t r0[1] = {vals[0]}, r1[1] = {vals[1]}, r2[1] = {vals[2]};
    void *in[3] = {r0, r1, r2};
    uint16_t out[1];

    run_pipeline(out, in, 3, 1, HVD_FLOAT16, HVD_AVERAGE);
    cr_expect_eq(out[0], 0x3956, "got 0x%04x", out[0]);

    /* The two float16-first methods really do differ on this input. */
    float sum16 = 0.0f;
    float parts16 = 0.0f;
    for (size_t r = 0; r < 3; r++) {
        float v = hvd__f16_to_f32(vals[r]);
        float third = hvd__f16_to_f32(hvd__f32_to_f16(v / 3.0f));
        sum16 = hvd__f16_to_f32(hvd__f32_to_f16(sum16 + v));
        parts16 = hvd__f16_to_f32(hvd__f32_to_f16(parts16 + third));
    }
    cr_expect_eq(hvd__f32_to_f16(sum16 / 3.0f), 0x3955);
    cr_expect_eq(hvd__f32_to_f16(parts16), 0x3955);
}

Test(reduce, zero_elements)
{
    for (size_t d = 0; d < NELEMS(all_dtypes); d++) {
        hvd_dtype dt = all_dtypes[d];
        hvd_dtype adt = hvd__acc_dtype(dt);

        uint8_t a[16], b[16];

        /* NULL is fine for either pointer (UBSan checks memcpy's). */
        memset(a, 0xa5, sizeof(a));
        memset(b, 0x5a, sizeof(b));
        hvd__widen(NULL, NULL, 0, dt);
        hvd__widen(a, NULL, 0, dt);
        hvd__widen(NULL, b, 0, dt);
        for (size_t o = 0; o < NELEMS(all_ops); o++) {
            hvd__reduce(NULL, NULL, 0, adt, all_ops[o]);
            hvd__reduce(a, NULL, 0, adt, all_ops[o]);
            hvd__reduce(NULL, b, 0, adt, all_ops[o]);
            hvd__finish(NULL, NULL, 0, dt, all_ops[o], 4);
            hvd__finish(a, NULL, 0, dt, all_ops[o], 4);
            hvd__finish(NULL, b, 0, dt, all_ops[o], 4);
        }

        /* With real buffers nothing is touched either. */
        hvd__widen(a, b, 0, dt);
        for (size_t o = 0; o < NELEMS(all_ops); o++) {
            hvd__reduce(a, b, 0, adt, all_ops[o]);
            hvd__finish(a, b, 0, dt, all_ops[o], 4);
        }
        for (size_t i = 0; i < sizeof(a); i++)
            cr_assert_eq(a[i], 0xa5, "dtype %d byte %zu", dt, i);
    }
}

Test(reduce, half_dtypes_are_not_accumulators)
{
    uint16_t a[4] = {0x3c00, 0x4000, 0x4200, 0x4400};
    const uint16_t b[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
    const uint16_t want[4] = {0x3c00, 0x4000, 0x4200, 0x4400};

    hvd__reduce(a, b, 4, HVD_FLOAT16, HVD_SUM);
    hvd__reduce(a, b, 4, HVD_BFLOAT16, HVD_SUM);
    cr_expect_arr_eq(a, want, sizeof(a));
}

/* Finishing in place gives the same bits as into a separate buffer. */
Test(reduce, in_place_finish)
{
    enum { N = 1003 };
    const hvd_dtype halves[] = {HVD_FLOAT16, HVD_BFLOAT16};
    const hvd_op ops[] = {HVD_SUM, HVD_AVERAGE};
    static float acc[N], buf[N];
    static uint16_t sep[N];

    for (size_t h = 0; h < NELEMS(halves); h++) {
        for (size_t o = 0; o < NELEMS(ops); o++) {
            for (size_t i = 0; i < N; i++)
                acc[i] = (float)((double)(int64_t)rnd() * 0x1p-55);
            memcpy(buf, acc, sizeof(buf));
            hvd__finish(sep, acc, N, halves[h], ops[o], 3);
            hvd__finish(buf, buf, N, halves[h], ops[o], 3);
            cr_assert_arr_eq(buf, sep, sizeof(sep), "dtype %d op %d", halves[h],
                             ops[o]);
            for (size_t i = 0; i < N; i++) {
                float v = ops[o] == HVD_AVERAGE ? acc[i] / 3.0f : acc[i];
                uint16_t w = halves[h] == HVD_FLOAT16 ? ref_f32_to_f16(v)
                                                      : ref_f32_to_bf16(v);
                cr_assert_eq(sep[i], w, "dtype %d op %d elem %zu", halves[h],
                             ops[o], i);
            }
        }
    }

    for (size_t d = 0; d < NELEMS(all_dtypes); d++) {
        hvd_dtype dt = all_dtypes[d];
        static uint64_t src[N], a[N], b[N];
        if (dt == HVD_FLOAT16 || dt == HVD_BFLOAT16)
            continue;
        fill_random(src, N, dt);
        for (size_t o = 0; o < NELEMS(all_ops); o++) {
            memcpy(a, src, N * hvd_dtype_size(dt));
            hvd__finish(b, src, N, dt, all_ops[o], 3);
            hvd__finish(a, a, N, dt, all_ops[o], 3);
            cr_assert_arr_eq(a, b, N * hvd_dtype_size(dt), "dtype %d op %d", dt,
                             all_ops[o]);
            if (all_ops[o] != HVD_AVERAGE)
                cr_assert_arr_eq(b, src, N * hvd_dtype_size(dt),
                                 "copy dtype %d", dt);
        }
    }
}

Test(reduce, in_place_widen)
{
    enum { N = 301 };
    static uint16_t half[N];
    static float sep[N], buf[N];
    const hvd_dtype halves[] = {HVD_FLOAT16, HVD_BFLOAT16};

    for (size_t h = 0; h < NELEMS(halves); h++) {
        fill_random(half, N, halves[h]);
        memcpy(buf, half, sizeof(half));
        hvd__widen(sep, half, N, halves[h]);
        hvd__widen(buf, buf, N, halves[h]);
        cr_assert_arr_eq(buf, sep, sizeof(sep), "dtype %d", halves[h]);
        for (size_t i = 0; i < N; i++)
            cr_assert_eq((double)sep[i], get_float(half, i, halves[h]));
    }
}

/*
 * The F16C path against the portable one. Criterion runs every test in a
 * process of its own, so a test's choice of path does not leak into
 * another; each still goes back to the automatic choice when done.
 */
static void need_f16c(void)
{
    if (!hvd__f16c_supported())
        cr_skip_test("this CPU has no F16C: only the portable path exists");
}

/* Takes the portable loops (portable = 1) or the F16C ones (0). */
static void use_portable(int portable)
{
    hvd__reduce_force_portable(portable);
    cr_assert_eq(hvd__reduce_uses_f16c(), !portable, "path switch");
}

/* Fails on the first differing uint16_t, naming the input that gave it. */
static void expect_same_halves(const uint16_t *got, const uint16_t *want,
                               const uint32_t *in, size_t n, const char *what)
{
    if (memcmp(got, want, n * sizeof(*got)) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "%s: 0x%08x gave 0x%04x, not 0x%04x",
                     what, in[i], got[i], want[i]);
}

Test(f16c, widening_matches_portable_for_all_patterns)
{
    static uint16_t h[0x10000];
    static float f16c[0x10000], port[0x10000];

    need_f16c();
    for (uint32_t i = 0; i <= 0xffff; i++)
        h[i] = (uint16_t)i;
    use_portable(0);
    hvd__widen(f16c, h, NELEMS(h), HVD_FLOAT16);
    use_portable(1);
    hvd__widen(port, h, NELEMS(h), HVD_FLOAT16);
    hvd__reduce_force_portable(0);
    for (uint32_t i = 0; i <= 0xffff; i++) {
        cr_assert_eq(fbits(f16c[i]), fbits(port[i]),
                     "0x%04x: F16C 0x%08x, portable 0x%08x", i, fbits(f16c[i]),
                     fbits(port[i]));
        /* The scalar conversion is the portable one too. */
        cr_assert_eq(fbits(port[i]), fbits(hvd__f16_to_f32((uint16_t)i)),
                     "0x%04x: scalar", i);
    }
}

/*
 * Narrows count float32 patterns, first, first + stride, ..., with both
 * paths. The chunk length is odd and the buffers start one element off
 * their alignment, so that the vector loops' tails run too.
 */
static void narrow_patterns(uint32_t first, uint64_t count, uint32_t stride)
{
    enum { CHUNK = 65531 };
    static uint32_t in[CHUNK + 1];
    static uint16_t f16c[CHUNK + 1], port[CHUNK + 1];

    need_f16c();
    for (uint64_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? (size_t)(count - done) : CHUNK;
        for (size_t i = 0; i < n; i++)
            in[1 + i] = first + (uint32_t)(done + i) * stride;
        use_portable(0);
        hvd__finish(f16c + 1, in + 1, n, HVD_FLOAT16, HVD_SUM, 1);
        use_portable(1);
        hvd__finish(port + 1, in + 1, n, HVD_FLOAT16, HVD_SUM, 1);
        expect_same_halves(f16c + 1, port + 1, in + 1, n, "F16C vs portable");
    }
    hvd__reduce_force_portable(0);
}

/*
 * Every pattern with the sign bit clear, in two tests that Criterion runs
 * in parallel (all 2^32 take some 6 s on one core, 40 s under ASan and
 * UBSan). Both paths take the sign apart from the magnitude, so the
 * negative patterns are a dense sample: every 17th (17 is odd, so the
 * low bits take every value), which includes every exponent and every
 * NaN and rounding class.
 */
Test(f16c, narrowing_matches_portable_for_all_positive_patterns_0)
{
    narrow_patterns(0, 1u << 30, 1);
}

Test(f16c, narrowing_matches_portable_for_all_positive_patterns_1)
{
    narrow_patterns(1u << 30, 1u << 30, 1);
}

Test(f16c, narrowing_matches_portable_for_negative_patterns)
{
    narrow_patterns(0x80000000u, 0x80000000u / 17, 17);
}

/*
 * float32 patterns where narrowing is delicate: for every float16
 * magnitude, its value and the halfway point to the next one, each with
 * the float32 just below and above; and float32 subnormals.
 */
static size_t boundary_patterns(uint32_t *u)
{
    size_t n = 0;

    for (uint32_t h = 0; h < 0x7c00; h++) {
        uint32_t v = fbits(hvd__f16_to_f32((uint16_t)h));
        uint32_t next = fbits(hvd__f16_to_f32((uint16_t)(h + 1)));
        uint32_t half = fbits((bitsf(v) + bitsf(next)) / 2);
        if (h == 0x7bff)
            half = 0x477ff000u; /* 65520, halfway to infinity */
        const uint32_t around[] = {v - 1, v, v + 1, half - 1, half, half + 1};
        for (size_t i = 0; i < NELEMS(around); i++) {
            u[n++] = around[i];
            u[n++] = around[i] | 0x80000000u;
        }
    }
    for (uint32_t m = 1; m < 0x800000u; m += 4093)
        u[n++] = m;
    return n;
}

Test(f16c, narrowing_matches_portable_at_boundaries)
{
    static uint32_t in[0x7c00 * 12 + 0x1000];
    static uint16_t f16c[NELEMS(in)], port[NELEMS(in)];
    size_t n = boundary_patterns(in);

    need_f16c();
    use_portable(0);
    hvd__finish(f16c, in, n, HVD_FLOAT16, HVD_SUM, 1);
    use_portable(1);
    hvd__finish(port, in, n, HVD_FLOAT16, HVD_SUM, 1);
    expect_same_halves(f16c, port, in, n, "F16C vs portable");
    hvd__reduce_force_portable(0);
}

/* Random float32 bit patterns, a third of them infinities, NaNs, float32
 * subnormals or zeros. */
static void fill_patterns(uint32_t *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)rnd();
        switch (i % 6) {
        case 0:
            u[i] = r | 0x7f800000u; /* NaN or infinity */
            break;
        case 1:
            u[i] = r & 0x807fffffu; /* float32 subnormal or zero */
            break;
        default:
            u[i] = r;
            break;
        }
    }
}

Test(f16c, average_and_scale_match_portable)
{
    enum { N = 4099 };
    static uint32_t in[N];
    static uint16_t f16c[N], port[N], half[N];
    const int sizes[] = {1, 2, 3, 7, 1000, 1 << 25};
    const double factors[] = {0.5, 3.0, 1.0 / 3.0, 1e-7, 65504.0};

    need_f16c();
    fill_patterns(in, N);
    for (size_t s = 0; s < NELEMS(sizes); s++) {
        use_portable(0);
        hvd__finish(f16c, in, N, HVD_FLOAT16, HVD_AVERAGE, sizes[s]);
        use_portable(1);
        hvd__finish(port, in, N, HVD_FLOAT16, HVD_AVERAGE, sizes[s]);
        expect_same_halves(f16c, port, in, N, "F16C vs portable");
    }
    for (size_t i = 0; i < N; i++)
        half[i] = (uint16_t)rnd();
    for (size_t f = 0; f < NELEMS(factors); f++) {
        memcpy(f16c, half, sizeof(half));
        memcpy(port, half, sizeof(half));
        use_portable(0);
        hvd__scale(f16c, N, HVD_FLOAT16, factors[f]);
        use_portable(1);
        hvd__scale(port, N, HVD_FLOAT16, factors[f]);
        for (size_t i = 0; i < N; i++)
            cr_assert_eq(f16c[i], port[i],
                         "0x%04x * %g: F16C 0x%04x, portable 0x%04x", half[i],
                         factors[f], f16c[i], port[i]);
    }
    hvd__reduce_force_portable(0);
}

/* The whole pipeline, scaling included, gives the same bytes both ways. */
Test(f16c, pipeline_matches_portable_for_every_dtype_and_op)
{
    const size_t sizes[] = {1, 7, 64, 1003, 5000};

    need_f16c();
    for (size_t d = 0; d < NELEMS(all_dtypes); d++) {
        hvd_dtype dt = all_dtypes[d];
        size_t es = hvd_dtype_size(dt);
        for (size_t s = 0; s < NELEMS(sizes); s++) {
            size_t n = sizes[s];
            void *in[3], *out[2];
            for (int r = 0; r < 3; r++) {
                in[r] = malloc(n * es);
                cr_assert(in[r]);
                fill_random(in[r], n, dt);
            }
            for (size_t o = 0; o < NELEMS(all_ops); o++) {
                for (int p = 0; p < 2; p++) {
                    out[p] = malloc(n * es);
                    cr_assert(out[p]);
                    use_portable(p);
                    run_pipeline(out[p], in, 3, n, dt, all_ops[o]);
                    if (dt == HVD_FLOAT16 || dt == HVD_BFLOAT16 ||
                        dt == HVD_FLOAT32 || dt == HVD_FLOAT64)
                        hvd__scale(out[p], n, dt, 0.37);
                }
                cr_assert_arr_eq(out[0], out[1], n * es, "dtype %d op %d n %zu",
                                 dt, all_ops[o], n);
                free(out[0]);
                free(out[1]);
            }
            for (int r = 0; r < 3; r++)
                free(in[r]);
        }
    }
    hvd__reduce_force_portable(0);
}

/* Integers scale in float64 and truncate toward zero, as Horovod's CPU
 * path does; a factor of 1 leaves them alone. */
Test(reduce, integer_scale_truncates_toward_zero)
{
    int32_t i32[4] = {7, -7, 2147483647, 0};
    hvd__scale(i32, 4, HVD_INT32, 0.5);
    cr_expect_eq(i32[0], 3);
    cr_expect_eq(i32[1], -3);
    cr_expect_eq(i32[2], 1073741823);
    cr_expect_eq(i32[3], 0);
    int64_t i64[2] = {(int64_t)1 << 40, -5};
    hvd__scale(i64, 2, HVD_INT64, 0.25);
    cr_expect_eq(i64[0], (int64_t)1 << 38);
    cr_expect_eq(i64[1], -1);
    uint8_t u8[2] = {255, 3};
    hvd__scale(u8, 2, HVD_UINT8, 0.5);
    cr_expect_eq(u8[0], 127);
    cr_expect_eq(u8[1], 1);
    int8_t i8[2] = {-128, 5};
    hvd__scale(i8, 2, HVD_INT8, 1);
    cr_expect_eq(i8[0], -128);
    cr_expect_eq(i8[1], 5);
    int16_t i16[2] = {1000, -999};
    hvd__scale(i16, 2, HVD_INT16, 0.1);
    cr_expect_eq(i16[0], 100);
    cr_expect_eq(i16[1], -99);
}

/*
 * Converting in place (and, for widening, into a buffer that overlaps the
 * source from above, as hvd__widen allows) gives what separate buffers
 * give, on both paths and over more elements than one bounce block.
 */
Test(reduce, in_place_conversions_on_both_paths)
{
    enum { N = 5000 };
    const hvd_dtype halves[] = {HVD_FLOAT16, HVD_BFLOAT16};
    static uint16_t half[N];
    static float sep[N], buf[N + 1];
    static uint16_t nsep[N];
    int paths = hvd__f16c_supported() ? 2 : 1;

    for (int p = 0; p < paths; p++) {
        /* F16C first where there is one, then the portable loops. */
        use_portable(paths == 1 || p == 1);
        for (size_t h = 0; h < NELEMS(halves); h++) {
            fill_random(half, N, halves[h]);
            hvd__widen(sep, half, N, halves[h]);

            memcpy(buf, half, sizeof(half));
            hvd__widen(buf, buf, N, halves[h]);
            cr_assert_arr_eq(buf, sep, sizeof(sep), "dtype %d path %d",
                             halves[h], p);

            /* The destination one element above the source's start. */
            memcpy(buf, half, sizeof(half));
            hvd__widen(buf + 1, buf, N, halves[h]);
            cr_assert_arr_eq(buf + 1, sep, sizeof(sep), "overlap dtype %d",
                             halves[h]);

            for (int avg = 0; avg < 2; avg++) {
                hvd_op op = avg ? HVD_AVERAGE : HVD_SUM;
                hvd__finish(nsep, sep, N, halves[h], op, 3);
                memcpy(buf, sep, sizeof(sep));
                hvd__finish(buf, buf, N, halves[h], op, 3);
                cr_assert_arr_eq(buf, nsep, sizeof(nsep), "dtype %d op %d",
                                 halves[h], op);
            }
        }
    }
    hvd__reduce_force_portable(0);
}

/*
 * The conversions must not depend on the rounding mode, nor on the
 * flush-to-zero and denormals-are-zero bits of x86's MXCSR: on both paths
 * they give what they give in the default environment.
 */
Test(reduce, conversions_ignore_the_floating_point_environment)
{
    enum { MAX = 0x7c00 * 12 + 0x1000 };
    static uint32_t in[MAX];
    static uint16_t want[MAX], got[MAX], h[0x10000];
    static float wwant[0x10000], wgot[0x10000];
    const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    int paths = hvd__f16c_supported() ? 2 : 1;
    size_t n = boundary_patterns(in);

    cr_assert(n <= MAX);
    for (uint32_t i = 0; i <= 0xffff; i++)
        h[i] = (uint16_t)i;
    /* The default environment's answers, from the portable path. */
    use_portable(1);
    hvd__finish(want, in, n, HVD_FLOAT16, HVD_SUM, 1);
    hvd__widen(wwant, h, NELEMS(h), HVD_FLOAT16);

    for (int p = 0; p < paths; p++) {
        use_portable(p == 0);
        for (size_t m = 0; m < NELEMS(modes); m++) {
            for (int ftz = 0; ftz <= HAVE_MXCSR; ftz++) {
                fenv_t env;
                cr_assert_eq(fegetenv(&env), 0);
                cr_assert_eq(fesetround(modes[m]), 0);
#if HAVE_MXCSR
                if (ftz)
                    _mm_setcsr(_mm_getcsr() | 0x8040u); /* FTZ and DAZ */
#endif
                hvd__finish(got, in, n, HVD_FLOAT16, HVD_SUM, 1);
                hvd__widen(wgot, h, NELEMS(h), HVD_FLOAT16);
                cr_assert_eq(fesetenv(&env), 0);
                char what[64];
                snprintf(what, sizeof(what), "path %d mode %zu ftz %d", p, m,
                         ftz);
                expect_same_halves(got, want, in, n, what);
                cr_assert_arr_eq(wgot, wwant, sizeof(wgot), "widening, %s",
                                 what);
            }
        }
    }
    hvd__reduce_force_portable(0);
}

Test(reduce, identity_leaves_every_value_as_it_is)
{
    /* x op identity == x for every dtype and op, on values that include
     * each type's extremes. */
    hvd_dtype dts[] = {HVD_UINT8,    HVD_INT8,    HVD_INT16,
                       HVD_INT32,    HVD_INT64,   HVD_FLOAT16,
                       HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64};
    hvd_op ops[] = {HVD_SUM, HVD_MIN, HVD_MAX, HVD_PRODUCT};
    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            size_t es = hvd_dtype_size(dts[d]);
            uint8_t x[8 * 4], acc[8 * 4], id[8 * 4], want[8 * 4];
            memset(x, 0, sizeof(x));
            memset(x + es, 0xff, es);     /* -1, or the largest unsigned */
            memset(x + 2 * es, 0x7f, es); /* near the largest */
            memset(x + 3 * es + es - 1, 0x80, 1); /* the least, or -0 */
            if (dts[d] >= HVD_FLOAT16 && dts[d] != HVD_INT16) {
                /* Finite floats (NaN bit patterns would not compare), and
                 * no -0, which a sum with zeros makes +0. */
                hvd__identity(x, 1, dts[d], HVD_PRODUCT);
                memcpy(x + es, x, es);
                x[2 * es - 1] |= 0x80; /* -1 */
                memset(x + 2 * es, 0, es);
                memcpy(x + 3 * es, x + es, es);
            }
            hvd_dtype acc_dt = hvd__acc_dtype(dts[d]);
            hvd__identity(id, 4, dts[d], ops[o]);
            hvd__widen(acc, x, 4, dts[d]);
            uint8_t wid[8 * 4];
            hvd__widen(wid, id, 4, dts[d]);
            hvd__reduce(acc, wid, 4, acc_dt, ops[o]);
            hvd__finish(want, acc, 4, dts[d], ops[o], 1);
            cr_expect(memcmp(want, x, 4 * es) == 0,
                      "dtype %d op %d: x op identity differs from x",
                      (int)dts[d], (int)ops[o]);
        }
}
