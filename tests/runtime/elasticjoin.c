/* One process of an elastic job, against test_elastic_join.py's fake
 * rendezvous server.
 *
 *   elasticjoin GENS   GENS times: hvd_init, say the place the server
 *                      assigned, allreduce the process's id (the sum
 *                      proves the peers connected in the assigned order),
 *                      wait up to 5 s for a host notice in the first
 *                      generation and say what hvd_host_updates gives,
 *                      hvd_shutdown. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hvd.h"

static int updates_within(int ms, uint64_t *ts)
{
    struct timespec step = {0, 10 * 1000 * 1000};
    int changes = 0;
    for (int t = 0; t < ms && !changes; t += 10) {
        changes = hvd_host_updates(ts);
        if (!changes)
            nanosleep(&step, NULL);
    }
    return changes;
}

int main(int argc, char **argv)
{
    int gens = argc > 1 ? atoi(argv[1]) : 1;
    int id = atoi(getenv("HOROVOD_ELASTIC_ID") ? getenv("HOROVOD_ELASTIC_ID")
                                               : "-1");
    for (int g = 0; g < gens; g++) {
        if (hvd_init() != 0) {
            printf("gen %d: id %d: hvd_init failed: %s\n", g, id,
                   hvd_last_error());
            return 1;
        }
        int32_t mine = id, sum = -1;
        int rc = hvd_allreduce(&mine, &sum, 1, HVD_INT32, HVD_SUM, "ids");
        uint64_t ts = 0;
        int changes = updates_within(g == 0 ? 5000 : 300, &ts);
        printf("gen %d: id %d rank %d size %d local %d/%d cross %d/%d "
               "sum %d rc %d updates %d at %llu\n",
               g, id, hvd_rank(), hvd_size(), hvd_local_rank(),
               hvd_local_size(), hvd_cross_rank(), hvd_cross_size(), sum, rc,
               changes, (unsigned long long)ts);
        fflush(stdout);
        hvd_shutdown();
    }
    return 0;
}
