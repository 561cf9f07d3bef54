/* Data-parallel MLP training on a GPU with libhvd: train.c's model on CUDA. */
/*
 * The same model, data, hyper-parameters, log lines and checkpoint as
 * train.c, so that tests/example/test_train.py's checks apply to it too;
 * the forward and backward passes run on the GPU (cuBLAS for the matrix
 * products, small kernels for the rest), and libhvd averages the gradients
 * on the device: each layer's gradient tensors are handed to
 * hvd_allreduce_async as device pointers as soon as the layer is done. The
 * bits differ from train.c's, because the GPU sums in another order, but
 * every rank of one run ends with the same weights.
 *
 * getopt_long() and M_PI are GNU and POSIX extensions to C and C++.
 */
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

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "hvd.h"

/* The problem, as in train.c: three interleaved 2-D spiral arms. */
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

/* The same data set as train.c's, whatever --seed says. */
#define DATA_SEED 0x5eedda7aULL
#define SPIRAL_TURNS 1.0
#define SPIRAL_NOISE 0.04
#define MOMENTUM 0.9f

/*
 * The model's six tensors live in one array, each at its own offset, in
 * train.c's order and layout (a weight is row-major, one row per output),
 * so that the checkpoints of both programs have the same format.
 */
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

/* Each tensor is averaged by its own named allreduce, as Horovod does. */
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

/*
 * Everything on the device. A batch's matrices are column-major for cuBLAS
 * with one column per sample: x is IN_DIM x b, h1 and h2 are HIDDEN x b,
 * logits and d3 CLASSES x b, which is the row-major [b][n] layout of
 * train.c's per-sample arrays.
 */
struct gpu {
    cudaStream_t stream;
    cublasHandle_t blas;
    float *params, *grad, *velocity; /* N_PARAMS each */
    float *train_x, *test_x;         /* the data sets */
    int *train_y, *test_y;
    int *shard;    /* this epoch's sample indices of this rank */
    int *test_idx; /* this rank's share of the test set */
    float *x;      /* the batch's inputs and labels */
    int *y;
    float *h1, *h2, *logits; /* activations */
    float *d3, *d2, *d1;     /* the loss's gradients with respect to them */
    float *loss, *correct;   /* per sample */
    double *metrics;         /* loss sum and correct predictions */
};

static const char *prog = "train_cuda";

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

/* A failing CUDA or cuBLAS call ends the program too, naming the call. */
static void cuda_check(cudaError_t e, const char *call, const char *file,
                       int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "%s: %s failed at %s:%d: %s (%s)\n", prog, call, file, line,
            cudaGetErrorString(e), cudaGetErrorName(e));
    exit(1);
}

static void cublas_check(cublasStatus_t s, const char *call, const char *file,
                         int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return;
    fprintf(stderr, "%s: %s failed at %s:%d: %s (%s)\n", prog, call, file, line,
            cublasGetStatusString(s), cublasGetStatusName(s));
    exit(1);
}

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)
/* A launch's own errors (bad configuration) show at once; a fault in the
 * kernel shows at the next synchronizing call, which is checked too. */
#define LAUNCH_CHECK(kernel)                                                   \
    cuda_check(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__)

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

/* Spiral arms exactly as train.c draws them. */
static void make_spirals(struct dataset *d, int per_class, uint64_t seed)
{
    uint64_t rng = seed;
    d->n = per_class * CLASSES;
    d->x = (float *)xcalloc((size_t)d->n * IN_DIM, sizeof(float));
    d->y = (int *)xcalloc((size_t)d->n, sizeof(int));
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
 * This rank's share of one epoch, as torch's DistributedSampler makes it
 * and as train.c takes it: the same shuffle on every rank, padded to a
 * multiple of size, every size-th index from this rank's on.
 */
static int shard_epoch(int *out, int n, uint64_t seed, int epoch, int rank,
                       int size)
{
    int *perm = (int *)xcalloc((size_t)n, sizeof(int));
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
 * train.c's initialisation, on the host, from a stream that depends on the
 * rank; the broadcast from rank 0 makes every rank start the same.
 */
static void init_params(float *params, uint64_t seed, int rank)
{
    uint64_t rng = seed + 0x1000193ULL * (uint64_t)(rank + 1);
    for (size_t t = 0; t < N_TENSORS; t++) {
        const struct tensor *ts = &tensors[t];
        double bound = ts->fan_in > 0 ? sqrt(6.0 / ts->fan_in)
                                      : 1.0 / sqrt((double)HIDDEN);
        for (size_t i = 0; i < ts->count; i++)
            params[ts->offset + i] =
                (float)((2.0 * rng_uniform(&rng) - 1.0) * bound);
    }
}

/* Threads per block of the element-wise kernels. */
#define THREADS 256

static unsigned blocks(int n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

/* Copies the b samples idx[0..b) of a data set into the batch's x and y. */
__global__ void gather_batch(const float *all_x, const int *all_y,
                             const int *idx, int b, float *x, int *y)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= b)
        return;
    int k = idx[j];
    for (int i = 0; i < IN_DIM; i++)
        x[j * IN_DIM + i] = all_x[k * IN_DIM + i];
    y[j] = all_y[k];
}

/* h (n x b) += bias per row, then ReLU when relu is set. */
__global__ void bias_act(float *h, const float *bias, int n, int b, int relu)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * b)
        return;
    float s = h[t] + bias[t % n];
    h[t] = relu && s < 0.0f ? 0.0f : s;
}

