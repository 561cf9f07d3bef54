/* Data-parallel MLP training with libhvd, following Horovod's usage steps. */
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

/*
 * The problem: three interleaved 2-D spiral arms, one class each. No
 * straight line separates curved arms, so a high accuracy shows that the
 * hidden layers really learned something, yet the default run takes only a
 * few seconds even with four ranks sharing two cores.
 */
enum {
    IN_DIM = 2,
    HIDDEN = 64,
    CLASSES = 3,
    TRAIN_PER_CLASS = 1000,
    TEST_PER_CLASS = 200,
    N_TRAIN = TRAIN_PER_CLASS * CLASSES,
    N_TEST = TEST_PER_CLASS * CLASSES,
    MAX_BATCH = 1024, /* largest --batch-size: activations kept per step */
};

/*
 * The data set is the same in every run and on every rank, whatever --seed
 * says, so that accuracies of different runs can be compared.
 */
#define DATA_SEED 0x5eedda7aULL
#define SPIRAL_TURNS 1.0
#define SPIRAL_NOISE 0.04
#define MOMENTUM 0.9f

/* The model's six tensors live in one array, each at its own offset. */
enum {
    FC1_W = 0,
    FC1_B = FC1_W + HIDDEN * IN_DIM,
    FC2_W = FC1_B + HIDDEN,
    FC2_B = FC2_W + HIDDEN * HIDDEN,
    FC3_W = FC2_B + HIDDEN,
    FC3_B = FC3_W + CLASSES * HIDDEN,
    N_PARAMS = FC3_B + CLASSES,
};

struct tensor {
    const char *name;
    size_t offset;
    size_t count;
    int fan_in; /* 0 for a bias */
};

/*
 * Each tensor is averaged by its own named allreduce, as Horovod does, so
 * that an error names the tensor involved.
 */
static const struct tensor tensors[] = {
    {"fc1.weight", FC1_W, HIDDEN *IN_DIM, IN_DIM},
    {"fc1.bias", FC1_B, HIDDEN, 0},
    {"fc2.weight", FC2_W, HIDDEN *HIDDEN, HIDDEN},
    {"fc2.bias", FC2_B, HIDDEN, 0},
    {"fc3.weight", FC3_W, CLASSES *HIDDEN, HIDDEN},
    {"fc3.bias", FC3_B, CLASSES, 0},
};
#define N_TENSORS (sizeof(tensors) / sizeof(tensors[0]))

struct options {
    int epochs;
    int batch_size;
    double lr;
    const char *checkpoint;
    uint64_t seed;
    int sync; /* average after the whole backward pass, one tensor at a time */
};

struct dataset {
    float *x; /* n rows of IN_DIM */
    int *y;
    int n;
};

/* Activations of one sample, kept for the backward pass. */
struct activations {
    float h1[HIDDEN];
    float h2[HIDDEN];
    float p[CLASSES]; /* softmax probabilities */
};

static const char *prog = "train";

/*
 * Any failing libhvd call ends the program: a rank that went on alone would
 * only deadlock or diverge from the others. hvd_last_error() says which
 * collective failed and which peer was involved.
 */
static void check(int rc, const char *what)
{
    if (rc >= 0)
        return;
    const char *detail = hvd_last_error();
    fprintf(stderr, "%s: %s failed: %s (%s)\n", prog, what,
            detail[0] != '\0' ? detail : hvd_strerror(rc), hvd_err_name(rc));
    exit(1);
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

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        exit(1);
    }
    return p;
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
    d->x = xcalloc((size_t)d->n * IN_DIM, sizeof(float));
    d->y = xcalloc((size_t)d->n, sizeof(int));
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

static void dataset_free(struct dataset *d)
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
 * Returns the number of indices written to out.
 */
