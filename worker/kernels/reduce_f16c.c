/* float16 conversion loops on the F16C instructions, chosen at run time. */
#include "worker/kernels/reduce.h"

#if HVD_REDUCE_X86

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

/*
 * Only these functions are compiled for F16C (and AVX, whose registers
 * the 8-wide forms use), through a target attribute rather than a flag
 * for the whole file or library, so the rest of the library stays
 * baseline x86 and nothing here runs unless hvd__f16c_supported() says
 * so.
 */
#define F16C __attribute__((target("avx,f16c")))

/*
 * The conversions round to nearest even whatever the MXCSR rounding mode
 * (imm8 bit 2 clear selects the rounding in imm8), turn a signalling NaN
 * quiet and keep its payload's top bits, and neither flush float16
 * subnormals to zero nor depend on DAZ for them, which is what the
 * portable code does; the unit tests check it bit for bit.
 */
#define RNE _MM_FROUND_TO_NEAREST_INT

int hvd__f16c_supported(void)
{
    unsigned int a, b, c, d;

    /*
     * The "avx" test includes the OS's saving of the YMM registers. F16C
     * is read from CPUID directly, because Clang (before 16) does not
     * know "f16c" as a __builtin_cpu_supports feature.
     */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx") || !__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c & bit_F16C) != 0;
}

F16C static inline __m256 load8(const uint16_t *s)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)s));
}

F16C static inline void store8(uint16_t *d, __m256 v)
{
    _mm_storeu_si128((__m128i *)d, _mm256_cvtps_ph(v, RNE));
}

F16C void hvd__f16c_widen(float *restrict a, const uint16_t *restrict s,
                          size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(a + i, load8(s + i));
    if (i < n) {
        /* The last 1 to 7 elements, through a zero-padded copy. */
        uint16_t h[8] = {0};
        float f[8];
        memcpy(h, s + i, (n - i) * sizeof(*s));
        _mm256_storeu_ps(f, load8(h));
        memcpy(a + i, f, (n - i) * sizeof(*a));
    }
}

F16C void hvd__f16c_narrow(uint16_t *restrict d, const float *restrict a,
                           size_t n, float size)
{
    __m256 s = _mm256_set1_ps(size);
    int average = size != 1.0f;
    size_t i = 0;

    /*
     * The division is IEEE float32 division, as in the portable code. One
     * by 1 is skipped: it is exact, and the only bits it changes (a
     * signalling NaN turns quiet, a float32 subnormal becomes zero under
     * DAZ) narrow to the same float16 anyway.
     */
    if (average) {
        for (; i + 8 <= n; i += 8)
            store8(d + i, _mm256_div_ps(_mm256_loadu_ps(a + i), s));
    } else {
        for (; i + 8 <= n; i += 8)
            store8(d + i, _mm256_loadu_ps(a + i));
    }
    if (i < n) {
        float f[8] = {0};
        uint16_t h[8];
        memcpy(f, a + i, (n - i) * sizeof(*a));
        __m256 v = _mm256_loadu_ps(f);
        store8(h, average ? _mm256_div_ps(v, s) : v);
        memcpy(d + i, h, (n - i) * sizeof(*d));
    }
}

#else

/* Other architectures always take the portable loops. */
int hvd__f16c_supported(void)
{
    return 0;
}

#endif