/*
 * Softmax with cross-entropy, one thread per sample: its loss, whether the
 * most probable class is right, and, when d is not NULL, the logits'
 * gradient p - onehot times scale.
 */
__global__ void softmax_xent(const float *logits, const int *y, int b,
                             float scale, float *d, float *loss, float *correct)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= b)
        return;
    const float *z = logits + j * CLASSES;
    /* Subtracting the largest logit keeps expf() from overflowing. */
    float max = z[0];
    for (int c = 1; c < CLASSES; c++)
        max = fmaxf(max, z[c]);
    float p[CLASSES], sum = 0.0f;
    for (int c = 0; c < CLASSES; c++) {
        p[c] = expf(z[c] - max);
        sum += p[c];
    }
    int best = 0;
    for (int c = 0; c < CLASSES; c++) {
        p[c] /= sum;
        if (p[c] > p[best])
            best = c;
    }
    loss[j] = -logf(fmaxf(p[y[j]], 1e-30f));
    correct[j] = best == y[j] ? 1.0f : 0.0f;
    if (d != NULL)
        for (int c = 0; c < CLASSES; c++)
            d[j * CLASSES + c] = (p[c] - (c == y[j] ? 1.0f : 0.0f)) * scale;
}

/*
 * Adds the sums of loss[0..b) and correct[0..b) to acc[0] and acc[1]. One
 * block, in a fixed order, so that the logged figures are the same in
 * every run.
 */
__global__ void sum_metrics(const float *loss, const float *correct, int b,
                            double *acc)
{
    __shared__ double part[2][THREADS];
    double l = 0.0, c = 0.0;
    for (int j = threadIdx.x; j < b; j += THREADS) {
        l += loss[j];
        c += correct[j];
    }
    part[0][threadIdx.x] = l;
    part[1][threadIdx.x] = c;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) {
            part[0][threadIdx.x] += part[0][threadIdx.x + half];
            part[1][threadIdx.x] += part[1][threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        acc[0] += part[0][0];
        acc[1] += part[1][0];
    }
}

/* A bias's gradient: gb[o] = sum over the batch of d (n x b), in order. */
__global__ void bias_grad(const float *d, int n, int b, float *gb)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n)
        return;
    float s = 0.0f;
    for (int j = 0; j < b; j++)
        s += d[j * n + o];
    gb[o] = s;
}

/* Through a ReLU: the gradient passes where the activation was positive. */
__global__ void relu_back(float *d, const float *h, int total)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < total && !(h[t] > 0.0f))
        d[t] = 0.0f;
}

/* SGD with momentum, as torch.optim.SGD does it: v = mu v + g; w -= lr v. */
__global__ void sgd_step(float *w, float *v, const float *g, int n, float lr)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    v[i] = MOMENTUM * v[i] + g[i];
    w[i] -= lr * v[i];
}

/*
 * out (n_out x b) = w in, w being a row-major n_out x n_in weight, which
 * cuBLAS sees as its column-major transpose.
 */
static void matmul_fwd(struct gpu *g, float *out, const float *w,
                       const float *in, int n_in, int n_out, int b)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, b, n_in,
                             &one, w, n_in, in, n_in, &zero, out, n_out));
}