static int shard_epoch(int *out, int n, uint64_t seed, int epoch, int rank,
                       int size)
{
    int *perm = xcalloc((size_t)n, sizeof(int));
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
static void init_params(float *params, uint64_t seed, int rank)
{
    uint64_t rng = seed + 0x1000193ULL * (uint64_t)(rank + 1);
    for (size_t t = 0; t < N_TENSORS; t++) {
        const struct tensor *ts = &tensors[t];
        double bound =
            ts->fan_in > 0 ? sqrt(6.0 / ts->fan_in) : 1.0 / sqrt(HIDDEN);
        for (size_t i = 0; i < ts->count; i++)
            params[ts->offset + i] =
                (float)((2.0 * rng_uniform(&rng) - 1.0) * bound);
    }
}

/* out[o] = b[o] + sum_i w[o][i] * in[i], then ReLU when relu is set. */
static void dense(float *out, const float *w, const float *b, const float *in,
                  int n_in, int n_out, int relu)
{
    for (int o = 0; o < n_out; o++) {
        float s = b[o];
        const float *row = w + (size_t)o * n_in;
        for (int i = 0; i < n_in; i++)
            s += row[i] * in[i];
        out[o] = relu && s < 0.0f ? 0.0f : s;
    }
}

/* Runs one sample through the MLP; returns its cross-entropy loss. */
static float forward(const float *params, const float *x, int y,
                     struct activations *a)
{
    float logits[CLASSES];
    dense(a->h1, params + FC1_W, params + FC1_B, x, IN_DIM, HIDDEN, 1);
    dense(a->h2, params + FC2_W, params + FC2_B, a->h1, HIDDEN, HIDDEN, 1);
    dense(logits, params + FC3_W, params + FC3_B, a->h2, HIDDEN, CLASSES, 0);
    /* Subtracting the largest logit keeps expf() from overflowing. */
    float max = logits[0];
    for (int c = 1; c < CLASSES; c++)
        if (logits[c] > max)
            max = logits[c];
    float sum = 0.0f;
    for (int c = 0; c < CLASSES; c++) {
        a->p[c] = expf(logits[c] - max);
        sum += a->p[c];
    }
    for (int c = 0; c < CLASSES; c++)
        a->p[c] /= sum;
    return -logf(fmaxf(a->p[y], 1e-30f));
}

static int argmax(const float *p)
{
    int best = 0;
    for (int c = 1; c < CLASSES; c++)
        if (p[c] > p[best])
            best = c;
    return best;
}

/* Starts averaging tensors t0..t1-1 (async), or leaves them for later. */
typedef void (*ready_fn)(float *grad, size_t t0, size_t t1,
                         hvd_handle *handles);

/*
 * The backward pass over a batch of b samples (activations a[j], inputs
 * x[j], labels y[j]), layer by layer from the output: adds scale times the
 * gradient of the loss to grad, and hands each layer's tensors to ready as
 * soon as they are complete, so that their averaging overlaps the rest of
 * the pass. Each gradient element sums the samples in batch order, as a
 * per-sample pass would.
 */
static void backward(const float *params, float *grad, const float *const *x,
                     const int *y, const struct activations *a, int b,
                     float scale, ready_fn ready, hvd_handle *handles)
{
    static float d3[MAX_BATCH][CLASSES], d2[MAX_BATCH][HIDDEN];
    for (int j = 0; j < b; j++) {
        /* Softmax with cross-entropy: the logits' gradient is p - onehot. */
        for (int c = 0; c < CLASSES; c++)
            d3[j][c] = (a[j].p[c] - (c == y[j] ? 1.0f : 0.0f)) * scale;
        for (int c = 0; c < CLASSES; c++) {
            grad[FC3_B + c] += d3[j][c];
            for (int i = 0; i < HIDDEN; i++)
                grad[FC3_W + c * HIDDEN + i] += d3[j][c] * a[j].h2[i];
        }
    }
    ready(grad, 4, 6, handles); /* fc3 */
    for (int j = 0; j < b; j++) {
        for (int i = 0; i < HIDDEN; i++) {
            float s = 0.0f;
            for (int c = 0; c < CLASSES; c++)
                s += params[FC3_W + c * HIDDEN + i] * d3[j][c];
            d2[j][i] = a[j].h2[i] > 0.0f ? s : 0.0f;
        }
        for (int o = 0; o < HIDDEN; o++) {
            grad[FC2_B + o] += d2[j][o];
            for (int i = 0; i < HIDDEN; i++)
                grad[FC2_W + o * HIDDEN + i] += d2[j][o] * a[j].h1[i];
        }
    }
    ready(grad, 2, 4, handles); /* fc2 */
    for (int j = 0; j < b; j++) {
        float d1[HIDDEN];
        for (int i = 0; i < HIDDEN; i++) {
            float s = 0.0f;
            for (int o = 0; o < HIDDEN; o++)
                s += params[FC2_W + o * HIDDEN + i] * d2[j][o];
            d1[i] = a[j].h1[i] > 0.0f ? s : 0.0f;
        }
        for (int o = 0; o < HIDDEN; o++) {
            grad[FC1_B + o] += d1[o];
            for (int i = 0; i < IN_DIM; i++)
                grad[FC1_W + o * IN_DIM + i] += d1[o] * x[j][i];
        }
    }
    ready(grad, 0, 2, handles); /* fc1 */
}

/*
 * Step 4's work, overlapped: each tensor's named allreduce starts as soon
 * as its layer's gradient is ready; the runtime pairs them up across ranks
 * by name and fuses what is ready together.
 */
static void start_averaging(float *grad, size_t t0, size_t t1,
                            hvd_handle *handles)
{
    for (size_t t = t0; t < t1; t++)
        check(hvd_allreduce_async(grad + tensors[t].offset,
                                  grad + tensors[t].offset, tensors[t].count,
                                  HVD_FLOAT32, HVD_AVERAGE, tensors[t].name,
                                  &handles[t]),
              "averaging gradients");
}

static void finish_averaging(hvd_handle *handles)
{
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_wait(handles[t]), "averaging gradients");
}

