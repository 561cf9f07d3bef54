/* One rank never submits two tensors that the others do: the others must
 * hear why (rank 0 warns) and, with a shutdown time, fail instead of
 * hanging. With "late", rank 1 submits them after 3 s and all succeed.
 * Run with small HOROVOD_STALL_* times. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvd.h"

int main(int argc, char **argv)
{
    int late = argc > 1 && strcmp(argv[1], "late") == 0;
    float a = 1, b = 2;
    hvd_handle ha, hb;
    if (hvd_init() != 0) {
        printf("stallcheck: %s\n", hvd_last_error());
        return 2;
    }
    int rank = hvd_rank(), ok = 1;
    if (late) {
        if (rank == 1)
            sleep(3);
        ok = hvd_allreduce(&a, &a, 1, HVD_FLOAT32, HVD_SUM, "stuck.a") == 0 &&
             hvd_allreduce(&b, &b, 1, HVD_FLOAT32, HVD_SUM, "stuck.b") == 0;
    } else if (rank != 1) {
        hvd_allreduce_async(&a, &a, 1, HVD_FLOAT32, HVD_SUM, "stuck.a", &ha);
        hvd_allreduce_async(&b, &b, 1, HVD_FLOAT32, HVD_SUM, "stuck.b", &hb);
        int ra = hvd_wait(ha);
        printf("stallcheck: rank %d: stuck.a: %s: %s\n", rank, hvd_err_name(ra),
               hvd_last_error());
        int rb = hvd_wait(hb);
        ok = ra == HVD_ETIMEDOUT && rb == HVD_ETIMEDOUT;
    } else {
        /* Back halfway through the others' second stall window: they give
         * up on stuck.* about 3 s after submitting them and then wait up
         * to 3 s for "after", so 3.5 s leaves a margin on both sides. */
        struct timespec away = {3, 500000000};
        nanosleep(&away, NULL);
    }
    /* The job goes on: everyone meets again. */
    float c = 1;
    ok &= hvd_allreduce(&c, &c, 1, HVD_FLOAT32, HVD_SUM, "after") == 0 &&
          c == (float)hvd_size();
    printf("stallcheck: rank %d: %s\n", rank, ok ? "ok" : "FAILED");
    hvd_shutdown();
    return ok ? 0 : 1;
}
