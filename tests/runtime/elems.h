/* Test programs' element helpers: dtype and op names, storing a value as an
 * element of any dtype, and the serial reference result (shared by
 * collcheck and mpicheck). */
#ifndef HVD_TEST_ELEMS_H
#define HVD_TEST_ELEMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "hvd.h"
#include "worker/kernels/reduce.h"

/* By dtype value, every dtype; loops run up to ELEMS_LAST_DTYPE. */
static const char *const dt_names[] = {"uint8",   "int8",    "int32",
                                       "int64",   "float16", "bfloat16",
                                       "float32", "float64", "int16"};
#define ELEMS_LAST_DTYPE HVD_INT16
static const char *const op_names[] = {"sum", "average", "min", "max",
                                       "product"};

/* Element i of buf, of type dt, set to v (which fits it). */
static inline void store(void *buf, size_t i, hvd_dtype dt, double v)
{
    switch (dt) {
    case HVD_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v;
        break;
    case HVD_INT8:
        ((int8_t *)buf)[i] = (int8_t)(int64_t)v;
        break;
    case HVD_INT16:
        ((int16_t *)buf)[i] = (int16_t)(int64_t)v;
        break;
    case HVD_INT32:
        ((int32_t *)buf)[i] = (int32_t)(int64_t)v;
        break;
    case HVD_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case HVD_FLOAT16:
        ((uint16_t *)buf)[i] = hvd__f32_to_f16((float)v);
        break;
    case HVD_BFLOAT16:
        ((uint16_t *)buf)[i] = hvd__f32_to_bf16((float)v);
        break;
    case HVD_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case HVD_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    }
}

/* Element i of rank r's input (for op). */
typedef double elems_value_fn(int r, size_t i, hvd_op op);

/* The serial reference of an allreduce over nranks inputs given by f:
 * libhvd's kernels, applied rank by rank in order. */
static inline void elems_reference(void *out, size_t n, hvd_dtype dt, hvd_op op,
                                   int nranks, elems_value_fn *f)
{
    hvd_dtype adt = hvd__acc_dtype(dt);
    size_t es = hvd_dtype_size(dt), aes = hvd_dtype_size(adt);
    uint8_t *in = malloc(n * es + 1), *acc = malloc(n * aes + 1),
            *tmp = malloc(n * aes + 1);
    for (int r = 0; r < nranks; r++) {
        for (size_t i = 0; i < n; i++)
            store(in, i, dt, f(r, i, op));
        hvd__widen(r == 0 ? acc : tmp, in, n, dt);
        if (r > 0)
            hvd__reduce(acc, tmp, n, adt, op);
    }
    hvd__finish(out, acc, n, dt, op, nranks);
    free(in);
    free(acc);
    free(tmp);
}

#endif
