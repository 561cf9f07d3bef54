/* What train.c and train_cuda.cu share: the model, data, options, output. */
#ifndef TRAIN_COMMON_H
#define TRAIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* train_cuda.cu includes this header from C++ (nvcc). */
#ifdef __cplusplus
extern "C" {
#endif

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

#define MOMENTUM 0.9f

/*
 * The model's six tensors live in one array, each at its own offset; a
 * weight is row-major, one row per output. Both programs use this layout,
 * so that their checkpoints have the same format.
 */
enum {
    FC1_W = 0,
    FC1_B = FC1_W + HIDDEN * IN_DIM,
    FC2_W = FC1_B + HIDDEN,
    FC2_B = FC2_W + HIDDEN * HIDDEN,
    FC3_W = FC2_B + HIDDEN,
    FC3_B = FC3_W + CLASSES * HIDDEN,
    N_PARAMS = FC3_B + CLASSES,
    N_TENSORS = 6, /* a weight and a bias per layer */
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
extern const struct tensor train_tensors[];

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
 * What sets one program apart in its messages. Each program defines
 * this_program once; it is constant, so the helpers below read it instead
 * of taking it as an argument.
 */
struct train_program {
    const char *name;  /* starts every message, e.g. "train" */
    const char *about; /* the usage text's lines after the synopsis */
    const char *notes; /* the usage text's lines after the options, or "" */
};
extern const struct train_program this_program;

/*
 * Any failing libhvd call ends the program: a rank that went on alone would
 * only deadlock or diverge from the others. hvd_last_error() says which
 * collective failed and which peer was involved.
 */
void train_check(int rc, const char *what);

/* calloc() that ends the program when memory runs out. */
void *train_xcalloc(size_t n, size_t size);

/* Parses the command line into o; exits on --help and on any error. */
void train_parse_options(int argc, char **argv, struct options *o);

/*
 * Generates the training and test sets: the same in every run and on every
 * rank, whatever --seed says, so that accuracies of runs can be compared.
 */
void train_make_data(struct dataset *train, struct dataset *test);
void train_dataset_free(struct dataset *d);

/*
 * Writes this rank's share of one epoch's sample indices to out (room for
 * n); returns how many it wrote.
 */
int train_shard_epoch(int *out, int n, uint64_t seed, int epoch, int rank,
                      int size);

/* This rank's own initial weights, before the broadcast from rank 0. */
void train_init_params(float *params, uint64_t seed, int rank);

/* Writes a checkpoint of the weights; says why and returns -1 if it fails. */
int train_save_checkpoint(const char *path, const float *params, int epoch);

/* Seconds on a monotonic clock. */
double train_now(void);

/*
 * Rank 0's line after each epoch; m holds the epoch's loss sum, correct
 * predictions and samples, summed over all ranks.
 */
void train_log_epoch(int epoch, int epochs, const double m[3], double test_loss,
                     double test_acc);

/* Rank 0's summary after the last epoch. */
void train_log_final(const struct options *o, double test_acc, int n_test,
                     int size, double elapsed);

/* Every rank's last line: a hash of its weights, equal on all ranks. */
void train_log_checksum(const float *params);

#ifdef __cplusplus
}
#endif

#endif
