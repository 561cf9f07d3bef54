/* An elastic job's controller: Horovod's elastic driver on our loop. */
#include "launcher/horovodrun/elastic.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "launcher/horovodrun/discover_run.h"
#include "launcher/horovodrun/job.h"
#include "launcher/horovodrun/launch_agents.h"
#include "launcher/lib/blacklist.h"
#include "launcher/lib/discovery.h"
#include "launcher/lib/elastic_plan.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"

/* Horovod runs the discovery every second; HOROVOD_ELASTIC_DISCOVERY_
 * INTERVAL changes that. A script that hangs fails after this long. */
#define DISCOVERY_INTERVAL_S 1.0
#define DISCOVERY_TIMEOUT_S 30.0

enum phase {
    PH_START,   /* waiting for -np slots for the first assignment */
    PH_FORMING, /* the assignment's processes register */
    PH_RUNNING, /* the generation formed: training */
    PH_RESET,   /* some processes registered again or ended */
    PH_WAIT,    /* reset decided; waiting for --min-np slots */
    PH_ENDED
};

/* What became of a process, as Horovod's worker registry records it.
 * P_ORPHAN: it ended with the agent that had started its own agent (the
 * tree launch), a failure that blacklists nothing. */
enum pstate { P_RUN, P_READY, P_SUCCESS, P_FAILURE, P_STOPPED, P_ORPHAN };

struct hr_elastic {
    struct hr_job *job;
    struct hr_agents *g;
    struct hvd_hostlist hosts; /* every host ever used: job->hosts */
    struct hvd_plan procs;     /* one entry per process id: job->plan */
    int cap;
    unsigned char *state;      /* per id: enum pstate */
    unsigned char *assigned;   /* per id: has a rank in cur */
    struct hr_eplan cur;       /* the current assignment */
    int *id_of_rank;           /* cur.plan.size entries */
    struct hvd_hostlist found; /* the last discovery's hosts */
    /* Without a script: the hosts of -H, --hostfile or Slurm, "found"
     * again every interval, so that a host's cooldown ending is seen. */
    struct hvd_hostlist fixed;
    uv_timer_t fixed_timer;
    int have_found;
    int pending; /* host changes not told to the ranks (HR_DISCOVERY_*) */
    struct hr_blacklist bl;
    struct hr_discover *disc;
    uv_timer_t wait_timer;
    /* A reset waits this long (--start-timeout) for every process of the
     * assignment to join again or end: one that is stopped (SIGSTOP) or
     * hangs outside a collective is then killed. */
    uv_timer_t reset_timer;
    int timer_init;
    enum phase phase;
    unsigned resets;
    int registered;       /* some process has registered with the rendezvous */
    uint64_t last_notice; /* the last notice's timestamp */
    char script[4200];    /* the discovery script, quoted for sh -c */
    int end_code;
    int end_id; /* the process whose end the summary names, or -1 */
    char end_msg[512];
};

static void replan(struct hr_elastic *el);
static void check(struct hr_elastic *el);
static void enter_reset(struct hr_elastic *el);

static struct hr_elastic *el_of(const struct hr_job *job)
{
    return ((struct hr_agents *)job->launch)->el;
}

static const char *proc_host(const struct hr_elastic *el, int id)
{
    return el->hosts.hosts[el->procs.ranks[id].host].name;
}

