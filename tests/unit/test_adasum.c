/* Unit tests for worker/kernels/adasum.c: Horovod's Adasum in a tree. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "worker/kernels/adasum.h"
#include "worker/kernels/reduce.h"

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The pair formula, written out here in the plainest way, so that the
 * tree tests do not reuse the module's code: out = ca a + cb b.
 */
static void ref_pair(double *out, const double *a, const double *b, size_t k)
{
    double dot = 0, aa = 0, bb = 0;

    for (size_t i = 0; i < k; i++) {
        dot += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    double ca = aa < sqrt(0x1p-1022) ? 1 : 1 - dot / (2 * aa);
    double cb = bb < sqrt(0x1p-1022) ? 1 : 1 - dot / (2 * bb);
    for (size_t i = 0; i < k; i++)
        out[i] = ca * a[i] + cb * b[i];
}

/* Runs the kernel on n float64 vectors of k elements, one tensor. */
static void adasum_f64(double *out, const double *in, size_t k, int n)
{
    cr_assert_eq(hvd__adasum(out, in, k, HVD_FLOAT64, n, NULL, 0), 0);
}

Test(adasum, orthogonal_vectors_add)
{
    const double in[] = {1, 2, 0, /* b */ -2, 1, 0};
    double out[3];

    adasum_f64(out, in, 3, 2);
    cr_expect(out[0] == -1 && out[1] == 3 && out[2] == 0, "%g %g %g", out[0],
              out[1], out[2]);
}

Test(adasum, equal_vectors_give_the_vector)
{
    /* a.b = |a|^2 = |b|^2: both coefficients are 1/2. */
    const double in[] = {1.5, -2, 4, 1.5, -2, 4};
    double out[3];

    adasum_f64(out, in, 3, 2);
    for (int i = 0; i < 3; i++)
        cr_expect(out[i] == in[i], "element %d: %g", i, out[i]);
}

Test(adasum, a_zero_vector_gives_the_other)
{
    const double zero_first[] = {0, 0, 3, -4};
    const double zero_second[] = {3, -4, 0, 0};
    double out[2];

    adasum_f64(out, zero_first, 2, 2);
    cr_expect(out[0] == 3 && out[1] == -4, "%g %g", out[0], out[1]);
    adasum_f64(out, zero_second, 2, 2);
    cr_expect(out[0] == 3 && out[1] == -4, "%g %g", out[0], out[1]);
}

Test(adasum, float32_orthogonal_vectors_add)
{
    const float in[] = {1, 2, -2, 1};
    float out[2];

    cr_assert_eq(hvd__adasum(out, in, 2, HVD_FLOAT32, 2, NULL, 0), 0);
    cr_expect(out[0] == -1 && out[1] == 3, "%g %g", out[0], out[1]);
}

Test(adasum, four_vectors_follow_the_binary_tree)
{
    const double in[] = {1, 0, 2, 0, 1, 1, 1, 1, 0, -1, 2, 1};
    double p01[3], p23[3], want[3], other[3], out[3];

    ref_pair(p01, in, in + 3, 3);
    ref_pair(p23, in + 6, in + 9, 3);
    ref_pair(want, p01, p23, 3);
    /* Pairing (0,2), (1,3) instead gives something else: the order shows. */
    ref_pair(p01, in, in + 6, 3);
    ref_pair(p23, in + 3, in + 9, 3);
    ref_pair(other, p01, p23, 3);
    cr_assert(fabs(other[0] - want[0]) > 0.1);

    adasum_f64(out, in, 3, 4);
    for (int i = 0; i < 3; i++)
        cr_expect(fabs(out[i] - want[i]) <= 1e-14 * fabs(want[i]),
                  "element %d: got %a want %a", i, out[i], want[i]);
}

Test(adasum, segments_combine_separately)
{
    /*
     * Per tensor: [1, 0] with itself gives [1, 0]; [1, 1] and [-1, 1] are
     * orthogonal and give [0, 2]. As one vector, a.b = 1 and both norms
     * are 3, which would give 5/6 (a + b) = [5/3, 0, 0, 5/3].
     */
    const double in[] = {1, 0, 1, 1, /* b */ 1, 0, -1, 1};
    const size_t bounds[] = {0, 2, 4};
    const double want[] = {1, 0, 0, 2};
    double out[4];

    cr_assert_eq(hvd__adasum(out, in, 4, HVD_FLOAT64, 2, bounds, 2), 0);
    for (int i = 0; i < 4; i++)
        cr_expect(out[i] == want[i], "element %d: %g", i, out[i]);
    adasum_f64(out, in, 4, 2);
    cr_expect(fabs(out[0] - 5.0 / 3) < 1e-15 && out[2] == 0, "%g %g", out[0],
              out[2]);
}

/*
 * Inputs, found by search, whose result lies just off a tie of the half
 * type but rounds to that tie in float32: rounding through float32 would
 * take the even neighbour instead of the nearest one.
 */
Test(adasum, float16_rounds_once)
{
    /* a = [24, 58], b = [-78, -20]: element 1 is 0x1.bd2000387a5cap+5. */
    const double d[] = {24, 58, -78, -20};
    uint16_t in[4], out[2];
    double want[2];

    for (int i = 0; i < 4; i++)
        in[i] = hvd__f32_to_f16((float)d[i]);
    ref_pair(want, d, d + 2, 2);
    cr_assert_eq(hvd__f32_to_f16((float)want[1]), 0x52f4);
    cr_assert_eq(hvd__adasum(out, in, 2, HVD_FLOAT16, 2, NULL, 0), 0);
    cr_expect_eq(out[1], 0x52f5, "got 0x%04x", out[1]);
    cr_expect_eq(out[0], hvd__f32_to_f16((float)want[0]));
}

Test(adasum, bfloat16_rounds_once)
{
    /* a = [178, 62], b = [-248, 44]: element 1 is 0x1.3900005e53709p+7. */
    const double d[] = {178, 62, -248, 44};
    uint16_t in[4], out[2];
    double want[2];

    for (int i = 0; i < 4; i++)
        in[i] = hvd__f32_to_bf16((float)d[i]);
    ref_pair(want, d, d + 2, 2);
    cr_assert_eq(hvd__f32_to_bf16((float)want[1]), 0x431c);
    cr_assert_eq(hvd__adasum(out, in, 2, HVD_BFLOAT16, 2, NULL, 0), 0);
    cr_expect_eq(out[1], 0x431d, "got 0x%04x", out[1]);
    cr_expect_eq(out[0], hvd__f32_to_bf16((float)want[0]));
}

Test(adasum, one_vector_is_copied)
{
    /* A signalling NaN keeps its bits: nothing is converted. */
    const uint16_t in[] = {0x3c00, 0x7c01, 0x8001};
    uint16_t out[3];

    cr_assert_eq(hvd__adasum(out, in, 3, HVD_FLOAT16, 1, NULL, 0), 0);
    cr_expect(memcmp(out, in, sizeof(in)) == 0);
}

Test(adasum, same_input_same_bits)
{
    double in[8 * 33], a[33], b[33];

    for (size_t i = 0; i < NELEMS(in); i++)
        in[i] = sin((double)i) * 1e3;
    adasum_f64(a, in, 33, 8);
    adasum_f64(b, in, 33, 8);
    cr_expect(memcmp(a, b, sizeof(a)) == 0);
}

Test(adasum, bad_arguments)
{
    const double in[6] = {1, 2, 3, 4, 5, 6};
    const int32_t ints[4] = {1, 2, 3, 4};
    const size_t short_bounds[] = {0, 1};
    const size_t backwards[] = {0, 2, 1, 2};
    double out[2];
    int32_t iout[2];

    cr_expect_eq(hvd__adasum(out, in, 2, HVD_FLOAT64, 3, NULL, 0), HVD_EINVAL);
    cr_expect_eq(hvd__adasum(out, in, 2, HVD_FLOAT64, 0, NULL, 0), HVD_EINVAL);
    cr_expect_eq(hvd__adasum(iout, ints, 2, HVD_INT32, 2, NULL, 0), HVD_EINVAL);
    cr_expect_eq(hvd__adasum(out, in, 2, HVD_FLOAT64, 2, short_bounds, 1),
                 HVD_EINVAL);
    cr_expect_eq(hvd__adasum(out, in, 2, HVD_FLOAT64, 2, backwards, 3),
                 HVD_EINVAL);
}
