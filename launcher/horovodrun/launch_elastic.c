/* The agents launch in an elastic job: hosts and processes that come and
 * go (elastic.h decides; this sends). */
#include "launcher/horovodrun/launch_agents.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "launcher/horovodrun/elastic.h"
#include "launcher/horovodrun/job.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/net.h"
#include "launcher/lib/proto.h"

static struct hr_agents *agents_of(const struct hr_job *job)
{
    return job->launch;
}

static int agent_index(const struct hr_agents *g, const struct hr_agent *a)
{
    for (int i = 0; i < g->nagents; i++)
        if (g->agents[i] == a)
            return i;
    return -1;
}

/* An elastic job's processes on a's host that a was not sent yet, into
 * js (ids only grow, so they are those from a->sent_to on). */
int hr_agents_new_procs(struct hr_job *job, struct hr_agent *a,
                        struct hvd_jobspec *js)
{
    struct hr_agents *g = agents_of(job);
    struct hvd_endpoints ep = hr_agents_endpoints(job);
    int err = 0;
    for (int id = (int)a->sent_to; id < job->plan->size && !err; id++) {
        const struct hvd_slot *s = &job->plan->ranks[id];
        if (s->host != a->host || !hr_elastic_wanted(g->el, id))
            continue;
        struct hvd_jobrank *jr =
            hvd_jobspec_add_rank(js, (uint32_t)id, (uint32_t)s->local_rank);
        err = jr ? hr_elastic_env(g->el, id, &jr->env, &ep) : HVD_ENOMEM;
        if (!err && id == 0)
            g->stdin_agent = agent_index(g, a);
    }
    a->sent_to = (uint32_t)job->plan->size;
    /* Ranks it was ever sent: what bounds the rendezvous it carries. */
    if (!err)
        a->nranks += js->nranks;
    return err;
}

/* An elastic job's new processes for an agent that has its job. */
static int send_more(struct hr_job *job, struct hr_agent *a)
{
    struct hvd_jobspec js;
    uint8_t *f = NULL;
    size_t len;
    hvd_jobspec_init(&js);
    int err = hr_agents_new_procs(job, a, &js);
    if (!err && js.nranks > 0 &&
        (err = hvd_ranks_encode(js.ranks, js.nranks, &f, &len)) == 0)
        a->link->send(a, f, len);
    hvd_jobspec_close(&js);
    return err;
}

/* An elastic job's agent said HELLO: it gets its processes at once. The
 * first one's free port is torch's MASTER_PORT for the whole job. */
void hr_agents_elastic_hello(struct hr_job *job, struct hr_agent *a)
{
    struct hr_agents *g = agents_of(job);
    if (!a->hello || a->has_job || !a->running)
        return;
    if (g->master_port == 0)
        g->master_port = a->free_port;
    int err = hr_agents_send_job(job, a);
    if (err != 0) {
        snprintf(a->failure, sizeof(a->failure), "cannot send the job: %s",
                 hr_err_str(err));
        a->link->kill(a, SIGKILL);
        return;
    }
    if (g->stdin_agent >= 0 && g->agents[g->stdin_agent] == a)
        hr_job_read_stdin(job);
}

/* An elastic job's agent ended: its processes that did not end (or were
 * never sent to it) died with it, which the controller takes as their
 * failure. */
void hr_agents_elastic_lost(struct hr_job *job, struct hr_agent *a)
{
    int lost = 0;
    for (int id = 0; id < job->plan->size; id++)
        lost += job->plan->ranks[id].host == a->host && !job->ranks[id].done;
    if (lost == 0 || job->stopping)
        return;
    if (a->orphaned) {
        /* Named with the agent that started it; its host is not to
         * blame. */
        for (int id = 0; id < job->plan->size; id++)
            if (job->plan->ranks[id].host == a->host)
                hr_elastic_orphan(agents_of(job)->el, id);
    } else if (a->failure[0])
        hvd_log_warn("host %s: %s", a->name, a->failure);
    else if (a->term_signal)
        hvd_log_warn("host %s: hvd-agent was killed by signal %d (%s)", a->name,
                     a->term_signal, hr_summary_signame(a->term_signal));
    else
        hvd_log_warn("host %s: hvd-agent exited with status %lld", a->name,
                     (long long)a->status);
    for (int id = 0; id < job->plan->size; id++)
        if (job->plan->ranks[id].host == a->host && !job->ranks[id].done)
            hr_job_rank_done(job, (uint32_t)id, HVD_EXIT_SIGNAL, SIGKILL);
}