static void later(float *grad, size_t t0, size_t t1, hvd_handle *handles)
{
    (void)grad, (void)t0, (void)t1, (void)handles;
}

/*
 * Step 4's work, the plain way (--sync): after the backward pass, average
 * each tensor and wait for it. Every rank ends with the same bits, and the
 * same bits as the overlapped way.
 */
static void average_gradients(float *grad)
{
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_allreduce(grad + tensors[t].offset, grad + tensors[t].offset,
                            tensors[t].count, HVD_FLOAT32, HVD_AVERAGE,
                            tensors[t].name),
              "averaging gradients");
}

/* SGD with momentum, as torch.optim.SGD does it: v = mu v + g; w -= lr v. */
static void sgd_step(float *params, float *velocity, const float *grad,
                     float lr)
{
    for (size_t i = 0; i < N_PARAMS; i++) {
        velocity[i] = MOMENTUM * velocity[i] + grad[i];
        params[i] -= lr * velocity[i];
    }
}

/*
 * Loss and accuracy on this rank's fixed, unshuffled share of the test set
 * (indices rank, rank + size, ...), summed over all ranks. Every rank holds
 * the same weights and the sums are reduced in a fixed order, so the result
 * is the same every run and on every rank.
 */
static void evaluate(const float *params, const struct dataset *test,
                     double *loss, double *accuracy)
{
    struct activations a;
    /* Loss sum, correct predictions, samples. */
    double m[3] = {0.0, 0.0, 0.0};
    for (int k = hvd_rank(); k < test->n; k += hvd_size()) {
        m[0] += forward(params, test->x + k * IN_DIM, test->y[k], &a);
        m[1] += argmax(a.p) == test->y[k];
        m[2] += 1.0;
    }
    check(hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "test.metrics"),
          "summing test metrics");
    *loss = m[0] / m[2];
    *accuracy = m[1] / m[2];
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
 * Writes the weights to path. The file is written under a temporary name
 * and renamed, so a crash mid-write never leaves a truncated checkpoint
 * where the last good one was. Layout (native byte order): the 8 bytes
 * "HVDTRAIN", uint32 epoch, uint32 number of tensors, then per tensor its
 * uint32 element count, then all parameters as float32 in tensor order.
 */
static int save_checkpoint(const char *path, const float *params, int epoch)
{
    size_t len = strlen(path) + sizeof(".tmp");
    char *tmp = xcalloc(len, 1);
    snprintf(tmp, len, "%s.tmp", path);
    int ok = 0;
    FILE *f = fopen(tmp, "wb");
    if (f != NULL) {
        uint32_t hdr[2] = {(uint32_t)epoch, (uint32_t)N_TENSORS};
        ok = fwrite("HVDTRAIN", 1, 8, f) == 8 &&
             fwrite(hdr, sizeof(hdr), 1, f) == 1;
        for (size_t t = 0; ok && t < N_TENSORS; t++) {
            uint32_t n = (uint32_t)tensors[t].count;
            ok = fwrite(&n, sizeof(n), 1, f) == 1;
        }
        ok = ok && fwrite(params, sizeof(float), N_PARAMS, f) == N_PARAMS;
        ok = fclose(f) == 0 && ok;
    }
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "%s: cannot write checkpoint %s: %s\n", prog, path,
                strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--epochs N] [--batch-size B] [--lr LR]\n"
            "       [--checkpoint PATH] [--seed S] [--sync]\n"
            "Trains a small MLP on a synthetic spiral data set; run it under\n"
            "horovodrun -np N for data-parallel training.\n"
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
            "                     gradient is ready)\n",
            prog);
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
        fprintf(stderr, "%s: invalid value for %s: '%s'\n", prog, opt, arg);
        usage(stderr);
        exit(2);
    }
    return v;
}