/* din (n_in x b) = w^T dout: the gradient with respect to the layer's input. */
static void matmul_back(struct gpu *g, float *din, const float *w,
                        const float *dout, int n_in, int n_out, int b)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, n_in, b, n_out,
                             &one, w, n_in, dout, n_out, &zero, din, n_in));
}

/*
 * A layer's weight and bias gradients: gw (row-major n_out x n_in) = dout
 * in^T summed over the batch, gb = dout's row sums.
 */
static void layer_grad(struct gpu *g, float *gw, float *gb, const float *dout,
                       const float *in, int n_in, int n_out, int b)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, n_in, n_out, b,
                             &one, in, n_in, dout, n_out, &zero, gw, n_in));
    bias_grad<<<blocks(n_out), THREADS, 0, g->stream>>>(dout, n_out, b, gb);
    LAUNCH_CHECK(bias_grad);
}

/*
 * Runs the b samples idx[0..b) of a data set through the MLP and adds
 * their loss sum and correct predictions to acc; with a nonzero scale it
 * also leaves the logits' gradient, times scale, in g->d3.
 */
static void forward(struct gpu *g, const float *all_x, const int *all_y,
                    const int *idx, int b, float scale, double *acc)
{
    const float *p = g->params;
    gather_batch<<<blocks(b), THREADS, 0, g->stream>>>(all_x, all_y, idx, b,
                                                       g->x, g->y);
    LAUNCH_CHECK(gather_batch);
    matmul_fwd(g, g->h1, p + FC1_W, g->x, IN_DIM, HIDDEN, b);
    bias_act<<<blocks(HIDDEN * b), THREADS, 0, g->stream>>>(g->h1, p + FC1_B,
                                                            HIDDEN, b, 1);
    LAUNCH_CHECK(bias_act);
    matmul_fwd(g, g->h2, p + FC2_W, g->h1, HIDDEN, HIDDEN, b);
    bias_act<<<blocks(HIDDEN * b), THREADS, 0, g->stream>>>(g->h2, p + FC2_B,
                                                            HIDDEN, b, 1);
    LAUNCH_CHECK(bias_act);
    matmul_fwd(g, g->logits, p + FC3_W, g->h2, HIDDEN, CLASSES, b);
    bias_act<<<blocks(CLASSES * b), THREADS, 0, g->stream>>>(
        g->logits, p + FC3_B, CLASSES, b, 0);
    LAUNCH_CHECK(bias_act);
    softmax_xent<<<blocks(b), THREADS, 0, g->stream>>>(
        g->logits, g->y, b, scale, scale != 0.0f ? g->d3 : NULL, g->loss,
        g->correct);
    LAUNCH_CHECK(softmax_xent);
    sum_metrics<<<1, THREADS, 0, g->stream>>>(g->loss, g->correct, b, acc);
    LAUNCH_CHECK(sum_metrics);
}

/* Starts averaging tensors t0..t1-1 (async), or leaves them for later. */
typedef void (*ready_fn)(struct gpu *g, size_t t0, size_t t1,
                         hvd_handle *handles);

/*
 * The backward pass over the batch forward() left behind, layer by layer
 * from the output: writes the gradient of the batch's mean loss to
 * g->grad, and hands each layer's tensors to ready as soon as they are
 * computed, so that their averaging overlaps the rest of the pass.
 */
static void backward(struct gpu *g, int b, ready_fn ready, hvd_handle *handles)
{
    const float *p = g->params;
    float *gr = g->grad;
    layer_grad(g, gr + FC3_W, gr + FC3_B, g->d3, g->h2, HIDDEN, CLASSES, b);
    ready(g, 4, 6, handles); /* fc3 */
    matmul_back(g, g->d2, p + FC3_W, g->d3, HIDDEN, CLASSES, b);
    relu_back<<<blocks(HIDDEN * b), THREADS, 0, g->stream>>>(g->d2, g->h2,
                                                             HIDDEN * b);
    LAUNCH_CHECK(relu_back);
    layer_grad(g, gr + FC2_W, gr + FC2_B, g->d2, g->h1, HIDDEN, HIDDEN, b);
    ready(g, 2, 4, handles); /* fc2 */
    matmul_back(g, g->d1, p + FC2_W, g->d2, HIDDEN, HIDDEN, b);
    relu_back<<<blocks(HIDDEN * b), THREADS, 0, g->stream>>>(g->d1, g->h1,
                                                             HIDDEN * b);
    LAUNCH_CHECK(relu_back);
    layer_grad(g, gr + FC1_W, gr + FC1_B, g->d1, g->x, IN_DIM, HIDDEN, b);
    ready(g, 0, 2, handles); /* fc1 */
}

