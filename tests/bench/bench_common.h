/* The driver shared by hvd_bench and mpi_bench: one table, two backends. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>

/*
 * The benchmark's own names for types and operations, so that this driver
 * compiles without hvd.h or mpi.h; each backend maps them to its library.
 */
enum bench_dtype {
    BENCH_UINT8,
    BENCH_INT8,
    BENCH_INT32,
    BENCH_INT64,
    BENCH_FLOAT16,
    BENCH_BFLOAT16,
    BENCH_FLOAT32,
    BENCH_FLOAT64,
    BENCH_NDTYPES
};

enum bench_op {
    BENCH_SUM,
    BENCH_AVERAGE,
    BENCH_MIN,
    BENCH_MAX,
    BENCH_PRODUCT,
    BENCH_NOPS
};

enum bench_coll { BENCH_ALLREDUCE, BENCH_BROADCAST, BENCH_ALLGATHER };

/*
 * CUDA device memory for -G, --device: the send and receive buffers live
 * on the GPU, and the driver fills and checks them through host copies.
 * Each call finishes its work before it returns, and returns NULL on
 * success, else a one-line description of the failure.
 */
struct bench_device {
    /* Selects this rank's device, once, after init(). */
    const char *(*open)(void);
    const char *(*alloc)(void **p, size_t bytes);
    void (*free)(void *p);
    /* Copies between host and device memory, either way. */
    const char *(*copy)(void *dst, const void *src, size_t bytes);
    const char *(*fill)(void *p, int byte, size_t bytes);
};

/*
 * What a communication library provides to the driver. Every function
 * returns 0 on success and nonzero on failure; error() then describes the
 * failure in one line.
 */
struct bench_backend {
    const char *prog;    /* program name for messages, e.g. "hvd_bench" */
    const char *library; /* what is measured, e.g. "libhvd" */
    int (*init)(int *argc, char ***argv);
    void (*finalize)(void);
    int (*rank)(void);
    int (*size)(void);
    /* NULL when the combination is supported, else why it is not. */
    const char *(*unsupported)(enum bench_coll coll, enum bench_dtype dt,
                               enum bench_op op);
    int (*barrier)(void);
    int (*allreduce)(const void *send, void *recv, size_t count,
                     enum bench_dtype dt, enum bench_op op);
    int (*broadcast)(void *buf, size_t count, enum bench_dtype dt, int root);
    /*
     * Gathers count elements from every rank. recv has room for count *
     * size elements; a library that allocates the result itself sets *out
     * to its own buffer instead, and release() gives it back.
     */
    int (*allgather)(const void *send, size_t count, enum bench_dtype dt,
                     void *recv, void **out);
    void (*release)(void *out);
    const char *(*error)(int rc);
    /*
     * NULL when the library takes host memory only. With -G, allgather's
     * *out is device memory, which device->free() gives back.
     */
    const struct bench_device *device;
};

/* Parses the options, runs the sizes and prints the table on rank 0. */
int bench_main(int argc, char **argv, const struct bench_backend *be);

/* A byte count with an optional K, M or G (binary) suffix: 0, or -1 when
 * s is not one. */
int bench_parse_bytes(const char *s, size_t *out);

#endif