/* Ends the job: stops every process; the summary says why. */
static void end(struct hr_elastic *el, int code, int id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void end(struct hr_elastic *el, int code, int id, const char *fmt, ...)
{
    va_list ap;
    if (el->phase == PH_ENDED)
        return;
    el->phase = PH_ENDED;
    el->end_code = code;
    el->end_id = id;
    va_start(ap, fmt);
    vsnprintf(el->end_msg, sizeof(el->end_msg), fmt, ap);
    va_end(ap);
    hr_discover_close(el->disc);
    el->disc = NULL;
    if (el->timer_init) {
        uv_timer_stop(&el->wait_timer);
        uv_timer_stop(&el->reset_timer);
        uv_timer_stop(&el->fixed_timer);
    }
    hr_job_stop(el->job, 0);
    if (el->g->agents_left == 0)
        hr_job_ended(el->job);
}

static int copy_hosts(struct hvd_hostlist *dst, const struct hvd_hostlist *src)
{
    hvd_hostlist_close(dst);
    for (size_t i = 0; i < src->n; i++) {
        int rc = hvd_hostlist_add(dst, src->hosts[i].name, src->hosts[i].slots);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The index of host name in el->hosts, which only grows. */
static int host_index(struct hr_elastic *el, const char *name)
{
    for (size_t i = 0; i < el->hosts.n; i++)
        if (strcmp(el->hosts.hosts[i].name, name) == 0)
            return (int)i;
    if (hvd_hostlist_add(&el->hosts, name, 1) != 0)
        return -1;
    return (int)el->hosts.n - 1;
}

/* A new process id; the arrays grow with it. -1 without memory. */
static int new_proc(struct hr_elastic *el)
{
    if (el->procs.size == el->cap) {
        int cap = el->cap ? 2 * el->cap : 16;
        struct hvd_slot *r = realloc(el->procs.ranks, (size_t)cap * sizeof(*r));
        unsigned char *s = r ? realloc(el->state, (size_t)cap) : NULL;
        if (r)
            el->procs.ranks = r;
        if (s)
            el->state = s;
        unsigned char *a = s ? realloc(el->assigned, (size_t)cap) : NULL;
        if (a == NULL)
            return -1;
        el->assigned = a;
        el->cap = cap;
    }
    int id = el->procs.size++;
    el->state[id] = P_RUN;
    el->assigned[id] = 0;
    return id;
}

static void kill_proc(struct hr_elastic *el, int id, int now)
{
    if (el->state[id] == P_RUN || el->state[id] == P_READY)
        el->state[id] = P_STOPPED;
    el->assigned[id] = 0;
    hr_agents_kill(el->job, id, now);
}

/* The rendezvous server's news. */
static void on_registered(void *arg, int id)
{
    struct hr_elastic *el = arg;
    el->registered = 1;
    if (id >= el->procs.size || !el->assigned[id] || el->phase == PH_ENDED)
        return;
    if (el->state[id] == P_RUN)
        el->state[id] = P_READY;
    if (el->phase == PH_RUNNING) {
        hvd_log_info("elastic: rank %d (%s) joins again: the ranks reset",
                     el->procs.ranks[id].rank, proc_host(el, id));
        enter_reset(el);
    }
    check(el);
}

/* Tells every process that the hosts changed, when that would change the
 * assignment (as Horovod's driver does). */
static void notify(struct hr_elastic *el, int changes)
{
    struct hr_eplan next;
    struct hvd_hostlist avail;
    char err[256];
    hr_eplan_init(&next);
    hvd_hostlist_init(&avail);
    int rc = hr_blacklist_filter(&el->bl, &el->found, uv_now(el->job->loop),
                                 &avail, NULL);
    if (rc == 0)
        rc = hr_eplan_next(&next, &el->cur, &avail, el->job->opts->min_np,
                           el->job->opts->max_np, err, sizeof(err));
    int changed = rc == HVD_ENOSLOTS || rc == HVD_EPEER ||
                  (rc == 0 && !hr_eplan_unchanged(&next));
    hr_eplan_close(&next);
    hvd_hostlist_close(&avail);
    if (!changed)
        return;
    uint64_t ts = (uint64_t)time(NULL);
    if (ts <= el->last_notice) /* each notice newer than the last */
        ts = el->last_notice + 1;
    el->last_notice = ts;
    hvd_log_info("elastic: hosts %s; telling the ranks",
                 changes == HR_DISCOVERY_ADDED     ? "added"
                 : changes == HR_DISCOVERY_REMOVED ? "removed"
                                                   : "added and removed");
    hr_rdv_notify_hosts(&el->g->rdv, ts, (uint8_t)changes);
}

static void on_formed(void *arg, unsigned gen)
{
    struct hr_elastic *el = arg;
    if (el->phase != PH_FORMING)
        return;
    el->phase = PH_RUNNING;
    for (int id = 0; id < el->procs.size; id++)
        if (el->assigned[id] && el->state[id] == P_READY)
            el->state[id] = P_RUN;
    hvd_log_info("elastic: %d ranks on %zu hosts running (initialisation "
                 "%u, %u resets)",
                 el->cur.plan.size, el->cur.hosts.n, gen + 1, el->resets);
    if (el->pending) {
        int changes = el->pending;
        el->pending = 0;
        notify(el, changes);
    }
}

/* The plan's processes did not all register in time: those that did not
 * are killed, which fails them. */
static void on_rdv_timeout(void *arg)
{
    struct hr_elastic *el = arg;
    for (int i = 0; i < el->cur.plan.size; i++) {
        int id = el->id_of_rank[i];
        if (el->state[id] != P_RUN || hr_rdv_registered(&el->g->rdv, id))
            continue;
        hvd_log_warn("elastic: rank %d on %s did not call hvd_init within "
                     "%g s (--start-timeout); it is stopped",
                     i, proc_host(el, id), el->job->opts->start_timeout);
        hr_agents_kill(el->job, id, 1);
    }
}

static const struct hr_rdv_cb rdv_cb = {
    .registered = on_registered,
    .formed = on_formed,
    .timeout = on_rdv_timeout,
};

/* Makes next the current assignment: kept processes take their new ranks,
 * new slots get new processes, removed ones are stopped; the rendezvous
 * server gets the generation's plan. */
static void apply(struct hr_elastic *el, struct hr_eplan *next)
{
    struct hr_job *job = el->job;
    int n = next->plan.size, first_new = el->procs.size;
    int *ids = malloc((size_t)n * sizeof(*ids));
    struct hvd_rdv_assign *as = malloc((size_t)n * sizeof(*as));
    if (ids == NULL || as == NULL)
        goto nomem;
    for (int r = 0; r < next->nremoved; r++) {
        int id = el->id_of_rank[next->removed[r]];
        if (el->state[id] == P_RUN || el->state[id] == P_READY)
            kill_proc(el, id, 0);
        el->assigned[id] = 0;
    }
    for (int i = 0; i < n; i++) {
        const struct hvd_slot *s = &next->plan.ranks[i];
        int prev = next->prev_rank[i];
        int id = prev >= 0 ? el->id_of_rank[prev] : -1;
        if (id >= 0 && el->state[id] != P_RUN && el->state[id] != P_READY)
            id = -1; /* its process ended: the slot needs a new one */
        int h = host_index(el, next->hosts.hosts[s->host].name);
        if (h < 0 || (id < 0 && (id = new_proc(el)) < 0))
            goto nomem;
        el->procs.ranks[id] = *s;
        el->procs.ranks[id].host = h;
        el->assigned[id] = 1;
        ids[i] = id;
        as[i] = (struct hvd_rdv_assign){(uint32_t)i,
                                        (uint32_t)n,
                                        (uint32_t)s->local_rank,
                                        (uint32_t)s->local_size,
                                        (uint32_t)s->cross_rank,
                                        (uint32_t)s->cross_size};
    }
    if (hr_job_grow(job) != 0)
        goto fail;
    for (int i = 0; i < n; i++)
        hr_output_relabel(&job->out, (uint32_t)ids[i],
                          el->procs.ranks[ids[i]].local_rank);
    hr_eplan_close(&el->cur);
    el->cur = *next;
    hr_eplan_init(next);
    free(el->id_of_rank);
    el->id_of_rank = ids;
    ids = NULL;
    if (hr_agents_rdv(job) != 0)
        goto fail;
    hr_rdv_set_cb(&el->g->rdv, &rdv_cb, el);
    /* The generation may form at once (every process of it registered):
     * on_formed expects this phase. */
    hvd_log_info("elastic: %d ranks on %zu hosts (%d kept, %d new, %d "
                 "stopped)",
                 n, el->cur.hosts.n, el->cur.nkept, el->cur.nnew,
                 el->cur.nremoved);
    el->phase = PH_FORMING;
    if (hr_rdv_form(&el->g->rdv, el->id_of_rank, as, n) != 0)
        goto nomem;
    /* Each host with new processes, once. */
    for (int id = first_new; id < el->procs.size; id++) {
        int h = el->procs.ranks[id].host, seen = 0;
        for (int j = first_new; j < id && !seen; j++)
            seen = el->procs.ranks[j].host == h;
        if (!seen)
            hr_agents_run_host(job, h);
    }
    free(as);
    return;
nomem:
    hvd_log_error("out of memory");
fail:
    free(ids);
    free(as);
    end(el, HR_EXIT_INTERNAL, -1, "elastic: cannot start the next ranks");
}

static void on_wait_timeout(uv_timer_t *t)
{
    struct hr_elastic *el = t->data;
    const struct hr_opts *o = el->job->opts;
    int need = el->cur.plan.size ? o->min_np : o->np;
    end(el, HR_EXIT_INTERNAL, -1,
        "elastic: fewer than %d slots were available for %g s "
        "(--elastic-timeout); the job stops",
        need, o->elastic_timeout);
}

/* The next assignment from the hosts found, once there are enough. */
static void replan(struct hr_elastic *el)
{
    const struct hr_opts *o = el->job->opts;
    struct hr_eplan next;
    struct hvd_hostlist avail;
    char err[256];
    int first = el->cur.plan.size == 0;

    if (!el->have_found) {
        el->phase = first ? PH_START : PH_WAIT;
        return;
    }
    hr_eplan_init(&next);
    hvd_hostlist_init(&avail);
    int rc = hr_blacklist_filter(&el->bl, &el->found, uv_now(el->job->loop),
                                 &avail, NULL);
    if (rc == 0)
        rc = hr_eplan_next(&next, first ? NULL : &el->cur, &avail,
                           first ? o->np : o->min_np, o->max_np, err,
                           sizeof(err));
    hvd_hostlist_close(&avail);
    if (rc == HVD_ENOSLOTS) {
        if (el->phase != PH_START && el->phase != PH_WAIT)
            hvd_log_warn("elastic: waiting up to %g s for %d slots: %s",
                         o->elastic_timeout, first ? o->np : o->min_np, err);
        el->phase = first ? PH_START : PH_WAIT;
        if (!uv_is_active((uv_handle_t *)&el->wait_timer))
            uv_timer_start(&el->wait_timer, on_wait_timeout,
                           (uint64_t)(o->elastic_timeout * 1000), 0);
    } else if (rc != 0) {
        end(el, HR_EXIT_INTERNAL, -1, "elastic: %s",
            rc == HVD_ENOMEM ? "out of memory" : err);
    } else {
        uv_timer_stop(&el->wait_timer);
        apply(el, &next);
    }
    hr_eplan_close(&next);
}

/* Horovod's worker registry: once every process of the assignment
 * registered again or ended, what their records say. */
static void decide(struct hr_elastic *el)
{
    const struct hr_opts *o = el->job->opts;
    int nassigned = 0, nfail = 0, first_fail = -1, success = -1;
    uint64_t now = uv_now(el->job->loop);

    for (int id = 0; id < el->procs.size; id++) {
        if (!el->assigned[id])
            continue;
        nassigned++;
        if (el->state[id] == P_SUCCESS && success < 0)
            success = id;
        if ((el->state[id] == P_FAILURE || el->state[id] == P_ORPHAN) &&
            nfail++ == 0)
            first_fail = id;
    }
    if (success >= 0) {
        end(el, 0, -1,
            "elastic: rank %d exited with status 0: training "
            "finished",
            el->procs.ranks[success].rank);
        return;
    }
    if (nassigned > 0 && nfail == nassigned) {
        /* Ranks that link real Horovod never reach our rendezvous: its
         * elastic mode needs Horovod's own driver. */
        end(el, 0, first_fail,
            el->registered ? "elastic: every rank failed"
                           : "elastic: every rank failed before joining the "
                             "job; ranks that link real Horovod cannot run "
                             "an elastic job under this horovodrun: use the "
                             "horovod package that comes with it");
        return;
    }
    for (int id = 0; id < el->procs.size; id++) {
        if (!el->assigned[id] || el->state[id] != P_FAILURE)
            continue;
        const char *host = proc_host(el, id);
        uint64_t until = 0;
        if (hr_blacklist_has(&el->bl, host))
            continue;
        if (hr_blacklist_add(&el->bl, host, now,
                             (double)(rand() % 1000) / 1000.0, &until) != 0)
            continue;
        if (until)
            hvd_log_warn("elastic: host %s is blacklisted for %.0f s after "
                         "rank %d failed",
                         host, (double)(until - now) / 1000.0,
                         el->procs.ranks[id].rank);
        else
            hvd_log_warn("elastic: host %s is blacklisted after rank %d "
                         "failed",
                         host, el->procs.ranks[id].rank);
    }
    int all = nassigned > 0;
    for (int id = 0; id < el->procs.size; id++) {
        if (!el->assigned[id])
            continue;
        if (!hr_blacklist_has(&el->bl, proc_host(el, id)))
            all = 0;
        else if (el->state[id] == P_RUN || el->state[id] == P_READY)
            kill_proc(el, id, 0); /* Horovod's host event */
    }
    if (all) {
        end(el, 0, first_fail, "elastic: every host is blacklisted");
        return;
    }
    if (o->reset_limit >= 0 && el->resets >= (unsigned)o->reset_limit) {
        end(el, HR_EXIT_INTERNAL, first_fail,
            "elastic: the job reset %u times, the limit of --reset-limit %d",
            el->resets, o->reset_limit);
        return;
    }
    el->resets++;
    replan(el);
}

static void check(struct hr_elastic *el)
{
    if (el->phase != PH_RESET)
        return;
    for (int id = 0; id < el->procs.size; id++)
        if (el->assigned[id] && el->state[id] == P_RUN)
            return;
    uv_timer_stop(&el->reset_timer);
    decide(el);
}

static void on_reset_timeout(uv_timer_t *t)
{
    struct hr_elastic *el = t->data;
    if (el->phase != PH_RESET)
        return;
    for (int id = 0; id < el->procs.size; id++) {
        if (!el->assigned[id] || el->state[id] != P_RUN)
            continue;
        hvd_log_warn("elastic: rank %d on %s neither joined the reset nor "
                     "ended within %g s (--start-timeout); it is killed",
                     el->procs.ranks[id].rank, proc_host(el, id),
                     el->job->opts->start_timeout);
        hr_agents_kill(el->job, id, 1);
    }
}

static void enter_reset(struct hr_elastic *el)
{
    if (el->phase == PH_RESET)
        return;
    el->phase = PH_RESET;
    uv_timer_start(&el->reset_timer, on_reset_timeout,
                   (uint64_t)(el->job->opts->start_timeout * 1000), 0);
}

/* A process ended (job.h's rank_ended). */
static void on_rank_ended(struct hr_job *job, uint32_t rank)
{
    struct hr_elastic *el = el_of(job);
    int id = (int)rank;
    const struct hr_rank_state *rs = &job->ranks[id];
    /* After a forwarded Ctrl-C, SIGTERM or SIGHUP, ranks that end are not
     * failures to reset from: the job ends as a fixed one does. */
    if (job->interrupt_sig && el->phase != PH_ENDED) {
        el->phase = PH_ENDED;
        hr_discover_close(el->disc);
        el->disc = NULL;
        return;
    }
    if (el->phase == PH_ENDED || job->stopping || !el->assigned[id] ||
        el->state[id] == P_STOPPED)
        return;
    int ok = rs->kind == HVD_EXIT_CODE && rs->code == 0;
    int orphan = el->state[id] == P_ORPHAN;
    el->state[id] = ok ? P_SUCCESS : orphan ? P_ORPHAN : P_FAILURE;
    if (orphan && !ok)
        hvd_log_warn("elastic: rank %d on %s ended with the agent that "
                     "started its host's agent; the others reset, and %s is "
                     "not blacklisted",
                     el->procs.ranks[id].rank, proc_host(el, id),
                     proc_host(el, id));
    else if (!ok)
        hvd_log_warn("elastic: rank %d on %s %s %d; the others reset",
                     el->procs.ranks[id].rank, proc_host(el, id),
                     rs->kind == HVD_EXIT_SIGNAL ? "was killed by signal"
                                                 : "exited with status",
                     rs->code);
    if (el->phase != PH_START)
        enter_reset(el);
    check(el);
}

static void on_discovery(void *arg, const struct hvd_hostlist *hosts,
                         const char *err, int first)
{
    struct hr_elastic *el = arg;
    char line[600];
    int changes = 0;

    if (el->phase == PH_ENDED)
        return;
    if (err) {
        if (first)
            end(el, HR_EXIT_USAGE, -1, "elastic: %s", err);
        else if (hr_discover_should_log(el->disc, err, line, sizeof(line)))
            hvd_log_warn("elastic: %s", line);
        return;
    }
    if (el->have_found &&
        hr_discovery_changes(&el->found, hosts, &changes) != 0)
        return;
    /* A host whose cooldown ended is back, as if added. */
    for (size_t i = 0; i < hosts->n; i++)
        if (hr_blacklist_resurrected(&el->bl, hosts->hosts[i].name,
                                     uv_now(el->job->loop)))
            changes |= HR_DISCOVERY_ADDED;
    if (copy_hosts(&el->found, hosts) != 0) {
        end(el, HR_EXIT_INTERNAL, -1, "elastic: out of memory");
        return;
    }
    el->have_found = 1;
    if (el->phase == PH_START || el->phase == PH_WAIT)
        replan(el);
    else if (el->phase == PH_RUNNING && changes)
        notify(el, changes);
    else
        el->pending |= changes;
}

/* Quotes path for sh -c: the CLI checked that it is a file, which a
 * name without a slash means in the working directory (sh would look it
 * up on PATH). */
static int quote_script(char *out, size_t len, const char *path)
{
    size_t n = 0;
    out[n++] = '\'';
    if (strchr(path, '/') == NULL) {
        memcpy(out + n, "./", 2);
        n += 2;
    }
    for (const char *p = path; *p; p++) {
        if (n + 5 >= len)
            return HVD_ERANGE;
        if (*p == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *p;
        }
    }
    out[n++] = '\'';
    out[n] = '\0';
    return 0;
}

int hr_elastic_start(struct hr_job *job)
{
    struct hr_agents *g = job->launch;
    const struct hr_opts *o = job->opts;
    struct hr_elastic *el = calloc(1, sizeof(*el));
    if (el == NULL) {
        hvd_log_error("out of memory");
        return HR_EXIT_INTERNAL;
    }
    g->el = el;
    el->job = job;
    el->g = g;
    el->end_id = -1;
    hvd_hostlist_init(&el->hosts);
    hvd_hostlist_init(&el->found);
    hvd_hostlist_init(&el->fixed);
    hr_blacklist_init(&el->bl);
    hr_eplan_init(&el->cur);
    if (o->cooldown_min > 0)
        hr_blacklist_set_cooldown(&el->bl, o->cooldown_min, o->cooldown_max);
    /* Without a script, the hosts of -H, --hostfile or Slurm are the
     * hosts for good. */
    if (o->discovery_script == NULL) {
        if (copy_hosts(&el->found, job->hosts) != 0 ||
            copy_hosts(&el->fixed, job->hosts) != 0) {
            hvd_log_error("out of memory");
            return HR_EXIT_INTERNAL;
        }
        el->have_found = 1;
    } else if (quote_script(el->script, sizeof(el->script),
                            o->discovery_script) != 0) {
        hvd_log_error("--host-discovery-script: the path is too long");
        return HR_EXIT_USAGE;
    }
    job->hosts = &el->hosts;
    job->plan = &el->procs;
    job->assignment = &el->cur.plan;
    job->rank_ended = on_rank_ended;
    return 0;
}

static void on_fixed_tick(uv_timer_t *t)
{
    struct hr_elastic *el = t->data;
    on_discovery(el, &el->fixed, NULL, 0);
}

int hr_elastic_go(struct hr_job *job)
{
    struct hr_elastic *el = el_of(job);
    const struct hr_opts *o = job->opts;
    uv_timer_init(job->loop, &el->wait_timer);
    uv_timer_init(job->loop, &el->reset_timer);
    uv_timer_init(job->loop, &el->fixed_timer);
    el->wait_timer.data = el->reset_timer.data = el->fixed_timer.data = el;
    const char *iv = getenv(HVD_ENV_ELASTIC_DISCOVERY_INTERVAL);
    double interval = iv && atof(iv) > 0 ? atof(iv) : DISCOVERY_INTERVAL_S;
    el->timer_init = 1;
    el->phase = PH_START;
    uv_timer_start(&el->wait_timer, on_wait_timeout,
                   (uint64_t)(o->elastic_timeout * 1000), 0);
    if (o->discovery_script) {
        struct hr_discover_cfg cfg = {
            .script = el->script,
            .interval_s = interval,
            .timeout_s = DISCOVERY_TIMEOUT_S,
            .default_slots = o->slots_per_host,
            .name = o->discovery_script,
        };
        if (hr_discover_start(&el->disc, job->loop, &cfg, on_discovery, el) !=
            0) {
            hvd_log_error("out of memory");
            return HR_EXIT_INTERNAL;
        }
    } else {
        uint64_t ms = (uint64_t)(interval * 1000);
        uv_timer_start(&el->fixed_timer, on_fixed_tick, ms, ms);
        replan(el);
    }
    return 0;
}

int hr_elastic_env(struct hr_elastic *el, int id, struct hvd_strvec *env,
                   const struct hvd_endpoints *ep)
{
    const struct hvd_slot *s = &el->procs.ranks[id];
    const struct hvd_env_place pl = {
        .rank = s->rank,
        .size = el->cur.plan.size,
        .local_rank = s->local_rank,
        .local_size = s->local_size,
        .cross_rank = s->cross_rank,
        .cross_size = s->cross_size,
        .host = proc_host(el, id),
    };
    int err = hvd_env_contract_place(env, &pl, ep);
    if (err || (err = hvd_strvec_push(env, HVD_ENV_ELASTIC "=1")) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_ELASTIC_ID "=%d", id)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_ELASTIC_TIMEOUT "=%g",
                                el->job->opts->elastic_timeout)))
        return err;
    return 0;
}

