/* The training examples' shared host code: data, options, output, files. */
/* getopt_long() and M_PI are GNU and POSIX extensions to C11. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"
#include "train_common.h"

/* The data set's own seed (--seed leaves it alone) and the arms' shape. */
#define DATA_SEED 0x5eedda7aULL
#define SPIRAL_TURNS 1.0
#define SPIRAL_NOISE 0.04

const struct tensor train_tensors[] = {
    {"fc1.weight", FC1_W, HIDDEN *IN_DIM, IN_DIM},
    {"fc1.bias", FC1_B, HIDDEN, 0},
    {"fc2.weight", FC2_W, HIDDEN *HIDDEN, HIDDEN},
    {"fc2.bias", FC2_B, HIDDEN, 0},
    {"fc3.weight", FC3_W, CLASSES *HIDDEN, HIDDEN},
    {"fc3.bias", FC3_B, CLASSES, 0},
};
_Static_assert(sizeof(train_tensors) / sizeof(train_tensors[0]) == N_TENSORS,
               "N_TENSORS counts the rows of train_tensors");

void train_check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    const char *detail = hvd_last_error();
    fprintf(stderr, "%s: %s failed: %s (%s)\n", this_program.name, what,
            detail[0] != '\0' ? detail : hvd_strerror(rc), hvd_err_name(rc));
    exit(1);
}

void *train_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "%s: out of memory\n", this_program.name);
        exit(1);
    }
    return p;
}

/* splitmix64: small, fast and the same on every platform. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

static double rng_gauss(uint64_t *state)
{
    /* Box-Muller; 1 - u keeps the logarithm's argument above zero. */
    double u = 1.0 - rng_uniform(state);
    double v = rng_uniform(state);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* Uniform in [0, n), exact enough for any n far below 2^53. */
static size_t rng_below(uint64_t *state, size_t n)
{
    return (size_t)(rng_uniform(state) * (double)n);
}

/*
 * Samples per_class points of each spiral arm: the radius grows from near
 * the centre to 1 while the angle turns SPIRAL_TURNS times, each arm rotated
 * by a third of a circle, plus Gaussian noise.
 */
static void make_spirals(struct dataset *d, int per_class, uint64_t seed)
{
    uint64_t rng = seed;
    d->n = per_class * CLASSES;
    d->x = train_xcalloc((size_t)d->n * IN_DIM, sizeof(float));
    d->y = train_xcalloc((size_t)d->n, sizeof(int));
    for (int c = 0; c < CLASSES; c++) {
        for (int i = 0; i < per_class; i++) {
            int k = c * per_class + i;
            double r = 0.05 + 0.95 * rng_uniform(&rng);
            double t = 2.0 * M_PI * (SPIRAL_TURNS * r + (double)c / CLASSES);
            d->x[k * IN_DIM + 0] =
                (float)(r * cos(t) + SPIRAL_NOISE * rng_gauss(&rng));
            d->x[k * IN_DIM + 1] =
                (float)(r * sin(t) + SPIRAL_NOISE * rng_gauss(&rng));
            d->y[k] = c;
        }
    }
}

void train_make_data(struct dataset *train, struct dataset *test)
{
    make_spirals(train, TRAIN_PER_CLASS, DATA_SEED);
    make_spirals(test, TEST_PER_CLASS, DATA_SEED + 1);
}

void train_dataset_free(struct dataset *d)
{
    free(d->x);
    free(d->y);
}

/*
 * This rank's share of one epoch, as torch's DistributedSampler makes it:
 * every rank shuffles the same way (the permutation depends only on the
 * seed and the epoch), pads the list by repeating its head until its length
 * is a multiple of size, and takes every size-th index from its own rank
 * on. All ranks therefore run the same number of steps, which the
 * collectives require, and together they see every sample each epoch.
 */
int train_shard_epoch(int *out, int n, uint64_t seed, int epoch, int rank,
                      int size)
{
    int *perm = train_xcalloc((size_t)n, sizeof(int));
    uint64_t rng = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1));
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(&rng, (size_t)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int total = (n + size - 1) / size * size;
    int count = 0;
    for (int i = rank; i < total; i += size)
        out[count++] = perm[i % n];
    free(perm);
    return count;
}

/*
 * He-style uniform initialisation for the weights (ReLU layers), small
 * uniform biases, drawn from a stream that depends on the rank. Without the
 * broadcast that follows, every rank would start from different weights.
 */
void train_init_params(float *params, uint64_t seed, int rank)
{
    uint64_t rng = seed + 0x1000193ULL * (uint64_t)(rank + 1);
    for (size_t t = 0; t < N_TENSORS; t++) {
        const struct tensor *ts = &train_tensors[t];
        double bound =
            ts->fan_in > 0 ? sqrt(6.0 / ts->fan_in) : 1.0 / sqrt(HIDDEN);
        for (size_t i = 0; i < ts->count; i++)
            params[ts->offset + i] =
                (float)((2.0 * rng_uniform(&rng) - 1.0) * bound);
    }
}

