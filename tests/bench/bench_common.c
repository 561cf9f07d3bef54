/* Options, rotating buffers, timing, checks and the nccl-tests table. */
#include "bench_common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const dtype_names[BENCH_NDTYPES] = {
    "uint8",   "int8",     "int32",   "int64",
    "float16", "bfloat16", "float32", "float64"};
static const size_t dtype_sizes[BENCH_NDTYPES] = {1, 1, 4, 8, 2, 2, 4, 8};
static const char *const op_names[BENCH_NOPS] = {"sum", "average", "min", "max",
                                                 "product"};
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather"};

/*
 * Buffers are rotated over at least this many bytes by default: twice the
 * 32 MiB last-level cache of the machines this runs on, so that every
 * iteration reads memory rather than a cache that a real training step,
 * which touches far more data between two reductions, would not have.
 */
#define DEFAULT_ROTATE ((size_t)64 << 20)
#define SLOT_ALIGN 64

struct opts {
    size_t minbytes, maxbytes, rotate;
    double step;
    enum bench_op op;
    enum bench_dtype dtype;
    enum bench_coll coll;
    int iters, warmup, check, inplace, root;
    int device; /* -G: buffers in CUDA device memory */
};

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options]\n"
            "  -b, --minbytes N    smallest message (default 8; K, M, G "
            "suffixes)\n"
            "  -e, --maxbytes N    largest message (default 64M)\n"
            "  -f, --stepfactor F  size multiplier between rows (default 2)\n"
            "  -o, --op OP         sum, average, min, max, product "
            "(default sum)\n"
            "  -d, --dtype T       uint8 int8 int32 int64 float16 bfloat16 "
            "float32\n"
            "                      float64 (default float32)\n"
            "  -n, --iters N       timed iterations per size (default 20)\n"
            "  -w, --warmup N      untimed iterations per size (default 5)\n"
            "  -c, --check 0|1     count wrong elements (default 1)\n"
            "  -t, --collective C  allreduce, broadcast, allgather "
            "(default allreduce)\n"
            "  -r, --root R        broadcast root (default 0)\n"
            "  -I, --inplace 0|1   allreduce in place (default 0)\n"
            "  -R, --rotate N      rotate buffers over N bytes (default "
            "64M)\n"
            "  -G, --device        send and receive buffers in CUDA device "
            "memory (a\n"
            "                      build with CUDA only)\n"
            "  -h, --help          print this help\n"
            "size is the message per rank for allreduce and broadcast and "
            "the gathered\nresult for allgather, as in nccl-tests.\n",
            prog);
}

