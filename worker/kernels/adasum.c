/* Adasum kernel: Horovod's adaptive sum over a tree, in double. */
#include "worker/kernels/adasum.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kernels/reduce.h"

/* Reads element i of dt at p as a double; exact for every dtype here. */
static double load(const void *p, size_t i, hvd_dtype dt)
{
    switch (dt) {
    case HVD_FLOAT16:
        return hvd__f16_to_f32(((const uint16_t *)p)[i]);
    case HVD_BFLOAT16:
        return hvd__bf16_to_f32(((const uint16_t *)p)[i]);
    case HVD_FLOAT32:
        return ((const float *)p)[i];
    default:
        return ((const double *)p)[i];
    }
}

/*
 * d rounded to float by round-to-odd: truncated towards zero, then the
 * lowest bit set if that lost anything. Rounding this to nearest at 8 or
 * 11 bits (bfloat16, float16) gives what rounding d directly would: float
 * keeps at least two more bits, and the odd bit records that d was not a
 * tie. A plain (float)d could turn a value just above a tie into the tie,
 * which would then round to even, the wrong way.
 */
static float to_odd_float(double d)
{
    float f = (float)d;
    uint32_t u;

    if ((double)f == d || isnan(d))
        return f;
    memcpy(&u, &f, sizeof(u));
    /* A step towards zero; from infinity it lands on FLT_MAX. */
    if (fabs((double)f) > fabs(d))
        u--;
    u |= 1u;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Stores d as element i of dt at p, rounded once. */
static void store(void *p, size_t i, hvd_dtype dt, double d)
{
    switch (dt) {
    case HVD_FLOAT16:
        ((uint16_t *)p)[i] = hvd__f32_to_f16(to_odd_float(d));
        break;
    case HVD_BFLOAT16:
        ((uint16_t *)p)[i] = hvd__f32_to_bf16(to_odd_float(d));
        break;
    case HVD_FLOAT32:
        ((float *)p)[i] = (float)d;
        break;
    default:
        ((double *)p)[i] = d;
        break;
    }
}

/* sqrt(DBL_MIN), exactly: DBL_MIN is 2^-1022. */
#define NORMSQ_MIN 0x1p-511

/* 1 - dot / (2 normsq), or 1 when the norm is too small to divide by. */
static double coeff(double dot, double normsq)
{
    return normsq < NORMSQ_MIN ? 1.0 : 1.0 - dot / (2.0 * normsq);
}

/* a = Adasum(a, b) over elements [lo, hi). */
static void combine(double *a, const double *b, size_t lo, size_t hi)
{
    double dot = 0, aa = 0, bb = 0;

    for (size_t i = lo; i < hi; i++) {
        dot += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    double ca = coeff(dot, aa), cb = coeff(dot, bb);
    for (size_t i = lo; i < hi; i++)
        a[i] = ca * a[i] + cb * b[i];
}

/* Whether bounds starts at 0, ends at count and never goes back. */
static int valid_bounds(const size_t *bounds, size_t nseg, size_t count)
{
    if (nseg < 1 || bounds[0] != 0 || bounds[nseg] != count)
        return 0;
    for (size_t s = 0; s < nseg; s++)
        if (bounds[s] > bounds[s + 1])
            return 0;
    return 1;
}

int hvd__adasum(void *out, const void *in, size_t count, hvd_dtype dt, int n,
                const size_t *bounds, size_t nseg)
{
    const size_t whole[2] = {0, count};
    double *w;

    if (dt != HVD_FLOAT16 && dt != HVD_BFLOAT16 && dt != HVD_FLOAT32 &&
        dt != HVD_FLOAT64)
        return HVD_EINVAL;
    if (n < 1 || (n & (n - 1)) != 0)
        return HVD_EINVAL;
    if (!bounds) {
        bounds = whole;
        nseg = 1;
    }
    if (!valid_bounds(bounds, nseg, count))
        return HVD_EINVAL;
    if (count == 0)
        return 0;
    /* One vector is its own Adasum: copy its bits, NaN payloads too. */
    if (n == 1) {
        memcpy(out, in, count * hvd_dtype_size(dt));
        return 0;
    }
    if (count > SIZE_MAX / sizeof(double) / (size_t)n)
        return HVD_ENOMEM;
    w = malloc((size_t)n * count * sizeof(double));
    if (!w)
        return HVD_ENOMEM;
    for (size_t i = 0; i < (size_t)n * count; i++)
        w[i] = load(in, i, dt);
    /* Level by level, vector r absorbs vector r + step into its slot. */
    for (int step = 1; step < n; step *= 2)
        for (int r = 0; r < n; r += 2 * step)
            for (size_t s = 0; s < nseg; s++)
                combine(w + (size_t)r * count, w + (size_t)(r + step) * count,
                        bounds[s], bounds[s + 1]);
    for (size_t i = 0; i < count; i++)
        store(out, i, dt, w[i]);
    free(w);
    return 0;
}