void hr_agents_run_host(struct hr_job *job, int h)
{
    struct hr_agents *g = agents_of(job);
    struct hr_agent *a = NULL;
    for (int i = 0; i < g->nagents; i++)
        if (g->agents[i]->host == h && !g->agents[i]->ended)
            a = g->agents[i];
    if (a != NULL) {
        /* A new agent gets them with its JOB once it says HELLO. */
        int err = a->has_job ? send_more(job, a) : 0;
        if (err != 0) {
            snprintf(a->failure, sizeof(a->failure),
                     "cannot send new ranks: %s", hr_err_str(err));
            a->link->kill(a, SIGKILL);
        }
        return;
    }
    if (hr_agents_add(job, h, &a) != 0) {
        for (int id = 0; id < job->plan->size; id++)
            if (job->plan->ranks[id].host == h && !job->ranks[id].done)
                hr_job_rank_done(job, (uint32_t)id, HVD_EXIT_SIGNAL, SIGKILL);
        return;
    }
    /* Processes of an agent of this host that ended before were looked
     * at by that one. */
    for (int i = 0; i < g->nagents; i++)
        if (g->agents[i]->host == h && g->agents[i]->sent_to > a->sent_to)
            a->sent_to = g->agents[i]->sent_to;
    if (hr_agents_place(job, a) != 0)
        snprintf(a->failure, sizeof(a->failure), "out of memory");
    if (a->failure[0] || a->link->start(a) != 0) {
        a->ended = 1;
        g->agents_left--;
        hr_agents_elastic_lost(job, a);
    }
}

void hr_agents_kill(struct hr_job *job, int id, int now)
{
    struct hr_agents *g = agents_of(job);
    int h = job->plan->ranks[id].host;
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        if (a->host != h || a->ended)
            continue;
        uint8_t *f;
        size_t len;
        if (a->has_job && (uint32_t)id < a->sent_to &&
            hvd_kill_encode((uint32_t)id, (uint8_t)now, &f, &len) == 0)
            a->link->send(a, f, len);
    }
}

int hr_agents_rdv(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    char addr[64];
    int rc = 0;
    if (g->rdv.listening)
        return 0;
    if (job->opts->rendezvous_addr || job->opts->network_interfaces) {
        rc = hr_agents_rdv_addr(job, addr, sizeof(addr));
    } else {
        /* Before any agent runs: this host's address on the route to the
         * first remote host (else, when its name does not resolve yet, its
         * first interface's), or loopback. */
        snprintf(addr, sizeof(addr), "127.0.0.1");
        for (size_t h = 0; h < job->hosts->n && rc == 0; h++)
            if (!hr_host_is_local(job->hosts->hosts[h].name)) {
                struct hvd_strvec addrs;
                hvd_strvec_init(&addrs);
                g->remote = 1;
                rc = hr_net_addrs_toward(job->hosts->hosts[h].name, &addrs, 1);
                if (rc == 0)
                    snprintf(addr, sizeof(addr), "%s", addrs.v[0]);
                hvd_strvec_close(&addrs);
                break;
            }
    }
    if (rc == 0)
        rc = hr_rdv_start(&g->rdv, job->loop, g->remote, addr, g->secret, 0,
                          job->opts->start_timeout);
    if (rc != 0) {
        hvd_log_error("cannot start the rendezvous server on %s: %s", addr,
                      rc < 0 ? uv_strerror(rc) : "no such address");
        return HR_EXIT_INTERNAL;
    }
    hr_net_addr_if(addr, g->gloo_iface, sizeof(g->gloo_iface));
    hvd_log_info("rendezvous server on %s:%d (elastic)", g->rdv.addr,
                 g->rdv.port);
    return 0;
}
