/* horovodrun ps: this user's detached jobs, and --prune of ended ones. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/horovodrun/client.h"
#include "launcher/horovodrun/jobdir.h"
#include "launcher/lib/log.h"
#include "launcher/horovodrun/summary.h"

struct jobs {
    struct hr_jobinfo *v;
    size_t n, cap;
    const char *root;
};

static void add_job(void *arg, const char *id)
{
    struct jobs *j = arg;
    if (j->n == j->cap) {
        size_t cap = j->cap ? 2 * j->cap : 16;
        struct hr_jobinfo *v = realloc(j->v, cap * sizeof(*v));
        if (v == NULL)
            return;
        j->v = v;
        j->cap = cap;
    }
    if (hr_jobdir_read(j->root, id, &j->v[j->n]) == 0)
        j->n++;
}

static int by_start(const void *a, const void *b)
{
    const struct hr_jobinfo *x = a, *y = b;
    return x->started < y->started ? -1 : x->started > y->started;
}

/* "running", "exited 0", "failed 3" or "lost" (gone without a status). */
static void state(const struct hr_jobinfo *ji, char *out, size_t len)
{
    if (ji->ended)
        snprintf(out, len, "%s %d", ji->code ? "failed" : "exited", ji->code);
    else
        snprintf(out, len, "%s", hr_jobdir_alive(ji) ? "running" : "lost");
}

/* 42s, 5m, 3h, 2d. */
static void age(long secs, char *out, size_t len)
{
    if (secs < 0)
        secs = 0;
    if (secs < 120)
        snprintf(out, len, "%lds", secs);
    else if (secs < 2 * 3600)
        snprintf(out, len, "%ldm", secs / 60);
    else if (secs < 2 * 86400)
        snprintf(out, len, "%ldh", secs / 3600);
    else
        snprintf(out, len, "%ldd", secs / 86400);
}

int hr_ps_main(int argc, char **argv)
{
    int prune = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--prune") == 0) {
            prune = 1;
        } else if (strcmp(argv[i], "-h") == 0 ||
                   strcmp(argv[i], "--help") == 0) {
            printf("usage: horovodrun ps [--prune]\n");
            return 0;
        } else {
            hvd_log_error("%s: unknown option for ps; usage: horovodrun ps "
                          "[--prune]",
                          argv[i]);
            return HR_EXIT_USAGE;
        }
    }
    char root[PATH_MAX], err[512];
    if (hr_jobdir_root(root, sizeof(root), 0, err, sizeof(err)) != 0) {
        hvd_log_error("%s", err);
        return HR_EXIT_INTERNAL;
    }
    struct jobs j = {.root = root};
    if (hr_jobdir_each(root, add_job, &j) != 0) {
        hvd_log_error("cannot read %s", root);
        free(j.v);
        return HR_EXIT_INTERNAL;
    }
    qsort(j.v, j.n, sizeof(*j.v), by_start);
    long now = (long)time(NULL);
    int removed = 0;
    if (!prune)
        printf("%-8s  %-10s  %5s  %4s  %s\n", "JOB", "STATE", "RANKS", "AGE",
               "COMMAND");
    for (size_t i = 0; i < j.n; i++) {
        const struct hr_jobinfo *ji = &j.v[i];
        char st[32], a[32];
        if (prune) {
            if (ji->ended || !hr_jobdir_alive(ji)) {
                hr_jobdir_remove(root, ji->id);
                removed++;
            }
            continue;
        }
        state(ji, st, sizeof(st));
        age(now - ji->started, a, sizeof(a));
        printf("%-8s  %-10s  %5d  %4s  %s\n", ji->id, st, ji->ranks, a,
               ji->cmd);
    }
    if (prune)
        printf("removed %d ended job%s (their output files stay)\n", removed,
               removed == 1 ? "" : "s");
    free(j.v);
    return 0;
}
