/* A rank of an elastic job, in C: what hvd.elastic.run does, without a
 * framework, so that the launcher and libhvd run elastic jobs under the
 * sanitizers too.
 *
 *   elasticrank STEPS   runs STEPS steps; each step allreduces ones (the
 *                       sum must be the size) and agrees with rank 0 on
 *                       whether horovodrun sent a host notice, then adds
 *                       step + 1 to its "weight" and commits (step and
 *                       weight). On a failed collective or an agreed
 *                       notice it resets: hvd_shutdown, hvd_init, and
 *                       takes rank 0's committed step and weight. A job
 *                       that lost no commit and applied none twice ends
 *                       with weight STEPS * (STEPS + 1) / 2 on every rank.
 *
 * Environment (all optional):
 *   ER_FAIL=R:S:HOW   the process that started as rank R ends at step S of
 *                     its first generation: HOW is "exit" (status 1) or
 *                     "kill" (SIGKILL)
 *   ER_RESET_EVERY=K  every rank resets every K steps, failure or not
 *   ER_FLAG=PATH:S    rank 0 creates PATH at step S (a discovery script
 *                     may list more hosts once it exists)
 *   ER_STEP_MS=MS     each step sleeps MS milliseconds (a job long enough
 *                     for hosts to join)
 *   ER_FLOATS=N       each step's allreduce has N floats (default 2)
 *
 * At the end each rank prints
 *   elasticrank: start S rank R of N: STEPS steps, RESETS resets, gen G;
 *   descriptors A -> B, threads C -> D, weight W
 * with the descriptors and threads before the first hvd_init and after
 * the last hvd_shutdown. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hvd.h"
#include "proccount.h"

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    const char *sr = getenv("HOROVOD_RANK");
    int start = sr ? atoi(sr) : 0;
    int fail_rank = -1, fail_step = -1, every = 0, flag_step = -1, ms = 0;
    char how[16] = "", flag[4096] = "";
    const char *v;
    if ((v = getenv("ER_FAIL")) != NULL)
        sscanf(v, "%d:%d:%15s", &fail_rank, &fail_step, how);
    if ((v = getenv("ER_RESET_EVERY")) != NULL)
        every = atoi(v);
    if ((v = getenv("ER_STEP_MS")) != NULL)
        ms = atoi(v);
    size_t nf =
        (v = getenv("ER_FLOATS")) != NULL && atoi(v) > 2 ? (size_t)atoi(v) : 2;
    float *buf = calloc(nf, sizeof(*buf));
    if (buf == NULL)
        return 5;
    struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
    if ((v = getenv("ER_FLAG")) != NULL) {
        const char *colon = strrchr(v, ':');
        if (colon && (size_t)(colon - v) < sizeof(flag)) {
            memcpy(flag, v, (size_t)(colon - v));
            flag_step = atoi(colon + 1);
        }
    }
    int fds = count_entries("/proc/self/fd");
    int threads = count_entries("/proc/self/task");
    int step = 0, resets = 0, gen = 0;
    double w = 0;

    while (step < steps) {
        if (hvd_init() != 0) {
            printf("elasticrank: start %d: hvd_init: %s\n", start,
                   hvd_last_error());
            return 3;
        }
        /* Rank 0 has the state: every rank goes on from its commit. */
        double st[2] = {step, w};
        if (hvd_broadcast(st, 2, HVD_FLOAT64, 0, "state") != 0)
            goto reset;
        step = (int)st[0];
        w = st[1];
        for (; step < steps; step++) {
            if (gen == 0 && start == fail_rank && step == fail_step) {
                if (strcmp(how, "kill") == 0)
                    raise(SIGKILL);
                printf("elasticrank: start %d fails at step %d\n", start, step);
                fflush(stdout);
                exit(1);
            }
            if (hvd_rank() == 0 && step == flag_step && flag[0])
                touch(flag);
            if (ms > 0)
                nanosleep(&pause, NULL);
            uint64_t ts;
            for (size_t i = 0; i < nf; i++)
                buf[i] = 1;
            /* The notice as rank 0 saw it, for everyone. */
            buf[1] = hvd_rank() == 0 ? (float)(hvd_host_updates(&ts) != 0) : 0;
            if (hvd_allreduce(buf, buf, nf, HVD_FLOAT32, HVD_SUM, "step") != 0)
                goto reset;
            if (buf[0] != (float)hvd_size()) {
                printf("elasticrank: start %d: sum %g at size %d\n", start,
                       buf[0], hvd_size());
                return 4;
            }
            /* The step is done: its update, then the commit. */
            w += step + 1;
            if (gen == 0 && step == 0) {
                printf("elasticrank: start %d ready\n", start);
                fflush(stdout);
            }
            if (buf[1] > 0 || (every > 0 && step > 0 && step % every == 0 &&
                               resets < step / every)) {
                step++;
                goto reset;
            }
        }
        break;
    reset:
        hvd_shutdown();
        resets++;
        gen++;
    }
    int rank = hvd_rank(), size = hvd_size();
    hvd_shutdown();
    printf("elasticrank: start %d rank %d of %d: %d steps, %d resets, gen "
           "%d; descriptors %d -> %d, threads %d -> %d, weight %.0f\n",
           start, rank, size, step, resets, gen, fds,
           count_entries("/proc/self/fd"), threads,
           count_entries("/proc/self/task"), w);
    free(buf);
    return 0;
}