/*
 * Step 4's work, overlapped: each tensor's named allreduce starts as soon
 * as its layer's gradient is ready, on the device memory itself. libhvd
 * reads the buffer on its own stream, so the kernels that wrote it must
 * have finished first: hence the synchronization before the hand-over.
 * The kernels queued after it touch other tensors only.
 */
static void start_averaging(struct gpu *g, size_t t0, size_t t1,
                            hvd_handle *handles)
{
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (size_t t = t0; t < t1; t++)
        check(hvd_allreduce_async(g->grad + tensors[t].offset,
                                  g->grad + tensors[t].offset, tensors[t].count,
                                  HVD_FLOAT32, HVD_AVERAGE, tensors[t].name,
                                  &handles[t]),
              "averaging gradients");
}

static void finish_averaging(hvd_handle *handles)
{
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_wait(handles[t]), "averaging gradients");
}

static void later(struct gpu *g, size_t t0, size_t t1, hvd_handle *handles)
{
    (void)g, (void)t0, (void)t1, (void)handles;
}

/*
 * Step 4's work, the plain way (--sync): after the backward pass, average
 * each tensor on the device and wait for it.
 */
static void average_gradients(struct gpu *g)
{
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_allreduce(g->grad + tensors[t].offset,
                            g->grad + tensors[t].offset, tensors[t].count,
                            HVD_FLOAT32, HVD_AVERAGE, tensors[t].name),
              "averaging gradients");
}

/*
 * Loss and accuracy on this rank's fixed, unshuffled share of the test set
 * (indices rank, rank + size, ..., already on the device), summed over all
 * ranks: the same on every rank.
 */