int bench_parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > INT32_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* 0 to go on, 1 to exit successfully (--help), -1 on a bad option. */
static int parse_opts(int argc, char **argv, const char *prog, int rank,
                      struct opts *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"op", required_argument, NULL, 'o'},
        {"dtype", required_argument, NULL, 'd'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"collective", required_argument, NULL, 't'},
        {"root", required_argument, NULL, 'r'},
        {"inplace", required_argument, NULL, 'I'},
        {"rotate", required_argument, NULL, 'R'},
        {"device", no_argument, NULL, 'G'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    /* Only rank 0 complains, so that a bad option is reported once. */
    FILE *err = rank == 0 ? stderr : NULL;
    int c, v;

    *o = (struct opts){.minbytes = 8,
                       .maxbytes = (size_t)64 << 20,
                       .rotate = DEFAULT_ROTATE,
                       .step = 2,
                       .op = BENCH_SUM,
                       .dtype = BENCH_FLOAT32,
                       .coll = BENCH_ALLREDUCE,
                       .iters = 20,
                       .warmup = 5,
                       .check = 1};
    opterr = 0;
    while ((c = getopt_long(argc, argv, "b:e:f:o:d:n:w:c:t:r:I:R:Gh", longopts,
                            NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'b':
            bad = bench_parse_bytes(optarg, &o->minbytes);
            break;
        case 'e':
            bad = bench_parse_bytes(optarg, &o->maxbytes);
            break;
        case 'R':
            bad = bench_parse_bytes(optarg, &o->rotate);
            break;
        case 'f': {
            char *end;
            o->step = strtod(optarg, &end);
            bad = *end != '\0' || !(o->step > 1.0);
            break;
        }
        case 'o':
            bad = (v = lookup(optarg, op_names, BENCH_NOPS)) < 0;
            o->op = (enum bench_op)v;
            break;
        case 'd':
            bad = (v = lookup(optarg, dtype_names, BENCH_NDTYPES)) < 0;
            o->dtype = (enum bench_dtype)v;
            break;
        case 't':
            bad = (v = lookup(optarg, coll_names, 3)) < 0;
            o->coll = (enum bench_coll)v;
            break;
        case 'n':
            bad = parse_int(optarg, 1, &o->iters);
            break;
        case 'w':
            bad = parse_int(optarg, 0, &o->warmup);
            break;
        case 'c':
            bad = parse_int(optarg, 0, &o->check) || o->check > 1;
            break;
        case 'I':
            bad = parse_int(optarg, 0, &o->inplace) || o->inplace > 1;
            break;
        case 'r':
            bad = parse_int(optarg, 0, &o->root);
            break;
        case 'G':
            o->device = 1;
            break;
        case 'h':
            if (rank == 0)
                usage(stdout, prog);
            return 1;
        default:
            if (err)
                fprintf(err, "%s: unknown option or missing argument\n", prog);
            return -1;
        }
        if (bad) {
            if (err)
                fprintf(err, "%s: bad value '%s' for -%c; see --help\n", prog,
                        optarg, c);
            return -1;
        }
    }
    if (optind < argc || o->minbytes > o->maxbytes) {
        if (err)
            fprintf(err, "%s: %s; see --help\n", prog,
                    optind < argc ? "unexpected argument"
                                  : "minbytes is larger than maxbytes");
        return -1;
    }
    return 0;
}

/* IEEE binary16 from float32, rounding to nearest even. */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) /* 65520 and up round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a binary16 subnormal */
        uint32_t e = ax >> 23;
        if (e < 102)
            return (uint16_t)sign;
        uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    ax += 0xfffu + ((ax >> 13) & 1);
    return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
}

/* bfloat16 from float32, rounding to nearest even. */
static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/*
 * Input element i of rank r. Small integers, as in nccl-tests, so that
 * every dtype holds them and every order of reduction gives the same exact
 * result: sums stay within a few times the rank count, and products are
 * +-1 times at most 2^4, well inside int8 and float16.
 */
static int64_t input(int r, size_t i, enum bench_op op, enum bench_dtype dt)
{
    if (op == BENCH_PRODUCT) {
        int64_t v = (i * 3 + (size_t)r) % 5 == 0 ? -1 : 1;
        if (r < 4 && (i + (size_t)r) % 4 == 0)
            v *= 2;
        return v;
    }
    int64_t v = (int64_t)((i * 7 + (size_t)r * 13) % 5);
    return dt == BENCH_UINT8 ? v : v - 2;
}

/*
 * Stores the integer v as element i; integers wrap as C's unsigned
 * conversions do, which is also how the libraries' integer sums wrap.
 */
static void store(void *buf, size_t i, enum bench_dtype dt, int64_t v)
{
    switch (dt) {
    case BENCH_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case BENCH_INT8:
        ((int8_t *)buf)[i] = (int8_t)(uint8_t)v;
        break;
    case BENCH_INT32:
        ((int32_t *)buf)[i] = (int32_t)(uint32_t)v;
        break;
    case BENCH_INT64:
        ((int64_t *)buf)[i] = v;
        break;
    case BENCH_FLOAT16:
        ((uint16_t *)buf)[i] = f32_to_f16((float)v);
        break;
    case BENCH_BFLOAT16:
        ((uint16_t *)buf)[i] = f32_to_bf16((float)v);
        break;
    case BENCH_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case BENCH_FLOAT64:
        ((double *)buf)[i] = (double)v;
        break;
    default:
        break;
    }
}