static void parse_options(int argc, char **argv, struct options *o)
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
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        usage(stderr);
        exit(2);
    }
    if (o->checkpoint[0] == '\0') {
        fprintf(stderr, "%s: --checkpoint needs a path\n", prog);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct options opt;
    parse_options(argc, argv, &opt);

    /* Step 1: join the job (a job of one rank without horovodrun). */
    check(hvd_init(), "hvd_init");
    int rank = hvd_rank(), size = hvd_size();

    /*
     * Step 2: pin this process to its rank's GPU. A GPU program would
     * select device hvd_local_rank() here; this example has no GPU code,
     * so it only reports where it runs.
     */
    printf("rank %d of %d, local rank %d of %d\n", rank, size, hvd_local_rank(),
           hvd_local_size());

    struct dataset train, test;
    make_spirals(&train, TRAIN_PER_CLASS, DATA_SEED);
    make_spirals(&test, TEST_PER_CLASS, DATA_SEED + 1);

    float *params = xcalloc(N_PARAMS, sizeof(float));
    float *grad = xcalloc(N_PARAMS, sizeof(float));
    float *velocity = xcalloc(N_PARAMS, sizeof(float));
    init_params(params, opt.seed, rank);

    /*
     * Step 3: scale the learning rate by the number of ranks. Each step
     * averages size times as many samples as one rank's batch, so the
     * gradient is less noisy and a larger step is safe.
     */
    float lr = (float)(opt.lr * size);

    /*
     * Step 4: make the optimizer distributed. Every training step below
     * calls average_gradients() between backward and sgd_step(), which is
     * what Horovod's DistributedOptimizer does.
     */

    /*
     * Step 5: broadcast the initial weights from rank 0 so that every rank
     * starts identical. The momentum buffers are zero on every rank, so
     * they need no broadcast.
     */
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_broadcast(params + tensors[t].offset, tensors[t].count,
                            HVD_FLOAT32, 0, tensors[t].name),
              "broadcasting initial weights");

    int *shard = xcalloc((size_t)N_TRAIN, sizeof(int));
    double start = now(), test_loss = 0.0, test_acc = 0.0;
    static struct activations a[MAX_BATCH];
    const float *xs[MAX_BATCH];
    int ys[MAX_BATCH];
    hvd_handle handles[N_TENSORS];
    for (int epoch = 0; epoch < opt.epochs; epoch++) {
        int n = shard_epoch(shard, N_TRAIN, opt.seed, epoch, rank, size);
        /* Loss sum, correct predictions, samples of this epoch. */
        double m[3] = {0.0, 0.0, 0.0};
        for (int first = 0; first < n; first += opt.batch_size) {
            int b = n - first < opt.batch_size ? n - first : opt.batch_size;
            memset(grad, 0, N_PARAMS * sizeof(float));
            for (int j = 0; j < b; j++) {
                int k = shard[first + j];
                xs[j] = train.x + k * IN_DIM;
                ys[j] = train.y[k];
                m[0] += forward(params, xs[j], ys[j], &a[j]);
                m[1] += argmax(a[j].p) == ys[j];
            }
            m[2] += b;
            /* Step 4 at work: average the gradients over all ranks, each
             * layer's as soon as it is ready (or all after, with --sync). */
            backward(params, grad, xs, ys, a, b, 1.0f / (float)b,
                     opt.sync ? later : start_averaging, handles);
            if (opt.sync)
                average_gradients(grad);
            else
                finish_averaging(handles);
            sgd_step(params, velocity, grad, lr);
        }
        check(hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "train.metrics"),
              "summing training metrics");
        evaluate(params, &test, &test_loss, &test_acc);

        /* Step 6: only rank 0 logs and writes checkpoints. */
        if (rank == 0) {
            printf("epoch %d/%d: train loss %.4f, train accuracy %.2f%%, "
                   "test loss %.4f, test accuracy %.2f%%\n",
                   epoch + 1, opt.epochs, m[0] / m[2], 100.0 * m[1] / m[2],
                   test_loss, 100.0 * test_acc);
            if (save_checkpoint(opt.checkpoint, params, epoch + 1) != 0)
                return 1;
        }
    }
    double elapsed = now() - start;

    if (rank == 0) {
        printf("final test accuracy: %.2f%% on %d samples, %d rank(s), "
               "%d epochs, %.2f s\n",
               100.0 * test_acc, test.n, size, opt.epochs, elapsed);
        printf("checkpoint: %s\n", opt.checkpoint);
    }
    /* Every rank reports its weights; the hashes must all be equal. */
    printf("weights checksum: %016llx\n", (unsigned long long)checksum(params));

    free(shard);
    free(params);
    free(grad);
    free(velocity);
    dataset_free(&train);
    dataset_free(&test);
    check(hvd_shutdown(), "hvd_shutdown");
    return 0;
}
