/* Data-parallel MLP training on a GPU with libhvd: train.c's model on CUDA. */
/*
 * The same model, data, hyper-parameters, log lines and checkpoint as
 * train.c (train_common's, shared by both), so that
 * tests/example/test_train.py's checks apply to it too; the forward and
 * backward passes run on the GPU (cuBLAS for the matrix products, small
 * kernels for the rest), and libhvd averages the gradients on the device:
 * each layer's gradient tensors are handed to hvd_allreduce_async as device
 * pointers as soon as the layer is done. The bits differ from train.c's,
 * because the GPU sums in another order, but every rank of one run ends
 * with the same weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "hvd.h"
#include "train_common.h"

const struct train_program this_program = {
    "train_cuda",
    "Trains a small MLP on a synthetic spiral data set on this rank's GPU; "
    "run it\nunder horovodrun -np N for data-parallel training.\n",
    "Exits 77 when there is no CUDA device.\n",
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

/*
 * A failing CUDA or cuBLAS call ends the program, as a failing libhvd call
 * does (train_check), and the message names the call.
 */
static void call_failed(const char *call, const char *file, int line,
                        const char *why, const char *code)
{
    fprintf(stderr, "%s: %s failed at %s:%d: %s (%s)\n", this_program.name,
            call, file, line, why, code);
    exit(1);
}

static void cuda_check(cudaError_t e, const char *call, const char *file,
                       int line)
{
    if (e != cudaSuccess)
        call_failed(call, file, line, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

static void cublas_check(cublasStatus_t s, const char *call, const char *file,
                         int line)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        call_failed(call, file, line, cublasGetStatusString(s),
                    cublasGetStatusName(s));
}

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)
/* A launch's own errors (bad configuration) show at once; a fault in the
 * kernel shows at the next synchronizing call, which is checked too. */
#define LAUNCH_CHECK(kernel)                                                   \
    cuda_check(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__)

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
        train_check(hvd_allreduce_async(g->grad + train_tensors[t].offset,
                                        g->grad + train_tensors[t].offset,
                                        train_tensors[t].count, HVD_FLOAT32,
                                        HVD_AVERAGE, train_tensors[t].name,
                                        &handles[t]),
                    "averaging gradients");
}

static void finish_averaging(hvd_handle *handles)
{
    for (size_t t = 0; t < N_TENSORS; t++)
        train_check(hvd_wait(handles[t]), "averaging gradients");
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
        train_check(hvd_allreduce(g->grad + train_tensors[t].offset,
                                  g->grad + train_tensors[t].offset,
                                  train_tensors[t].count, HVD_FLOAT32,
                                  HVD_AVERAGE, train_tensors[t].name),
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
    train_check(hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "test.metrics"),
                "summing test metrics");
    *loss = m[0] / m[2];
    *accuracy = m[1] / m[2];
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
    fprintf(stderr, "%s: no CUDA device: %s\n", this_program.name,
            cudaGetErrorString(e != cudaSuccess ? e : cudaErrorNoDevice));
    exit(77);
}

int main(int argc, char **argv)
{
    struct options opt;
    train_parse_options(argc, argv, &opt);
    require_gpu();

    /* Step 1: join the job (a job of one rank without horovodrun). */
    train_check(hvd_init(), "hvd_init");
    int rank = hvd_rank(), size = hvd_size();

    /*
     * Step 2: pin this process to its rank's GPU. Under horovodrun's GPU
     * pinning each rank sees one device, and hvd_device() says 0.
     */
    int device = hvd_device();
    train_check(device, "hvd_device");
    CUDA_CHECK(cudaSetDevice(device));
    printf("rank %d of %d, local rank %d of %d\n", rank, size, hvd_local_rank(),
           hvd_local_size());
    if (rank == 0) {
        struct cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
        printf("rank 0 trains on CUDA device %d: %s\n", device, prop.name);
    }

    struct dataset train, test;
    train_make_data(&train, &test);
    struct gpu g;
    gpu_init(&g, &train, &test);

    /* This rank's fixed share of the test set, as train.c evaluates it. */
    int *test_idx = (int *)train_xcalloc((size_t)test.n, sizeof(int));
    int n_test_mine = 0;
    for (int k = rank; k < test.n; k += size)
        test_idx[n_test_mine++] = k;
    UPLOAD(g.test_idx, test_idx, (size_t)n_test_mine);
    free(test_idx);

    float *params = (float *)train_xcalloc(N_PARAMS, sizeof(float));
    train_init_params(params, opt.seed, rank);
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
        train_check(hvd_broadcast(g.params + train_tensors[t].offset,
                                  train_tensors[t].count, HVD_FLOAT32, 0,
                                  train_tensors[t].name),
                    "broadcasting initial weights");

    int *shard = (int *)train_xcalloc((size_t)N_TRAIN, sizeof(int));
    double start = train_now(), test_loss = 0.0, test_acc = 0.0;
    hvd_handle handles[N_TENSORS];
    for (int epoch = 0; epoch < opt.epochs; epoch++) {
        int n = train_shard_epoch(shard, N_TRAIN, opt.seed, epoch, rank, size);
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
        train_check(
            hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "train.metrics"),
            "summing training metrics");
        evaluate(&g, n_test_mine, &test_loss, &test_acc);

        /* Step 6: only rank 0 logs and writes checkpoints. */
        if (rank == 0) {
            train_log_epoch(epoch, opt.epochs, m, test_loss, test_acc);
            download_params(&g, params);
            if (train_save_checkpoint(opt.checkpoint, params, epoch + 1) != 0)
                return 1;
        }
    }
    double elapsed = train_now() - start;

    if (rank == 0)
        train_log_final(&opt, test_acc, test.n, size, elapsed);
    /* Every rank reports its weights; the hashes must all be equal. */
    download_params(&g, params);
    train_log_checksum(params);

    free(shard);
    free(params);
    gpu_close(&g);
    train_dataset_free(&train);
    train_dataset_free(&test);
    train_check(hvd_shutdown(), "hvd_shutdown");
    return 0;
}
