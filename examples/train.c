/* Data-parallel MLP training with libhvd, following Horovod's usage steps. */
/*
 * The model, data, options, log lines and checkpoint are train_common's,
 * shared with train_cuda.cu; this file holds the host computation and the
 * Horovod steps, each marked where it happens.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"
#include "train_common.h"

const struct train_program this_program = {
    "train",
    "Trains a small MLP on a synthetic spiral data set; run it under\n"
    "horovodrun -np N for data-parallel training.\n",
    "",
};

/* Activations of one sample, kept for the backward pass. */
struct activations {
    float h1[HIDDEN];
    float h2[HIDDEN];
    float p[CLASSES]; /* softmax probabilities */
};

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
        train_check(hvd_allreduce_async(grad + train_tensors[t].offset,
                                        grad + train_tensors[t].offset,
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
        train_check(hvd_allreduce(grad + train_tensors[t].offset,
                                  grad + train_tensors[t].offset,
                                  train_tensors[t].count, HVD_FLOAT32,
                                  HVD_AVERAGE, train_tensors[t].name),
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
    train_check(hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "test.metrics"),
                "summing test metrics");
    *loss = m[0] / m[2];
    *accuracy = m[1] / m[2];
}

int main(int argc, char **argv)
{
    struct options opt;
    train_parse_options(argc, argv, &opt);

    /* Step 1: join the job (a job of one rank without horovodrun). */
    train_check(hvd_init(), "hvd_init");
    int rank = hvd_rank(), size = hvd_size();

    /*
     * Step 2: pin this process to its rank's GPU. A GPU program would
     * select device hvd_local_rank() here; this example has no GPU code,
     * so it only reports where it runs.
     */
    printf("rank %d of %d, local rank %d of %d\n", rank, size, hvd_local_rank(),
           hvd_local_size());

    struct dataset train, test;
    train_make_data(&train, &test);

    float *params = train_xcalloc(N_PARAMS, sizeof(float));
    float *grad = train_xcalloc(N_PARAMS, sizeof(float));
    float *velocity = train_xcalloc(N_PARAMS, sizeof(float));
    train_init_params(params, opt.seed, rank);

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
        train_check(hvd_broadcast(params + train_tensors[t].offset,
                                  train_tensors[t].count, HVD_FLOAT32, 0,
                                  train_tensors[t].name),
                    "broadcasting initial weights");

    int *shard = train_xcalloc((size_t)N_TRAIN, sizeof(int));
    double start = train_now(), test_loss = 0.0, test_acc = 0.0;
    static struct activations a[MAX_BATCH];
    const float *xs[MAX_BATCH];
    int ys[MAX_BATCH];
    hvd_handle handles[N_TENSORS];
    for (int epoch = 0; epoch < opt.epochs; epoch++) {
        int n = train_shard_epoch(shard, N_TRAIN, opt.seed, epoch, rank, size);
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
        train_check(
            hvd_allreduce(m, m, 3, HVD_FLOAT64, HVD_SUM, "train.metrics"),
            "summing training metrics");
        evaluate(params, &test, &test_loss, &test_acc);

        /* Step 6: only rank 0 logs and writes checkpoints. */
        if (rank == 0) {
            train_log_epoch(epoch, opt.epochs, m, test_loss, test_acc);
            if (train_save_checkpoint(opt.checkpoint, params, epoch + 1) != 0)
                return 1;
        }
    }
    double elapsed = train_now() - start;

    if (rank == 0)
        train_log_final(&opt, test_acc, test.n, size, elapsed);
    /* Every rank reports its weights; the hashes must all be equal. */
    train_log_checksum(params);

    free(shard);
    free(params);
    free(grad);
    free(velocity);
    train_dataset_free(&train);
    train_dataset_free(&test);
    train_check(hvd_shutdown(), "hvd_shutdown");
    return 0;
}
