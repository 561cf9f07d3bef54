/* The stall inspector: rank 0 names the ranks that hold tensors up and,
 * after the shutdown time, makes every rank give up on them. */
#include "worker/stall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ctx.h"
#include "worker/sock.h"
#include "worker/wait.h"

struct stall_scan {
    struct hvd_ctx *c;
    char **byrank; /* names each missing rank holds up, for the warning */
    int *nbyrank;
    int shutdown; /* collecting names to give up on */
};

/* The warning lists, for every missing rank, up to 6 names. */
static void note_stall(void *vctx, const char *name, int pset,
                       const uint8_t *seen)
{
    struct stall_scan *s = vctx;
    struct hvd_ctx *c = s->c;
    if (s->shutdown) {
        struct hvd_stalled *n = realloc(c->stall, (c->nstall + 1) * sizeof(*n));
        if (n && (n[c->nstall].name = strdup(name)) != NULL)
            n[c->nstall++].pset = pset;
        if (n)
            c->stall = n;
        return;
    }
    for (int r = 0; r < c->size; r++) {
        if (seen[r] || s->nbyrank[r]++ >= 6)
            continue;
        size_t len = strlen(s->byrank[r]);
        snprintf(s->byrank[r] + len, 256 - len, "%s%s", len ? ", " : "", name);
    }
}

/*
 * Rank 0 looks for names that some ranks submitted and others have not:
 * it warns (once per warning period) naming the missing ranks and what
 * they hold up, and after the shutdown time makes every rank give up on
 * them, so that a job ends instead of hanging.
 */
void hvd__stall_check(struct hvd_ctx *c)
{
    int64_t now = hvd__now_us();
    if (c->rank != 0 || c->stall_off || c->neg.used == 0 ||
        now < c->stall_next_us)
        return;
    c->stall_next_us = now + 1000000;
    struct stall_scan s = {c, calloc((size_t)c->size, sizeof(char *)),
                           calloc((size_t)c->size, sizeof(int)), 0};
    char *line = malloc(8192);
    if (s.byrank == NULL || s.nbyrank == NULL || line == NULL)
        goto out;
    for (int r = 0; r < c->size; r++)
        if ((s.byrank[r] = calloc(1, 256)) == NULL)
            goto out;
    if (now - c->stall_warned_us >= (int64_t)(c->stall_warn_s * 1e6)) {
        hvd__neg_each_waiting(&c->neg, now - (int64_t)(c->stall_warn_s * 1e6),
                              note_stall, &s);
        int n = 0;
        for (int r = 0; r < c->size && n < 8000; r++)
            if (s.nbyrank[r])
                n += snprintf(line + n, 8192 - (size_t)n, " rank %d: [%s%s]", r,
                              s.byrank[r], s.nbyrank[r] > 6 ? ", ..." : "");
        if (n > 0) {
            /* One of libhvd's few prints, with the notice that device
             * buffers are staged through host memory and the transport
             * line at debug level: a stalled job has nobody else to say
             * why it waits. */
            fprintf(stderr,
                    "hvd: warning: stall: for more than %g s some ranks "
                    "have submitted tensors that these ranks have not:%s "
                    "(HOROVOD_STALL_CHECK_TIME_SECONDS)\n",
                    c->stall_warn_s, line);
            c->stall_warned_us = now;
        }
    }
    if (c->stall_shutdown_s > 0) {
        s.shutdown = 1;
        hvd__neg_each_waiting(&c->neg,
                              now - (int64_t)(c->stall_shutdown_s * 1e6),
                              note_stall, &s);
    }
out:
    for (int r = 0; s.byrank && r < c->size; r++)
        free(s.byrank[r]);
    free(s.byrank);
    free(s.nbyrank);
    free(line);
}
