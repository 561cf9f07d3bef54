/* Checks the run-time API that collcheck does not: hvd_built,
 * hvd_transport, and the timeline started and stopped mid-run. Run under
 * horovodrun as "tlcheck FIRST SECOND": rank 0 writes tensors "tl1.*" to
 * FIRST, then "tl2.*" to SECOND; test_runtime.py checks the files. A
 * second thread submits allreduces all along, so that ThreadSanitizer
 * sees the timeline change hands while collectives run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"
#include "hvd_build.h"

static int rank;
static atomic_int failures, checks; /* both threads check */

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        printf("tlcheck: rank %d: FAILED %s (%s)\n", rank, what,
               hvd_last_error());
    }
}

/* n allreduces named prefix.0 to prefix.n-1, each checked. */
static void allreduces(const char *prefix, int n)
{
    char name[64];
    for (int i = 0; i < n; i++) {
        int32_t v[4] = {1, 2, 3, i};
        snprintf(name, sizeof(name), "%s.%d", prefix, i);
        int rc = hvd_allreduce(v, v, 4, HVD_INT32, HVD_SUM, name);
        int size = hvd_size();
        check(rc == 0 && v[0] == size && v[3] == i * size, name);
    }
}

/* Allreduces from a second thread, as many on every rank, so that
 * their names pair up. */
static void *background(void *arg)
{
    (void)arg;
    char name[64];
    for (int i = 0; i < 200; i++) {
        float x = 1;
        snprintf(name, sizeof(name), "bg.%d", i);
        int rc = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, name);
        check(rc == 0 && x == (float)hvd_size(), name);
    }
    return NULL;
}

/* What is known before hvd_init. */
static void before_init(void)
{
    check(hvd_start_timeline("x.json", 0) == HVD_ENOTINIT,
          "hvd_start_timeline before hvd_init");
    check(hvd_stop_timeline() == HVD_ENOTINIT,
          "hvd_stop_timeline before hvd_init");
    check(strcmp(hvd_transport(), "") == 0, "no transport before hvd_init");
    check(hvd_built("mpi") == HVD_HAVE_MPI, "hvd_built(\"mpi\")");
    check(hvd_built("cuda") == HVD_HAVE_CUDA, "hvd_built(\"cuda\")");
    int nccl = hvd_built("nccl");
    check(HVD_HAVE_NCCL ? nccl >= 20000 : nccl == 0, "hvd_built(\"nccl\")");
    check(hvd_built("gloo") == 0 && hvd_built("") == 0 &&
              hvd_built(NULL) == 0 && hvd_built("MPI ") == 0,
          "hvd_built of other names");
    printf("tlcheck: built mpi=%d cuda=%d nccl=%d\n", hvd_built("mpi"),
           hvd_built("cuda"), nccl);
}

int main(int argc, char **argv)
{
    pthread_t bg;
    char turns[4096];
    if (argc < 3) {
        fprintf(stderr, "usage: tlcheck FIRST SECOND\n");
        return 2;
    }
    before_init();
    if (hvd_init() != 0) {
        printf("tlcheck: hvd_init failed: %s\n", hvd_last_error());
        return 2;
    }
    rank = hvd_rank();
    const char *tp = hvd_transport();
    check(strcmp(tp, "ring") == 0 || strcmp(tp, "shm") == 0 ||
              strcmp(tp, "hier") == 0 || strcmp(tp, "mpi") == 0,
          "a transport name");
    printf("tlcheck: rank %d transport %s\n", rank, tp);

    /* Traced only by a HOROVOD_TIMELINE started with hvd_init. */
    allreduces("before", 3);
    pthread_create(&bg, NULL, background, NULL);
    check(hvd_start_timeline(argv[1], 1) == 0, "start the first timeline");
    allreduces("tl1", 3);
    /* Replaces the first, which is closed. */
    check(hvd_start_timeline(argv[2], 0) == 0, "start the second timeline");
    allreduces("tl2", 3);
    /* Nothing changes when the new file cannot be opened (on rank 0 of a
     * launched job; elsewhere the call does nothing), or no path is
     * given. */
    int writes = rank == 0 && (getenv("HOROVOD_RANK") != NULL ||
                               getenv("OMPI_COMM_WORLD_RANK") != NULL);
    int rc = hvd_start_timeline("/nonexistent/dir/timeline.json", 0);
    check(writes ? rc == HVD_ESYS &&
                       strstr(hvd_last_error(), "/nonexistent/dir") != NULL
                 : rc == 0,
          "a timeline that cannot be opened");
    check(hvd_start_timeline("", 0) == HVD_EINVAL &&
              hvd_start_timeline(NULL, 0) == HVD_EINVAL,
          "a timeline without a path");
    allreduces("tl2b", 2);
    check(hvd_stop_timeline() == 0, "stop the timeline");
    allreduces("after", 3);
    check(hvd_stop_timeline() == 0, "stop without a timeline");
    /* Quick turns while the other thread's allreduces run, in a third
     * file. */
    snprintf(turns, sizeof(turns), "%s.turns", argv[2]);
    for (int i = 0; i < 5; i++)
        check(hvd_start_timeline(turns, i & 1) == 0 && hvd_stop_timeline() == 0,
              "start and stop again");
    pthread_join(bg, NULL);
    printf("tlcheck: rank %d of %d: %d checks, %d failures\n", rank, hvd_size(),
           atomic_load(&checks), atomic_load(&failures));
    hvd_shutdown();
    return failures ? 1 : 0;
}