/* 64-bit FNV-1a of the parameters' bytes: equal hashes, equal weights. */
static uint64_t checksum(const float *params)
{
    const unsigned char *p = (const unsigned char *)params;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < N_PARAMS * sizeof(float); i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/*
 * The file is written under a temporary name and renamed, so a crash
 * mid-write never leaves a truncated checkpoint where the last good one
 * was. Layout (native byte order): the 8 bytes "HVDTRAIN", uint32 epoch,
 * uint32 number of tensors, then per tensor its uint32 element count, then
 * all parameters as float32 in tensor order.
 */
int train_save_checkpoint(const char *path, const float *params, int epoch)
{
    size_t len = strlen(path) + sizeof(".tmp");
    char *tmp = train_xcalloc(len, 1);
    snprintf(tmp, len, "%s.tmp", path);
    int ok = 0;
    FILE *f = fopen(tmp, "wb");
    if (f != NULL) {
        uint32_t hdr[2] = {(uint32_t)epoch, (uint32_t)N_TENSORS};
        ok = fwrite("HVDTRAIN", 1, 8, f) == 8 &&
             fwrite(hdr, sizeof(hdr), 1, f) == 1;
        for (size_t t = 0; ok && t < N_TENSORS; t++) {
            uint32_t n = (uint32_t)train_tensors[t].count;
            ok = fwrite(&n, sizeof(n), 1, f) == 1;
        }
        ok = ok && fwrite(params, sizeof(float), N_PARAMS, f) == N_PARAMS;
        ok = fclose(f) == 0 && ok;
    }
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "%s: cannot write checkpoint %s: %s\n",
                this_program.name, path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

double train_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void train_log_epoch(int epoch, int epochs, const double m[3], double test_loss,
                     double test_acc)
{
    printf("epoch %d/%d: train loss %.4f, train accuracy %.2f%%, "
           "test loss %.4f, test accuracy %.2f%%\n",
           epoch + 1, epochs, m[0] / m[2], 100.0 * m[1] / m[2], test_loss,
           100.0 * test_acc);
}

void train_log_final(const struct options *o, double test_acc, int n_test,
                     int size, double elapsed)
{
    printf("final test accuracy: %.2f%% on %d samples, %d rank(s), "
           "%d epochs, %.2f s\n",
           100.0 * test_acc, n_test, size, o->epochs, elapsed);
    printf("checkpoint: %s\n", o->checkpoint);
}

void train_log_checksum(const float *params)
{
    printf("weights checksum: %016llx\n", (unsigned long long)checksum(params));
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--epochs N] [--batch-size B] [--lr LR]\n"
            "       [--checkpoint PATH] [--seed S] [--sync]\n"
            "%s"
            "  --epochs N         passes over the training set (default 20)\n"
            "  --batch-size B     samples per step on each rank (default 32)\n"
            "  --lr LR            base learning rate, multiplied by the\n"
            "                     number of ranks (default 0.01)\n"
            "  --checkpoint PATH  where rank 0 saves the weights after each\n"
            "                     epoch (default ./checkpoint.bin)\n"
            "  --seed S           seed of the initial weights and the\n"
            "                     shuffling (default 42)\n"
            "  --sync             average each gradient after the backward\n"
            "                     pass, waiting for each (default: start\n"
            "                     each layer's averaging as soon as its\n"
            "                     gradient is ready)\n"
            "%s",
            this_program.name, this_program.about, this_program.notes);
}

/*
 * Parses a whole-string number in [min, max], an integer when integral is
 * set; exits with the usage message otherwise.
 */
static double parse_number(const char *opt, const char *arg, double min,
                           double max, int integral)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !(v >= min && v <= max) ||
        (integral && v != floor(v))) {
        fprintf(stderr, "%s: invalid value for %s: '%s'\n", this_program.name,
                opt, arg);
        usage(stderr);
        exit(2);
    }
    return v;
}

void train_parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"epochs", required_argument, NULL, 'e'},
        {"batch-size", required_argument, NULL, 'b'},
        {"lr", required_argument, NULL, 'l'},
        {"checkpoint", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 's'},
        {"sync", no_argument, NULL, 'y'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){20, 32, 0.01, "./checkpoint.bin", 42, 0};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            o->epochs = (int)parse_number("--epochs", optarg, 1, 100000, 1);
            break;
        case 'b':
            o->batch_size =
                (int)parse_number("--batch-size", optarg, 1, MAX_BATCH, 1);
            break;
        case 'l':
            o->lr = parse_number("--lr", optarg, 1e-9, 100.0, 0);
            break;
        case 'c':
            o->checkpoint = optarg;
            break;
        case 's':
            o->seed = (uint64_t)parse_number("--seed", optarg, 0, 1e15, 1);
            break;
        case 'y':
            o->sync = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", this_program.name,
                argv[optind]);
        usage(stderr);
        exit(2);
    }
    if (o->checkpoint[0] == '\0') {
        fprintf(stderr, "%s: --checkpoint needs a path\n", this_program.name);
        exit(2);
    }
}
