/* The tree launch: which agents start which (launch_agents.h), placed
 * at start for a fixed job and as hosts come for an elastic one, and the
 * end of a lost agent's subtree. */
#include "launcher/horovodrun/launch_agents.h"

#include <stdlib.h>

#include "common/hvd_err.h"
#include "launcher/horovodrun/elastic.h"
#include "launcher/horovodrun/job.h"
#include "launcher/lib/log.h"
#include "launcher/link/relay.h"
#include "launcher/link/rsh.h"
#include "launcher/link/ssh.h"

static struct hr_agents *agents_of(const struct hr_job *job)
{
    return job->launch;
}

int hr_agents_carries(const struct hr_job *job, const struct hr_agent *a)
{
    return job->opts->tree_fanout > 0 && (a->ssh || a->relay || a->argv.n);
}

void hr_agents_end_subtree(struct hr_job *job, struct hr_agent *a, int lost)
{
    struct hr_agents *g = agents_of(job);
    char names[400] = "", why[512] = "";
    int n = 0, len = 0;
    if (lost)
        snprintf(why, sizeof(why),
                 a->hello
                     ? "lost with the agent of host %s, which started it"
                     : "not started: host %s, which was to start it, failed",
                 a->name);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *c = g->agents[i];
        if (hr_relay_parent(c) != a || !c->running)
            continue;
        if (len < (int)sizeof(names) - 1)
            len += snprintf(names + len, sizeof(names) - (size_t)len, "%s%s",
                            n ? ", " : "", c->name);
        n++;
        c->orphaned = lost;
        hr_relay_gone(c, -1, 0, why);
    }
    if (n == 0 || !lost || !g->started)
        return;
    if (g->el)
        hvd_log_warn("host %s: its agent ended, and so did those it started "
                     "(%d: %s); their hosts are not blacklisted, and get new "
                     "agents",
                     a->name, n, names);
    else
        hvd_log_error("host %s: its agent ended, and so did those it started "
                      "(%d: %s)",
                      a->name, n, names);
}

/* Whether horovodrun reaches a's agent over SSH, through srun, or
 * through an rsh agent that works on every host (--rsh-tree): the links
 * an agent can take over. */
static int treeable(const struct hr_job *job, const struct hr_agent *a)
{
    return a->ssh || (a->argv.n && (!a->rsh || job->opts->rsh_tree));
}

/* a, reached over SSH, through srun or an rsh agent, is started by
 * parent's agent instead, under id (its index). 0, or HVD_ENOMEM. */
static int started_by(struct hr_job *job, struct hr_agent *a,
                      struct hr_agent *parent, int id)
{
    struct hr_agents *g = agents_of(job);
    struct hr_ssh_cfg cfg = hr_agents_ssh_cfg(job->opts);
    int srun = a->ssh == NULL && a->rsh == NULL, rsh = a->rsh != NULL;
    if (srun || rsh)
        cfg.agent_path = g->srun.agent;
    hr_ssh_free(a->ssh);
    a->ssh = NULL;
    hr_rsh_free(a->rsh);
    a->rsh = NULL;
    hvd_strvec_close(&a->argv);
    a->link = &hr_link_relay;
    return hr_relay_new(a, parent, (uint32_t)id, &cfg,
                        srun ? g->srun.srun : NULL,
                        rsh ? job->opts->rsh_agent : NULL)
               ? 0
               : HVD_ENOMEM;
}

int hr_agents_place(struct hr_job *job, struct hr_agent *a)
{
    struct hr_agents *g = agents_of(job);
    int fan = job->opts->tree_fanout, direct = 0, id = -1, rc = 0;
    if (fan <= 0 || !treeable(job, a))
        return 0;
    /* horovodrun's own sessions, then the first agent with room, in the
     * order they came: the tree fills level by level. */
    for (int i = 0; i < g->nagents; i++) {
        if (g->agents[i] == a)
            id = i;
        else if (treeable(job, g->agents[i]) && !g->agents[i]->ended)
            direct++;
    }
    if (direct < fan)
        return 0;
    /* Per host, in one pass each (a live agent is its host's only one):
     * whether it runs a process (one whose processes all ended, or were
     * stopped, may be on its way out), and how many agents it started. */
    size_t nh = job->hosts->n;
    unsigned char *runs = calloc(nh, 1);
    int *kids = calloc(nh, sizeof(*kids));
    if (runs == NULL || kids == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    for (int p = 0; p < job->plan->size; p++)
        if (!job->ranks[p].done && hr_elastic_wanted(g->el, p))
            runs[job->plan->ranks[p].host] = 1;
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *parent = hr_relay_parent(g->agents[i]);
        if (parent && !g->agents[i]->ended)
            kids[parent->host]++;
    }
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *p = g->agents[i];
        if (p != a && !p->ended && p->running &&
            (treeable(job, p) || hr_relay_parent(p)) && runs[p->host] &&
            kids[p->host] < fan) {
            rc = started_by(job, a, p, id);
            break;
        }
    }
out:
    free(runs);
    free(kids);
    return rc;
}

/* Each agent starts at most F, so the tree is log_F deep. */
int hr_agents_plant_tree(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    int fan = job->opts->tree_fanout, n = 0, rc = 0;
    int *tree = malloc((size_t)g->nagents * sizeof(*tree));
    if (tree == NULL)
        return HVD_ENOMEM;
    for (int i = 0; i < g->nagents; i++)
        if (treeable(job, g->agents[i]))
            tree[n++] = i;
    for (int k = fan; fan > 0 && k < n && rc == 0; k++)
        rc = started_by(job, g->agents[tree[k]],
                        g->agents[tree[(k - fan) / fan]], tree[k]);
    if (fan > 0 && n > fan && rc == 0)
        hvd_log_info("tree launch: horovodrun starts the agents of %d hosts, "
                     "which start those of the other %d (--tree-fanout %d)",
                     fan, n - fan, fan);
    free(tree);
    return rc;
}