static void evaluate(struct gpu *g, int n_mine, double *loss, double *accuracy)
{
    /* Loss sum, correct predictions, samples. */
    double m[3] = {0.0, 0.0, (double)n_mine};
    CUDA_CHECK(cudaMemsetAsync(g->metrics, 0, 2 * sizeof(double), g->stream));
    for (int first = 0; first < n_mine; first += MAX_BATCH) {
        int b = n_mine - first < MAX_BATCH ? n_mine - first : MAX_BATCH;
        forward(g, g->test_x, g->test_y, g->test_idx + first, b, 0.0f,
                g->metrics);
    }
    CUDA_CHECK(cudaMemcpyAsync(m, g->metrics, 2 * sizeof(double),
                               cudaMemcpyDeviceToHost, g->stream));
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
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
 * Writes the weights to path in train.c's format, under a temporary name
 * that is then renamed: "HVDTRAIN", uint32 epoch, uint32 number of
 * tensors, each tensor's uint32 element count, then all parameters as
 * float32 in tensor order (native byte order).
 */
static int save_checkpoint(const char *path, const float *params, int epoch)
{
    size_t len = strlen(path) + sizeof(".tmp");
    char *tmp = (char *)xcalloc(len, 1);
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
            "Trains a small MLP on a synthetic spiral data set on this "
            "rank's GPU; run it\nunder horovodrun -np N for data-parallel "
            "training.\n"
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
            "Exits 77 when there is no CUDA device.\n",
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
    static const struct options defaults = {20, 32, 0.01, "./checkpoint.bin",
                                            42, 0};
    *o = defaults;
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

/* n elements of device memory, as T. */
template <typename T>
static void dev_alloc(T **p, size_t n, const char *what, int line)
{
    void *v = NULL;
    cuda_check(cudaMalloc(&v, n * sizeof(T)), what, __FILE__, line);
    *p = (T *)v;
}
#define DEV_ALLOC(p, n) dev_alloc(&(p), (n), "cudaMalloc of " #p, __LINE__)

/* Copies n host elements to the device, synchronously. */
template <typename T>
static void upload(T *dst, const T *src, size_t n, const char *what, int line)
{
    cuda_check(cudaMemcpy(dst, src, n * sizeof(T), cudaMemcpyHostToDevice),
               what, __FILE__, line);
}
#define UPLOAD(dst, src, n)                                                    \
    upload((dst), (src), (n), "cudaMemcpy to " #dst, __LINE__)

/* Allocates the device's buffers and uploads both data sets. */
static void gpu_init(struct gpu *g, const struct dataset *train,
                     const struct dataset *test)
{
    memset(g, 0, sizeof(*g));
    CUDA_CHECK(cudaStreamCreate(&g->stream));
    CUBLAS_CHECK(cublasCreate(&g->blas));
    CUBLAS_CHECK(cublasSetStream(g->blas, g->stream));
    DEV_ALLOC(g->params, N_PARAMS);
    DEV_ALLOC(g->grad, N_PARAMS);
    DEV_ALLOC(g->velocity, N_PARAMS);
    DEV_ALLOC(g->train_x, (size_t)train->n * IN_DIM);
    DEV_ALLOC(g->train_y, (size_t)train->n);
    DEV_ALLOC(g->test_x, (size_t)test->n * IN_DIM);
    DEV_ALLOC(g->test_y, (size_t)test->n);
    DEV_ALLOC(g->shard, (size_t)train->n);
    DEV_ALLOC(g->test_idx, (size_t)test->n);
    DEV_ALLOC(g->x, (size_t)MAX_BATCH * IN_DIM);
    DEV_ALLOC(g->y, (size_t)MAX_BATCH);
    DEV_ALLOC(g->h1, (size_t)MAX_BATCH * HIDDEN);
    DEV_ALLOC(g->h2, (size_t)MAX_BATCH * HIDDEN);
    DEV_ALLOC(g->logits, (size_t)MAX_BATCH * CLASSES);
    DEV_ALLOC(g->d3, (size_t)MAX_BATCH * CLASSES);
    DEV_ALLOC(g->d2, (size_t)MAX_BATCH * HIDDEN);
    DEV_ALLOC(g->d1, (size_t)MAX_BATCH * HIDDEN);
    DEV_ALLOC(g->loss, (size_t)MAX_BATCH);
    DEV_ALLOC(g->correct, (size_t)MAX_BATCH);
    DEV_ALLOC(g->metrics, 2);
    UPLOAD(g->train_x, train->x, (size_t)train->n * IN_DIM);
    UPLOAD(g->train_y, train->y, (size_t)train->n);
    UPLOAD(g->test_x, test->x, (size_t)test->n * IN_DIM);
    UPLOAD(g->test_y, test->y, (size_t)test->n);
    CUDA_CHECK(cudaMemset(g->velocity, 0, N_PARAMS * sizeof(float)));
}

static void gpu_close(struct gpu *g)
{
    void *bufs[] = {g->params,   g->grad,    g->velocity, g->train_x,
                    g->test_x,   g->train_y, g->test_y,   g->shard,
                    g->test_idx, g->x,       g->y,        g->h1,
                    g->h2,       g->logits,  g->d3,       g->d2,
                    g->d1,       g->loss,    g->correct,  g->metrics};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        CUDA_CHECK(cudaFree(bufs[i]));
    CUBLAS_CHECK(cublasDestroy(g->blas));
    CUDA_CHECK(cudaStreamDestroy(g->stream));
}

/* Copies the weights back to the host (for checkpoints and the hash). */
static void download_params(struct gpu *g, float *params)
{
    CUDA_CHECK(cudaMemcpyAsync(params, g->params, N_PARAMS * sizeof(float),
                               cudaMemcpyDeviceToHost, g->stream));
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

/*
 * Says why there is no GPU to train on and exits 77, the code by which
 * test harnesses mean "skipped", before joining any job: every rank of the
 * job finds the same and exits the same way.
 */
static void require_gpu(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return;
    fprintf(stderr, "%s: no CUDA device: %s\n", prog,
            cudaGetErrorString(e != cudaSuccess ? e : cudaErrorNoDevice));
    exit(77);
}

int main(int argc, char **argv)
{
    struct options opt;
    parse_options(argc, argv, &opt);
    require_gpu();

    /* Step 1: join the job (a job of one rank without horovodrun). */
    check(hvd_init(), "hvd_init");
    int rank = hvd_rank(), size = hvd_size();

    /*
     * Step 2: pin this process to its rank's GPU. Under horovodrun's GPU
     * pinning each rank sees one device, and hvd_device() says 0.
     */
    int device = hvd_device();
    check(device, "hvd_device");
    CUDA_CHECK(cudaSetDevice(device));
    printf("rank %d of %d, local rank %d of %d\n", rank, size, hvd_local_rank(),
           hvd_local_size());
    if (rank == 0) {
        struct cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
        printf("rank 0 trains on CUDA device %d: %s\n", device, prop.name);
    }

    struct dataset train, test;
    make_spirals(&train, TRAIN_PER_CLASS, DATA_SEED);
    make_spirals(&test, TEST_PER_CLASS, DATA_SEED + 1);
    struct gpu g;
    gpu_init(&g, &train, &test);

    /* This rank's fixed share of the test set, as train.c evaluates it. */
    int *test_idx = (int *)xcalloc((size_t)test.n, sizeof(int));
    int n_test_mine = 0;
    for (int k = rank; k < test.n; k += size)
        test_idx[n_test_mine++] = k;
    UPLOAD(g.test_idx, test_idx, (size_t)n_test_mine);
    free(test_idx);

    float *params = (float *)xcalloc(N_PARAMS, sizeof(float));
    init_params(params, opt.seed, rank);
    UPLOAD(g.params, params, N_PARAMS);

    /* Step 3: scale the learning rate by the number of ranks. */
    float lr = (float)(opt.lr * size);

    /*
     * Step 4: make the optimizer distributed: every step averages the
     * gradients between the backward pass and sgd_step, on the device.
     */

    /*
     * Step 5: broadcast the initial weights from rank 0, device memory to
     * device memory. The momentum buffers are zero on every rank.
     */
    for (size_t t = 0; t < N_TENSORS; t++)
        check(hvd_broadcast(g.params + tensors[t].offset, tensors[t].count,
                            HVD_FLOAT32, 0, tensors[t].name),
              "broadcasting initial weights");

    int *shard = (int *)xcalloc((size_t)N_TRAIN, sizeof(int));
    double start = now(), test_loss = 0.0, test_acc = 0.0;
    hvd_handle handles[N_TENSORS];
    for (int epoch = 0; epoch < opt.epochs; epoch++) {
        int n = shard_epoch(shard, N_TRAIN, opt.seed, epoch, rank, size);
        UPLOAD(g.shard, shard, (size_t)n);
        /* Loss sum, correct predictions, samples of this epoch. */
        double m[3] = {0.0, 0.0, (double)n};
        CUDA_CHECK(cudaMemsetAsync(g.metrics, 0, 2 * sizeof(double), g.stream));
        for (int first = 0; first < n; first += opt.batch_size) {
            int b = n - first < opt.batch_size ? n - first : opt.batch_size;
            forward(&g, g.train_x, g.train_y, g.shard + first, b,
                    1.0f / (float)b, g.metrics);
            /* Step 4 at work: average the gradients over all ranks, each
             * layer's as soon as it is ready (or all after, with --sync). */
            backward(&g, b, opt.sync ? later : start_averaging, handles);
            if (opt.sync)
                average_gradients(&g);
            else
                finish_averaging(handles);
            sgd_step<<<blocks(N_PARAMS), THREADS, 0, g.stream>>>(
                g.params, g.velocity, g.grad, N_PARAMS, lr);
            LAUNCH_CHECK(sgd_step);
        }
        CUDA_CHECK(cudaMemcpyAsync(m, g.metrics, 2 * sizeof(double),
                                   cudaMemcpyDeviceToHost, g.stream));
        CUDA_CHECK(cudaStreamSynchronize(g.stream));
        check(hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "train.metrics"),
              "summing training metrics");
        evaluate(&g, n_test_mine, &test_loss, &test_acc);

        /* Step 6: only rank 0 logs and writes checkpoints. */
        if (rank == 0) {
            printf("epoch %d/%d: train loss %.4f, train accuracy %.2f%%, "
                   "test loss %.4f, test accuracy %.2f%%\n",
                   epoch + 1, opt.epochs, m[0] / m[2], 100.0 * m[1] / m[2],
                   test_loss, 100.0 * test_acc);
            download_params(&g, params);
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
    download_params(&g, params);
    printf("weights checksum: %016llx\n", (unsigned long long)checksum(params));

    free(shard);
    free(params);
    gpu_close(&g);
    dataset_free(&train);
    dataset_free(&test);
    check(hvd_shutdown(), "hvd_shutdown");
    return 0;
}
