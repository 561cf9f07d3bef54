/* Test programs' element helpers: dtype and op names, and storing a value
 * as an element of any dtype (shared by collcheck and mpicheck). */
#ifndef HVD_TEST_ELEMS_H
#define HVD_TEST_ELEMS_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"
#include "reduce.h"

static const char *const dt_names[] = {"uint8",   "int8",    "int32",
                                       "int64",   "float16", "bfloat16",
                                       "float32", "float64"};
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

#endif
