/* Says what a starting job waits for: hosts' agents, then ranks. */
#include "launcher/horovodrun/startup.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "launcher/horovodrun/elastic.h"
#include "launcher/horovodrun/job.h"
#include "launcher/horovodrun/launch_agents.h"

/* Names listed before "and N more". */
#define MAX_NAMED 3

struct text {
    char *buf;
    size_t len, cap;
};

static void add(struct text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

/* Whether rank has registered with the rendezvous server. */
static int connected(const struct hr_job *job, int rank)
{
    const struct hr_agents *g = job->launch;
    return g->rdv.ranks && g->rdv.ranks[rank] != NULL;
}

/* " (ranks 4-5, 7)": host's ranks that have not connected. */
static void missing_ranks(const struct hr_job *job, int host, struct text *t)
{
    const struct hvd_plan *p = job->plan;
    int n = 0;
    for (int r = 0; r < p->size; r++)
        n += p->ranks[r].host == host && !connected(job, r);
    add(t, " (rank%s ", n > 1 ? "s" : "");
    const char *sep = "";
    for (int r = 0; r < p->size; r++) {
        if (p->ranks[r].host != host || connected(job, r))
            continue;
        int end = r;
        while (end + 1 < p->size && p->ranks[end + 1].host == host &&
               !connected(job, end + 1))
            end++;
        if (end > r)
            add(t, "%s%d-%d", sep, r, end);
        else
            add(t, "%s%d", sep, r);
        sep = ", ";
        r = end;
    }
    add(t, ")");
}

void hr_startup_text(const struct hr_job *job, char *buf, size_t len)
{
    const struct hr_agents *g = job->launch;
    struct text t = {buf, 0, len};
    buf[0] = '\0';
    if (g->el) {
        hr_elastic_status(g->el, buf, len);
        return;
    }
    int ready = 0;
    for (int i = 0; i < g->nagents; i++)
        ready += g->agents[i]->hello;
    if (!g->started) {
        add(&t, "horovodrun: %d/%d hosts ready; waiting for", ready,
            g->nagents);
        int named = 0;
        for (int i = 0; i < g->nagents; i++)
            if (!g->agents[i]->hello && named++ < MAX_NAMED) {
                add(&t, "%s %s", named > 1 ? "," : "", g->agents[i]->name);
                if (g->agents[i]->retrying)
                    add(&t, " (%s)", g->agents[i]->retrying);
            }
        if (named > MAX_NAMED)
            add(&t, " and %d more", named - MAX_NAMED);
        return;
    }
    int size = job->plan->size, have = 0;
    for (int r = 0; r < size; r++)
        have += connected(job, r);
    if (have == size)
        return;
    add(&t, "horovodrun: %d/%d ranks connected; waiting for", have, size);
    int named = 0;
    for (int i = 0; i < g->nagents; i++) {
        int host = g->agents[i]->host, waits = 0;
        for (int r = 0; r < size && !waits; r++)
            waits = job->plan->ranks[r].host == host && !connected(job, r);
        if (!waits || named++ >= MAX_NAMED)
            continue;
        add(&t, "%s %s", named > 1 ? "," : "", g->agents[i]->name);
        missing_ranks(job, host, &t);
    }
    if (named > MAX_NAMED)
        add(&t, " and %d more hosts", named - MAX_NAMED);
}

/* A job that starts at once shows nothing. */
#define FIRST_MS 500
#define EVERY_MS 250

static void on_tick(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    char buf[512];
    hr_startup_text(job, buf, sizeof(buf));
    if (buf[0] == '\0' || job->out.started || job->stopping)
        uv_timer_stop(t);
    hr_output_start_line(&job->out, buf[0] && !job->stopping ? buf : NULL);
}

void hr_startup_start(struct hr_job *job)
{
    struct hr_agents *g = job->launch;
    if (!job->out.status || !job->out.sink[1]->tty.redraw)
        return;
    uv_timer_init(job->loop, &g->startup_timer);
    g->startup_timer.data = job;
    uv_timer_start(&g->startup_timer, on_tick, FIRST_MS, EVERY_MS);
}