/*
 * The expected average of an exact sum over n ranks, element 0 of out:
 * integers wrap to their type and then divide with truncation, floats
 * divide once in their type (float32 for the 16-bit types) and round once,
 * which is what "average divides once, at the end" means.
 */
static void store_average(void *out, enum bench_dtype dt, int64_t sum, int n)
{
    switch (dt) {
    case BENCH_UINT8:
        *(uint8_t *)out = (uint8_t)((uint8_t)sum / n);
        break;
    case BENCH_INT8:
        *(int8_t *)out = (int8_t)((int8_t)(uint8_t)sum / n);
        break;
    case BENCH_INT32:
        *(int32_t *)out = (int32_t)(uint32_t)sum / n;
        break;
    case BENCH_INT64:
        *(int64_t *)out = sum / n;
        break;
    case BENCH_FLOAT16:
        *(uint16_t *)out = f32_to_f16((float)sum / (float)n);
        break;
    case BENCH_BFLOAT16:
        *(uint16_t *)out = f32_to_bf16((float)sum / (float)n);
        break;
    case BENCH_FLOAT32:
        *(float *)out = (float)sum / (float)n;
        break;
    case BENCH_FLOAT64:
        *(double *)out = (double)sum / (double)n;
        break;
    default:
        break;
    }
}

/* Counts elements of got that differ bitwise from the reduced inputs. */
static int64_t check_allreduce(const void *got, size_t count,
                               enum bench_dtype dt, enum bench_op op, int n)
{
    size_t es = dtype_sizes[dt];
    int64_t wrong = 0;
    unsigned char want[8];

    for (size_t i = 0; i < count; i++) {
        int64_t acc = input(0, i, op, dt);
        for (int r = 1; r < n; r++) {
            int64_t v = input(r, i, op, dt);
            switch (op) {
            case BENCH_SUM:
            case BENCH_AVERAGE:
                acc += v;
                break;
            case BENCH_MIN:
                acc = v < acc ? v : acc;
                break;
            case BENCH_MAX:
                acc = v > acc ? v : acc;
                break;
            case BENCH_PRODUCT:
                acc *= v;
                break;
            default:
                break;
            }
        }
        if (op == BENCH_AVERAGE)
            store_average(want, dt, acc, n);
        else
            store(want, 0, dt, acc);
        wrong += memcmp(want, (const unsigned char *)got + i * es, es) != 0;
    }
    return wrong;
}

/* Counts elements of got that differ from rank r's input, for each r. */
static int64_t check_copy(const void *got, size_t count, enum bench_dtype dt,
                          int first_rank, int nranks)
{
    size_t es = dtype_sizes[dt];
    int64_t wrong = 0;
    unsigned char want[8];
    const unsigned char *p = got;

    for (int r = first_rank; r < first_rank + nranks; r++)
        for (size_t i = 0; i < count; i++, p += es) {
            store(want, 0, dt, input(r, i, BENCH_SUM, dt));
            wrong += memcmp(want, p, es) != 0;
        }
    return wrong;
}