void hr_elastic_status(const struct hr_elastic *el, char *buf, size_t len)
{
    buf[0] = '\0';
    if (el->phase == PH_START) {
        snprintf(buf, len,
                 "horovodrun: elastic: waiting for %d slots (%ld found)",
                 el->job->opts->np,
                 el->have_found ? hvd_hostlist_slots(&el->found) : 0L);
    } else if (el->phase == PH_FORMING && el->resets == 0) {
        int n = el->cur.plan.size, have = 0;
        for (int i = 0; i < n; i++)
            have += hr_rdv_registered(&el->g->rdv, el->id_of_rank[i]);
        if (have < n)
            snprintf(buf, len, "horovodrun: elastic: %d/%d ranks connected",
                     have, n);
    }
}

int hr_elastic_wanted(const struct hr_elastic *el, int id)
{
    return el && id < el->procs.size && el->assigned[id] &&
           el->state[id] != P_STOPPED;
}

void hr_elastic_orphan(struct hr_elastic *el, int id)
{
    if (id < el->procs.size &&
        (el->state[id] == P_RUN || el->state[id] == P_READY))
        el->state[id] = P_ORPHAN;
}

int hr_elastic_over(const struct hr_elastic *el)
{
    return el->phase == PH_ENDED;
}

int hr_elastic_failure(struct hr_elastic *el)
{
    struct hr_job *job = el->job;
    if (job->interrupt_sig || el->phase != PH_ENDED)
        return -1;
    if (el->end_id >= 0) {
        int id = el->end_id;
        const struct hr_rank_state *rs = &job->ranks[id];
        hvd_log_error("%s", el->end_msg);
        return hr_summary_rank("", el->procs.ranks[id].rank, proc_host(el, id),
                               el->procs.ranks[id].local_rank, rs->kind,
                               rs->code, job->opts->cmd[0]);
    }
    if (el->end_code != 0)
        hvd_log_error("%s", el->end_msg);
    else
        hvd_log_info("%s", el->end_msg);
    return el->end_code;
}

void hr_elastic_close(struct hr_elastic *el)
{
    if (el == NULL)
        return;
    hr_discover_close(el->disc);
    el->disc = NULL;
    if (el->timer_init) {
        uv_close((uv_handle_t *)&el->wait_timer, NULL);
        uv_close((uv_handle_t *)&el->reset_timer, NULL);
        uv_close((uv_handle_t *)&el->fixed_timer, NULL);
    }
    el->timer_init = 0;
}

void hr_elastic_free(struct hr_elastic *el)
{
    if (el == NULL)
        return;
    hvd_hostlist_close(&el->hosts);
    hvd_hostlist_close(&el->found);
    hvd_hostlist_close(&el->fixed);
    hr_blacklist_close(&el->bl);
    hr_eplan_close(&el->cur);
    free(el->procs.ranks);
    free(el->state);
    free(el->assigned);
    free(el->id_of_rank);
    free(el);
}