static void fill(void *buf, size_t count, enum bench_dtype dt, enum bench_op op,
                 int rank)
{
    for (size_t i = 0; i < count; i++)
        store(buf, i, dt, input(rank, i, op, dt));
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * One size's buffers: nslots slots of stride bytes each, per role. With
 * dev set, send and recv are device memory, and host is where inputs are
 * made and results checked, one slot's worth.
 */
struct bufs {
    unsigned char *send, *recv, *host;
    size_t send_stride, recv_stride, nslots;
    const struct bench_device *dev;
};

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static void bufs_free(struct bufs *b)
{
    if (b->dev != NULL) {
        b->dev->free(b->send);
        b->dev->free(b->recv);
    } else {
        free(b->send);
        free(b->recv);
    }
    free(b->host);
    memset(b, 0, sizeof(*b));
}

/* The device buffers of bufs_alloc: NULL, or why they could not be made. */
static const char *bufs_alloc_device(struct bufs *b, const struct opts *o,
                                     size_t send_bytes, int rank)
{
    const struct bench_device *dev = b->dev;
    size_t es = dtype_sizes[o->dtype];
    size_t host_bytes =
        b->send_stride > b->recv_stride ? b->send_stride : b->recv_stride;
    void *send = NULL, *recv = NULL;
    const char *why = dev->alloc(&send, b->nslots * b->send_stride);
    b->send = send;
    if (why == NULL)
        why = dev->alloc(&recv, b->nslots * b->recv_stride);
    b->recv = recv;
    if (why != NULL)
        return why;
    b->host = malloc(host_bytes);
    if (b->host == NULL)
        return "out of memory";
    fill(b->host, send_bytes / es, o->dtype, o->op, rank);
    for (size_t s = 0; s < b->nslots && why == NULL; s++)
        why = dev->copy(b->send + s * b->send_stride, b->host, send_bytes);
    if (why == NULL)
        why = dev->fill(b->recv, 0, b->nslots * b->recv_stride);
    return why;
}

/*
 * Allocates enough slots that one pass over them covers o->rotate bytes
 * (but no more slots than there are iterations to use them), and writes
 * every byte so that no page fault lands in the timed loop. Returns NULL,
 * or why the buffers could not be made.
 */
static const char *bufs_alloc(struct bufs *b, const struct opts *o,
                              size_t send_bytes, size_t recv_bytes, int rank,
                              const struct bench_device *dev)
{
    memset(b, 0, sizeof(*b));
    b->send_stride = round_up(send_bytes ? send_bytes : 1, SLOT_ALIGN);
    b->recv_stride = round_up(recv_bytes ? recv_bytes : 1, SLOT_ALIGN);
    size_t per_slot = b->send_stride + b->recv_stride;
    size_t want = (o->rotate + per_slot - 1) / per_slot;
    size_t most = (size_t)o->iters + (size_t)o->warmup;
    b->nslots = want < 1 ? 1 : want > most ? most : want;
    b->dev = dev;
    if (dev != NULL) {
        const char *why = bufs_alloc_device(b, o, send_bytes, rank);
        if (why != NULL)
            bufs_free(b);
        return why;
    }
    b->send = aligned_alloc(4096, round_up(b->nslots * b->send_stride, 4096));
    b->recv = aligned_alloc(4096, round_up(b->nslots * b->recv_stride, 4096));
    if (b->send == NULL || b->recv == NULL) {
        bufs_free(b);
        return "out of memory";
    }
    size_t es = dtype_sizes[o->dtype];
    for (size_t s = 0; s < b->nslots; s++)
        fill(b->send + s * b->send_stride, send_bytes / es, o->dtype, o->op,
             rank);
    memset(b->recv, 0, b->nslots * b->recv_stride);
    return NULL;
}

struct run {
    const struct bench_backend *be;
    const struct opts *o;
    struct bufs *b;
    size_t count; /* elements per rank (sent, for allgather) */
    int rank, size;
    const struct bench_device *dev; /* with -G */
    const char *why;                /* what a device call said, on failure */
};

/* The code a failed device call returns; x->why says what went wrong. */
#define DEVICE_FAILED INT_MIN

/* Gives back allgather's result, which is device memory with -G. */
static void release_out(const struct run *x, void *out)
{
    if (x->dev != NULL)
        x->dev->free(out);
    else
        x->be->release(out);
}

/* Copies n bytes of inputs made at src on the host to dst (device only). */
static int upload(struct run *x, void *dst, const void *src, size_t n)
{
    if (x->dev == NULL || n == 0)
        return 0;
    x->why = x->dev->copy(dst, src, n);
    return x->why != NULL ? DEVICE_FAILED : 0;
}

/* Fills n bytes of a buffer with all-ones, on the host or the device. */
static int poison(struct run *x, void *p, size_t n)
{
    if (x->dev == NULL) {
        memset(p, 0xff, n);
        return 0;
    }
    x->why = x->dev->fill(p, 0xff, n);
    return x->why != NULL ? DEVICE_FAILED : 0;
}

/* Points *got at n bytes of results: src, or a host copy of it. */
static int readback(struct run *x, const void **got, const void *src, size_t n)
{
    *got = src;
    if (x->dev == NULL || n == 0)
        return 0;
    x->why = x->dev->copy(x->b->host, src, n);
    *got = x->b->host;
    return x->why != NULL ? DEVICE_FAILED : 0;
}

/* One collective on slot k of the buffers. */
static int run_once(const struct run *x, size_t k)
{
    const struct bench_backend *be = x->be;
    const struct opts *o = x->o;
    unsigned char *send = x->b->send + k * x->b->send_stride;
    unsigned char *recv = x->b->recv + k * x->b->recv_stride;
    void *out = NULL;
    int rc;

    switch (o->coll) {
    case BENCH_ALLREDUCE:
        return be->allreduce(send, o->inplace ? send : recv, x->count, o->dtype,
                             o->op);
    case BENCH_BROADCAST:
        return be->broadcast(send, x->count, o->dtype, o->root);
    case BENCH_ALLGATHER:
        rc = be->allgather(send, x->count, o->dtype, recv, &out);
        if (rc == 0)
            release_out(x, out);
        return rc;
    }
    return -1;
}

/*
 * Runs the collective once more on slot 0 with fresh inputs and a
 * poisoned output, and counts this rank's wrong elements. With -G the
 * inputs are made on the host and copied to the device, and the results
 * copied back to be checked.
 */
static int check_once(struct run *x, int64_t *wrong)
{
    const struct bench_backend *be = x->be;
    const struct opts *o = x->o;
    enum bench_dtype dt = o->dtype;
    size_t es = dtype_sizes[dt], bytes = x->count * es;
    unsigned char *send = x->b->send, *recv = x->b->recv;
    /* Where inputs are made: send itself, or the host copy for -G. */
    unsigned char *in = x->dev != NULL ? x->b->host : send;
    unsigned char *dst = o->inplace ? send : recv;
    const void *got = NULL;
    void *out = NULL;
    int rc = 0;

    /* All-ones bytes are NaN in every float type: never a right answer. */
    switch (o->coll) {
    case BENCH_ALLREDUCE:
        fill(in, x->count, dt, o->op, x->rank);
        if ((rc = upload(x, send, in, bytes)) != 0 ||
            (!o->inplace && (rc = poison(x, recv, bytes)) != 0) ||
            (rc = be->allreduce(send, dst, x->count, dt, o->op)) != 0 ||
            (rc = readback(x, &got, dst, bytes)) != 0)
            break;
        *wrong = check_allreduce(got, x->count, dt, o->op, x->size);
        break;
    case BENCH_BROADCAST:
        if (x->rank == o->root) {
            fill(in, x->count, dt, BENCH_SUM, x->rank);
            rc = upload(x, send, in, bytes);
        } else {
            rc = poison(x, send, bytes);
        }
        if (rc != 0 || (rc = be->broadcast(send, x->count, dt, o->root)) != 0 ||
            (rc = readback(x, &got, send, bytes)) != 0)
            break;
        *wrong = check_copy(got, x->count, dt, o->root, 1);
        break;
    case BENCH_ALLGATHER:
        fill(in, x->count, dt, BENCH_SUM, x->rank);
        if ((rc = upload(x, send, in, bytes)) != 0 ||
            (rc = poison(x, recv, bytes * (size_t)x->size)) != 0 ||
            (rc = be->allgather(send, x->count, dt, recv, &out)) != 0)
            break;
        rc = readback(x, &got, out, bytes * (size_t)x->size);
        if (rc == 0)
            *wrong = check_copy(got, x->count, dt, 0, x->size);
        release_out(x, out);
        break;
    }
    return rc;
}

static int fail(const struct run *x, const char *what, size_t bytes, int rc)
{
    fprintf(stderr, "%s: rank %d: %s of %zu bytes failed: %s\n", x->be->prog,
            x->rank, what, bytes,
            rc == DEVICE_FAILED ? x->why : x->be->error(rc));
    return -1;
}

/*
 * Times o->iters collectives of one size after o->warmup untimed ones. The
 * reported time is the slowest rank's mean, since a collective is only as
 * fast as its last participant.
 */
static int run_size(struct run *x, size_t bytes, double *sum_busbw)
{
    const struct bench_backend *be = x->be;
    const struct opts *o = x->o;
    enum bench_dtype dt = o->dtype;
    size_t es = dtype_sizes[dt], n = (size_t)x->size;
    size_t count, total; /* elements per rank, elements in the row */
    struct bufs b;
    int rc;

    if (o->coll == BENCH_ALLGATHER) {
        count = bytes / es / n;
        total = count * n;
    } else {
        count = total = bytes / es;
    }
    size_t send_bytes = count * es;
    size_t recv_bytes = o->coll == BENCH_ALLGATHER                  ? total * es
                        : o->coll == BENCH_ALLREDUCE && !o->inplace ? send_bytes
                                                                    : 0;
    const char *why =
        bufs_alloc(&b, o, send_bytes, recv_bytes, x->rank, x->dev);
    if (why != NULL) {
        fprintf(stderr, "%s: rank %d: %s for %zu bytes\n", be->prog, x->rank,
                why, bytes);
        return -1;
    }
    x->b = &b;
    x->count = count;

    size_t k = 0;
    for (int i = 0; i < o->warmup; i++, k++)
        if ((rc = run_once(x, k % b.nslots)) != 0)
            goto failed;
    if ((rc = be->barrier()) != 0)
        goto failed;
    double t0 = now();
    for (int i = 0; i < o->iters; i++, k++)
        if ((rc = run_once(x, k % b.nslots)) != 0)
            goto failed;
    double mine = (now() - t0) / o->iters, slowest = 0;
    if ((rc = be->allreduce(&mine, &slowest, 1, BENCH_FLOAT64, BENCH_MAX)) != 0)
        goto failed;

    int64_t wrong = 0, all_wrong = 0;
    if (o->check) {
        if ((rc = check_once(x, &wrong)) != 0 ||
            (rc = be->allreduce(&wrong, &all_wrong, 1, BENCH_INT64,
                                BENCH_SUM)) != 0)
            goto failed;
    }
    bufs_free(&b);

    double row_bytes = (double)(total * es);
    double algbw = slowest > 0 ? row_bytes / slowest / 1e9 : 0;
    double factor = o->coll == BENCH_ALLREDUCE   ? 2.0 * (n - 1) / n
                    : o->coll == BENCH_ALLGATHER ? (double)(n - 1) / n
                                                 : 1.0;
    double busbw = algbw * factor;
    *sum_busbw += busbw;
    if (x->rank == 0) {
        char wrongs[24] = "N/A";
        if (o->check)
            snprintf(wrongs, sizeof(wrongs), "%" PRId64, all_wrong);
        printf("%12zu  %12zu  %8s  %7s  %10.2f  %7.2f  %7.2f  %7s\n",
               total * es, total, dtype_names[dt],
               o->coll == BENCH_ALLREDUCE ? op_names[o->op] : "none",
               slowest * 1e6, algbw, busbw, wrongs);
        fflush(stdout);
    }
    return all_wrong > 0 ? 1 : 0;

failed:
    bufs_free(&b);
    return fail(x, coll_names[o->coll], bytes, rc);
}

int bench_main(int argc, char **argv, const struct bench_backend *be)
{
    struct opts o;
    struct run x = {.be = be, .o = &o};
    int rc, status = 0, rows = 0, bad_rows = 0;
    double sum_busbw = 0;

    if ((rc = be->init(&argc, &argv)) != 0) {
        fprintf(stderr, "%s: cannot start %s: %s\n", be->prog, be->library,
                be->error(rc));
        return 1;
    }
    x.rank = be->rank();
    x.size = be->size();
    rc = parse_opts(argc, argv, be->prog, x.rank, &o);
    if (rc != 0) {
        status = rc > 0 ? 0 : 2;
        goto out;
    }
    if (o.root >= x.size) {
        if (x.rank == 0)
            fprintf(stderr, "%s: root %d is not a rank of %d\n", be->prog,
                    o.root, x.size);
        status = 2;
        goto out;
    }
    if (o.device && be->device == NULL) {
        if (x.rank == 0)
            fprintf(stderr,
                    "%s: -G/--device: %s takes host memory only here "
                    "(hvd_bench takes device memory in a build with "
                    "CUDA)\n",
                    be->prog, be->library);
        status = 2;
        goto out;
    }
    if (o.device) {
        /* Every rank gives up if any has no device, rather than leave the
         * others waiting in a collective. */
        const char *why = be->device->open();
        int32_t bad = why != NULL, any = 0;
        if (why != NULL)
            fprintf(stderr, "%s: rank %d: cannot use a CUDA device: %s\n",
                    be->prog, x.rank, why);
        if ((rc = be->allreduce(&bad, &any, 1, BENCH_INT32, BENCH_MAX)) != 0) {
            fprintf(stderr, "%s: rank %d: %s\n", be->prog, x.rank,
                    be->error(rc));
            any = 1;
        }
        if (any) {
            status = 1;
            goto out;
        }
        x.dev = be->device;
    }
    const char *why = be->unsupported(o.coll, o.dtype, o.op);
    if (why) {
        /* A skip, not a failure: the script compares what both can do. */
        if (x.rank == 0)
            printf("# %s: skipped: %s\n", be->prog, why);
        goto out;
    }
    if (x.rank == 0) {
        char rot[32];
        if (o.rotate >= ((size_t)1 << 20) && o.rotate % ((size_t)1 << 20) == 0)
            snprintf(rot, sizeof(rot), "%zu MiB", o.rotate >> 20);
        else
            snprintf(rot, sizeof(rot), "%zu B", o.rotate);
        printf("# %s (%s): %s, np %d, iters %d, warmup %d, check %d, "
               "inplace %d, rotate %s",
               be->prog, be->library, coll_names[o.coll], x.size, o.iters,
               o.warmup, o.check, o.inplace, rot);
        if (o.coll == BENCH_BROADCAST)
            printf(", root %d", o.root);
        if (o.device)
            printf(", CUDA device memory");
        printf("\n# time: the slowest rank's mean per iteration; #wrong: "
               "elements that differ\n# from the exact expected result, "
               "summed over ranks\n#\n");
        printf("# %10s  %12s  %8s  %7s  %10s  %7s  %7s  %7s\n", "size", "count",
               "type", "redop", "time", "algbw", "busbw", "#wrong");
        printf("# %10s  %12s  %8s  %7s  %10s  %7s  %7s  %7s\n", "(B)",
               "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
        fflush(stdout);
    }
    for (size_t bytes = o.minbytes; bytes <= o.maxbytes;) {
        rc = run_size(&x, bytes, &sum_busbw);
        if (rc < 0) {
            status = 1;
            goto out;
        }
        bad_rows += rc;
        rows++;
        double next = (double)bytes * o.step;
        size_t nb = next >= (double)SIZE_MAX ? SIZE_MAX : (size_t)next;
        if (nb <= bytes)
            nb = bytes + 1;
        if (nb < bytes || bytes == SIZE_MAX)
            break;
        bytes = nb;
    }
    if (x.rank == 0) {
        printf("# Rows with wrong elements : %d %s\n", bad_rows,
               bad_rows ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g\n#\n",
               rows ? sum_busbw / rows : 0.0);
    }
    status = bad_rows ? 1 : 0;
out:
    be->finalize();
    return status;
}
