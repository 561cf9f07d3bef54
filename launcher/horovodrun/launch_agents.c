/* The agents launch: one hvd-agent per host runs that host's ranks. */
#include "launcher/horovodrun/launch_agents.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/wire.h"
#include "launcher/horovodrun/carry.h"
#include "launcher/horovodrun/elastic.h"
#include "launcher/horovodrun/gloo_store.h"
#include "launcher/horovodrun/job.h"
#include "launcher/horovodrun/startup.h"
#include "launcher/lib/env.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/log.h"
#include "launcher/lib/net.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"
#include "launcher/lib/spawn.h"
#include "launcher/link/relay.h"
#include "launcher/link/rsh.h"
#include "launcher/link/srun.h"
#include "launcher/link/ssh.h"

extern char **environ;

/* How long agents get, beyond the kill grace, to report a stopped job. */
#define STOP_SLACK_MS 5000
/* Remote agents stop their ranks if they hear nothing for this long. */
#define PING_EVERY_MS 1000
#define PING_SILENCE_MS 4000
/* STDIN blocks (64 KiB each) on their way to rank 0's agent at once:
 * enough to keep a stream going over a link's round trips, and all that
 * stdin which rank 0 does not read can take of the agent's memory. */
#define STDIN_WINDOW 16

static void check_preflight(struct hr_job *job);
int hr_agents_rdv_addr(struct hr_job *job, char *out, size_t len);

static struct hr_agents *agents_of(const struct hr_job *job)
{
    return job->launch;
}

static int grow_agents(struct hr_agents *g)
{
    int cap = g->cap ? 2 * g->cap : 8;
    struct hr_agent **a = realloc(g->agents, (size_t)cap * sizeof(*a));
    if (a == NULL)
        return HVD_ENOMEM;
    g->agents = a;
    g->cap = cap;
    return 0;
}

static void send_simple(struct hr_agent *a, uint8_t type, uint32_t value,
                        int is_u8)
{
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    if (is_u8)
        hvd_wbuf_u8(&w, (uint8_t)value);
    else
        hvd_wbuf_u32(&w, value);
    if (hvd_wbuf_finish(&w, type, &f, &len) == 0)
        a->link->send(a, f, len);
}

static const char *host_name(const struct hr_job *job, int h)
{
    return job->hosts->hosts[h].name;
}

/* A STOP to every agent that has the job; the others are ended. */
static uint64_t agents_stop(struct hr_job *job, int now)
{
    struct hr_agents *g = agents_of(job);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        if (!a->running)
            continue;
        /* An agent that said HELLO ends by itself, in pre-flight too: it
         * first reports why each agent it started ended (those get DROP
         * below), which a killed session could not. */
        if (a->hello)
            send_simple(a, HVD_MSG_STOP, (uint32_t)now, 1);
        else
            a->link->kill(a, now ? SIGKILL : SIGTERM);
    }
    return now ? STOP_SLACK_MS
               : (uint64_t)(job->opts->kill_grace * 1000) + STOP_SLACK_MS;
}

/* The signal to every agent that has the job, for its ranks; the others
 * are ended. The ranks decide whether it ends them. */
static uint64_t agents_signal(struct hr_job *job, int sig)
{
    struct hr_agents *g = agents_of(job);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        if (a->running && a->hello && g->started)
            send_simple(a, HVD_MSG_SIGNAL, (uint32_t)sig, 0);
        else if (a->running)
            a->link->kill(a, SIGTERM);
    }
    return 0;
}

/* What every rank's contract names: the rendezvous, torch's master (rank
 * 0's host; an elastic job's first process's) and Gloo's store. */
struct hvd_endpoints hr_agents_endpoints(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    int master = 0;
    for (int i = 0; g->el && i < job->plan->size; i++)
        if (job->plan->ranks[i].rank == 0)
            master = i;
    return (struct hvd_endpoints){
        .rdv_addr = g->rdv.addr,
        .rdv_port = g->rdv.port,
        .master_addr = host_name(job, job->plan->ranks[master].host),
        .master_port = g->master_port,
        .secret_hex = g->secret_hex,
        .start_timeout = job->opts->start_timeout,
        .gloo_port = g->gloo_port,
        .gloo_iface = g->gloo_iface,
        .nccl_ifnames = job->opts->network_interfaces,
    };
}

int hr_agents_send_job(struct hr_job *job, struct hr_agent *a)
{
    struct hr_agents *g = agents_of(job);
    struct hvd_jobspec js;
    uint8_t *f = NULL;
    size_t len;
    int err = 0;

    hvd_jobspec_init(&js);
    struct hvd_endpoints ep = hr_agents_endpoints(job);
    js.cwd = strdup(g->cwd);
    js.kill_grace_ms = (uint32_t)(job->opts->kill_grace * 1000);
    js.gpu_pinning = (uint8_t)job->opts->gpu_pinning;
    js.bind = (uint8_t)job->opts->bind;
    if (hr_agents_carries(job, a)) {
        js.carry_rdv = 1;
        err = hr_carry_new(a, &g->rdv);
    }
    for (int i = 0; i < job->opts->cmdc && !err; i++)
        err = hvd_strvec_push(&js.argv, job->opts->cmd[i]);
    for (char **e = environ; *e && !err; e++)
        err = hvd_strvec_push(&js.env, *e);
    for (int r = 0; r < job->plan->size && !err && !g->el; r++) {
        const struct hvd_slot *s = &job->plan->ranks[r];
        if (s->host != a->host)
            continue;
        struct hvd_jobrank *jr =
            hvd_jobspec_add_rank(&js, (uint32_t)r, (uint32_t)s->local_rank);
        err = jr ? hvd_env_contract(&jr->env, job->plan, job->hosts, r, &ep)
                 : HVD_ENOMEM;
    }
    if (g->el && !err)
        err = hr_agents_new_procs(job, a, &js);
    if (!err && js.cwd == NULL)
        err = HVD_ENOMEM;
    if (!err)
        err = hvd_jobspec_encode(&js, &f, &len);
    if (!err) {
        a->link->send(a, f, len);
        a->has_job = 1;
    }
    hvd_jobspec_close(&js);
    return err;
}

static void on_ping(uv_timer_t *t)
{
    struct hr_agents *g = agents_of(t->data);
    for (int i = 0; i < g->nagents; i++)
        if ((g->agents[i]->ssh || g->agents[i]->relay) && g->agents[i]->running)
            send_simple(g->agents[i], HVD_MSG_PING, PING_SILENCE_MS, 0);
}

/* Horovod's Gloo rendezvous on the rendezvous address, open to the job's
 * hosts and this one, for ranks that link real Horovod. Without it
 * (--no-gloo-rendezvous) those ranks get port 0, where nothing listens,
 * so that they fail in hvd.init() instead of each running alone. */
static int start_gloo(struct hr_job *job, const char *addr)
{
    struct hr_agents *g = agents_of(job);
    struct hr_gloo_cfg cfg;
    char err[256];
    int rc = 0;

    const char *ctl = getenv(HVD_ENV_CONTROLLER);
    if (ctl != NULL && strcmp(ctl, "gloo") != 0)
        hvd_log_warn("the ranks get %s=gloo, not the %s=%s of this "
                     "environment: horovodrun's own launcher starts them; "
                     "use --mpi to run them under mpirun",
                     HVD_ENV_CONTROLLER, HVD_ENV_CONTROLLER, ctl);
    if (hr_net_addr_if(addr, g->gloo_iface, sizeof(g->gloo_iface)) != 0)
        g->gloo_iface[0] = '\0';
    if (job->opts->no_gloo_rendezvous)
        return 0;
    hr_gloo_cfg_init(&cfg);
    if ((rc = hr_gloo_cfg_allow_self(&cfg, err, sizeof(err))) != 0)
        goto out;
    for (int i = 0; i < g->nagents && rc == 0; i++) {
        /* The address the host's link reached: its name may resolve only
         * through ~/.ssh/config (HostName) or the rsh agent (a pod's). */
        char peer[64];
        const char *host = g->agents[i]->name;
        if (hr_ssh_addr(g->agents[i]->ssh, 0, peer, sizeof(peer)) == 0 ||
            hr_rsh_addr(g->agents[i]->rsh, 0, peer, sizeof(peer)) == 0)
            host = peer;
        rc = hr_gloo_cfg_allow_host(&cfg, host, err, sizeof(err));
    }
    if (rc == 0)
        rc = hr_gloo_cfg_plan(&cfg, job->plan, job->hosts, err, sizeof(err));
    if (rc == 0)
        rc = hr_gloo_store_start(&g->gloo, &cfg, addr, 0, &g->gloo_port, err,
                                 sizeof(err));
out:
    if (rc != 0)
        hr_job_fail(job,
                    "cannot start Horovod's Gloo rendezvous on %s: %s "
                    "(--no-gloo-rendezvous turns it off)",
                    addr, err);
    else
        hvd_log_info("Gloo rendezvous (HTTP) on %s:%d, interface '%s'", addr,
                     g->gloo_port, g->gloo_iface);
    hr_gloo_cfg_close(&cfg);
    return rc;
}

/* Pre-flight passed on every host: the rendezvous server goes up where
 * all hosts can reach it, and every agent gets its part of the job. */
static void start_job(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    char addr[64];
    int rc;

    uv_timer_stop(&g->start_timer);
    g->started = 1;
    rc = hr_agents_rdv_addr(job, addr, sizeof(addr));
    if (rc == 0)
        rc = hr_rdv_start(&g->rdv, job->loop, g->remote, addr, g->secret,
                          job->plan->size, job->opts->start_timeout);
    if (rc != 0) {
        hr_job_fail(job, "cannot start the rendezvous server on %s: %s", addr,
                    rc < 0 ? uv_strerror(rc) : "no such address");
        return;
    }
    if (start_gloo(job, addr) != 0)
        return;
    g->master_port = g->agents[g->stdin_agent]->free_port;
    hvd_log_info("rendezvous server on %s:%d; MASTER_PORT %d", g->rdv.addr,
                 g->rdv.port, g->master_port);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        if ((rc = hr_agents_send_job(job, a)) != 0) {
            hr_job_fail(job, "host %s: cannot send the job: %s", a->name,
                        hr_err_str(rc));
            return;
        }
    }
    hr_job_read_stdin(job);
    if (g->remote) {
        on_ping(&g->ping_timer);
        uv_timer_start(&g->ping_timer, on_ping, PING_EVERY_MS, PING_EVERY_MS);
    }
}

/* Pre-flight ends when every host is ready or has failed: then either the
 * job starts, or the ready hosts are sent home and every failed host is
 * reported. */
static void check_preflight(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    if (g->started || job->stopping)
        return;
    for (int i = 0; i < g->nagents; i++)
        if (!g->agents[i]->hello && !g->agents[i]->ended)
            return;
    if (g->preflight_failed)
        hr_job_stop(job, 0);
    else
        start_job(job);
}

static void handle_hello(struct hr_job *job, struct hr_agent *a,
                         const struct hvd_frame *f)
{
    struct hvd_hello h;
    int err = hvd_hello_decode(&h, f->payload, f->len);

    a->gpus = h.gpus;
    a->free_port = h.port;
    if (err == 0 && (a->free_port < 1 || a->free_port > 65535 || a->gpus < 0)) {
        /* The agent found no free port (or sent nonsense): not a version
         * problem, but no job can start there. */
        snprintf(a->failure, sizeof(a->failure),
                 "hvd-agent reported port %d and %d GPUs; it could not find "
                 "a free TCP port",
                 a->free_port, a->gpus);
        a->link->kill(a, SIGTERM);
    } else if (err == HVD_ENOTSUP) {
        snprintf(a->failure, sizeof(a->failure),
                 "hvd-agent speaks protocol %u, this horovodrun speaks %u; "
                 "install the same version on every host",
                 h.version, HVD_PROTO_VERSION);
        a->link->kill(a, SIGTERM);
    } else if (err) {
        /* Not a version mismatch: the payload is damaged (too short,
         * trailing bytes, a bad host name), which no upgrade explains. */
        snprintf(a->failure, sizeof(a->failure),
                 "hvd-agent sent a malformed HELLO of %u bytes (%s); check "
                 "that hvd-agent on that host is a working build",
                 (unsigned)f->len, hr_err_str(err));
        a->link->kill(a, SIGTERM);
    } else if (!a->hello) {
        a->hello = 1;
        hvd_log_info("host %s (%s): agent ready, %d GPUs", a->name, h.host,
                     a->gpus);
        struct hr_agents *g = agents_of(job);
        for (int i = 0; i < g->nagents; i++)
            if (hr_relay_parent(g->agents[i]) == a)
                hr_relay_parent_ready(g->agents[i]);
    }
    hvd_hello_close(&h);
    if (agents_of(job)->el)
        hr_agents_elastic_hello(job, a);
    else
        check_preflight(job);
}

/* FROM or GONE: what an agent that a started sent, or that it ended. */
static int relay_frame(struct hr_job *job, struct hr_agent *a,
                       const struct hvd_frame *f)
{
    struct hr_agents *g = agents_of(job);
    struct hvd_gone gone = {0};
    const uint8_t *p;
    size_t n;
    uint32_t id;
    int err = f->type == HVD_MSG_GONE
                  ? hvd_gone_decode(&gone, f->payload, f->len)
                  : hvd_relay_unwrap(f->payload, f->len, &id, &p, &n);
    if (f->type == HVD_MSG_GONE)
        id = gone.id;
    /* Only the agents it was asked to start. */
    if (err == 0 &&
        (id >= (uint32_t)g->nagents || hr_relay_parent(g->agents[id]) != a))
        err = HVD_EPROTO;
    if (err == 0 && f->type == HVD_MSG_GONE)
        hr_relay_gone(g->agents[id], gone.status, gone.signal, gone.why);
    else if (err == 0)
        hr_relay_bytes(g->agents[id], p, n);
    hvd_gone_close(&gone);
    return err;
}

static int handle_frame(struct hr_job *job, struct hr_agent *a,
                        const struct hvd_frame *f)
{
    struct hvd_rbuf r;
    hvd_rbuf_init(&r, f->payload, f->len);

    switch (f->type) {
    case HVD_MSG_HELLO:
        handle_hello(job, a, f);
        return 0;
    case HVD_MSG_LINE: {
        uint32_t rank = hvd_rbuf_u32(&r);
        uint8_t stream = hvd_rbuf_u8(&r);
        uint8_t term = hvd_rbuf_u8(&r);
        size_t len;
        const uint8_t *text = hvd_rbuf_rest(&r, &len);
        if (r.err || term > HVD_TERM_PREVIEW ||
            rank >= (uint32_t)job->plan->size ||
            (stream != HVD_STREAM_STDOUT && stream != HVD_STREAM_STDERR) ||
            job->plan->ranks[rank].host != a->host)
            return HVD_EPROTO;
        hr_output_line(&job->out, rank, stream, term, (const char *)text, len);
        return 0;
    }
    case HVD_MSG_EXIT: {
        uint32_t rank = hvd_rbuf_u32(&r);
        uint8_t kind = hvd_rbuf_u8(&r);
        int32_t code = hvd_rbuf_i32(&r);
        if (hvd_rbuf_done(&r) || rank >= (uint32_t)job->plan->size ||
            job->plan->ranks[rank].host != a->host || kind > HVD_EXIT_NOCWD)
            return HVD_EPROTO;
        hr_job_rank_done(job, rank, kind, code);
        return 0;
    }
    case HVD_MSG_NOTE: {
        uint8_t level = hvd_rbuf_u8(&r);
        char *text = hvd_rbuf_strdup(&r);
        if (text == NULL || hvd_rbuf_done(&r) != 0) {
            free(text);
            return r.err ? r.err : HVD_EPROTO;
        }
        if (level == HVD_NOTE_ERROR)
            hvd_log_error("host %s: %s", a->name, text);
        else if (level == HVD_NOTE_WARN)
            hvd_log_warn("host %s: %s", a->name, text);
        else
            hvd_log_info("host %s: %s", a->name, text);
        free(text);
        return 0;
    }
    case HVD_MSG_STDIN_TAKEN: {
        struct hr_agents *g = agents_of(job);
        if (f->len != 0 || g->stdin_agent < 0 ||
            g->agents[g->stdin_agent] != a || g->stdin_out == 0)
            return HVD_EPROTO;
        if (g->stdin_out-- == STDIN_WINDOW && !g->stdin_eof)
            hr_job_read_stdin(job);
        return 0;
    }
    case HVD_MSG_FROM:
    case HVD_MSG_GONE:
        return relay_frame(job, a, f);
    case HVD_MSG_RDV_OPEN:
    case HVD_MSG_RDV_DATA:
    case HVD_MSG_RDV_CLOSE:
        return hr_carry_frame(a, f);
    default:
        return HVD_EPROTO;
    }
}

/* Stops or resumes reading every agent. Resuming one may fill the queue
 * again at once, which pauses them all; the loop then stops. */
static void agents_pause(struct hr_job *job, int pause)
{
    struct hr_agents *g = agents_of(job);
    for (int i = 0; i < g->nagents && job->out_paused == pause; i++)
        if (!g->agents[i]->ended)
            g->agents[i]->link->pause(g->agents[i], pause);
}

static void agent_bytes(struct hr_agent *a, const char *buf, size_t n)
{
    struct hvd_frame f;
    int rc = hvd_frame_reader_push(&a->reader, buf, n);
    if (rc == 0)
        while ((rc = hvd_frame_reader_next(&a->reader, &f)) == 1 &&
               (rc = handle_frame(a->job, a, &f)) == 0)
            ;
    if (rc < 0) {
        snprintf(a->failure, sizeof(a->failure),
                 "bad message from hvd-agent (%s); is it the same version "
                 "as horovodrun?",
                 hr_err_str(rc));
        if (agents_of(a->job)->started)
            hr_job_fail(a->job, "host %s: %s", a->name, a->failure);
        a->link->kill(a, SIGKILL);
    }
    hr_output_flush(&a->job->out);
}

/* Whether a rank-less failure of this agent ends the job. */
static void agent_lost(struct hr_job *job, struct hr_agent *a)
{
    if (agents_of(job)->el) {
        hr_agents_elastic_lost(job, a);
        return;
    }
    int lost = 0;
    for (int r = 0; r < job->plan->size; r++)
        if (job->plan->ranks[r].host == a->host && !job->ranks[r].done)
            lost++;
    if (lost == 0 || job->killing)
        return;
    if (a->failure[0])
        hr_job_fail(job, "host %s: %s", a->name, a->failure);
    else if (a->term_signal)
        hr_job_fail(job,
                    "host %s: hvd-agent was killed by signal %d (%s) with %d "
                    "ranks still running",
                    a->name, a->term_signal, hr_summary_signame(a->term_signal),
                    lost);
    else
        hr_job_fail(job,
                    "host %s: hvd-agent exited with status %lld with %d ranks "
                    "still running",
                    a->name, (long long)a->status, lost);
}

static void agent_ended(struct hr_agent *a)
{
    struct hr_job *job = a->job;
    struct hr_agents *g = agents_of(job);
    int lost = !job->stopping;
    if (a->ended)
        return;
    a->ended = 1;
    a->running = a->reading = 0;
    a->link->release(a);
    hr_carry_end(a);
    if (!g->started) {
        /* Pre-flight: a host that ends before it is ready failed, unless
         * we sent it home. */
        if (a->failure[0] == '\0' && !job->stopping)
            snprintf(a->failure, sizeof(a->failure),
                     "hvd-agent exited with status %lld before it was ready",
                     (long long)a->status);
        if (a->failure[0])
            g->preflight_failed = 1;
        check_preflight(job);
    } else {
        agent_lost(job, a);
    }
    hr_agents_end_subtree(job, a, lost);
    if (--g->agents_left == 0 && (!g->el || hr_elastic_over(g->el)))
        hr_job_ended(job);
}

/* What the links tell the job controller. */
static const struct hr_link_cb agent_cb = {
    .bytes = agent_bytes,
    .ended = agent_ended,
};

/* A block of stdin to rank 0's agent; the end of input as an empty
 * frame. */
static void agents_write_stdin(struct hr_job *job, const char *buf, size_t n)
{
    struct hr_agents *g = agents_of(job);
    struct hr_agent *a = g->agents[g->stdin_agent];
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    /* Counted first: the send may read the agent's TAKEN of it. */
    if (n == 0)
        g->stdin_eof = 1;
    else
        g->stdin_out++;
    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, buf, n);
    if (hvd_wbuf_finish(&w, HVD_MSG_STDIN, &f, &len) == 0)
        a->link->send(a, f, len);
    if (n > 0 && g->stdin_out < STDIN_WINDOW)
        hr_job_read_stdin(job);
}

static void on_start_timeout(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    struct hr_agents *g = agents_of(job);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        /* An agent that another one starts: that one says what it was
         * doing when the STOP below ends it. */
        if (!a->hello && a->failure[0] == '\0' && !hr_relay_spawned(a))
            snprintf(a->failure, sizeof(a->failure),
                     "timed out after %g s while %s (--start-timeout)",
                     job->opts->start_timeout,
                     a->stage ? a->stage : "starting hvd-agent");
    }
    g->preflight_failed = 1;
    hr_job_stop(job, 1);
}

/* Pre-flight failures name every host that failed. */
static int agents_failure(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    if (g->el)
        return hr_elastic_failure(g->el);
    if (!g->preflight_failed || g->started)
        return -1;
    for (int i = 0; i < g->nagents; i++)
        if (g->agents[i]->failure[0])
            hvd_log_error("host %s: %s", g->agents[i]->name,
                          g->agents[i]->failure);
    return HR_EXIT_PREFLIGHT;
}

/* The address ranks reach the rendezvous server at: the user's choice
 * (an address, or the first of the --network-interfaces), else this
 * host's address on the route to the remote hosts (that of the first SSH
 * connection, or the route to the first srun host), else loopback. */
int hr_agents_rdv_addr(struct hr_job *job, char *out, size_t len)
{
    const struct hr_opts *o = job->opts;
    struct hr_agents *g = agents_of(job);
    if (o->rendezvous_addr) {
        snprintf(out, len, "%s", o->rendezvous_addr);
        return 0;
    }
    if (o->network_interfaces) {
        char first[64];
        snprintf(first, sizeof(first), "%.*s",
                 (int)strcspn(o->network_interfaces, ","),
                 o->network_interfaces);
        return hr_net_if_addr(first, out, len);
    }
    for (int i = 0; i < g->nagents; i++) {
        if (g->agents[i]->ssh)
            return hr_ssh_addr(g->agents[i]->ssh, 1, out, len);
        if (hr_rsh_addr(g->agents[i]->rsh, 1, out, len) == 0)
            return 0;
    }
    for (int i = 0; i < g->nagents; i++)
        if (g->agents[i]->argv.n)
            return hr_net_route_addr(g->agents[i]->name, out, len);
    snprintf(out, len, "127.0.0.1");
    return 0;
}

/* Finds the agent (and srun on PATH for Slurm), at the first host that
 * needs them. Returns 0, or HVD_EINVAL once it printed why. */
static int remote_paths(const struct hr_opts *o, struct hr_srun_paths *sp)
{
    if (sp->found)
        return 0;
    if (o->launcher == HR_LAUNCH_SLURM &&
        hvd_spawn_resolve("srun", environ, sp->srun, sizeof(sp->srun)) != 0) {
        hvd_log_error("--launcher slurm needs srun, and there is none on "
                      "PATH; add Slurm's bin directory to PATH or use "
                      "--launcher ssh");
        return HVD_EINVAL;
    }
    sp->agent = o->agent_path ? o->agent_path : sp->here;
    if (o->agent_path == NULL &&
        hr_link_sibling_path("hvd-agent", sp->here, sizeof(sp->here)) != 0) {
        hvd_log_error("cannot find hvd-agent next to horovodrun");
        return HVD_EINVAL;
    }
    sp->found = 1;
    return 0;
}

/* The remote-exec link of host a: the listener, once, and the command. */
static int rsh_link(struct hr_job *job, struct hr_agent *a)
{
    const struct hr_opts *o = job->opts;
    struct hr_agents *g = agents_of(job);
    char err[256];
    int rc = remote_paths(o, &g->srun);
    if (rc != 0)
        return rc;
    err[0] = '\0';
    if (g->rsh == NULL &&
        (g->rsh = hr_rsh_server_new(job->loop, err, sizeof(err))) == NULL)
        return HVD_ENOMEM;
    if (err[0]) {
        hvd_log_error("%s", err);
        return HVD_ESYS;
    }
    if ((a->rsh = hr_rsh_new(a, g->rsh, o->rsh_agent, g->srun.agent)) == NULL) {
        hvd_log_error("host %s: %s", a->name, a->failure);
        return HVD_EINVAL;
    }
    return 0;
}

struct hr_ssh_cfg hr_agents_ssh_cfg(const struct hr_opts *o)
{
    return (struct hr_ssh_cfg){
        .port = o->ssh_port,
        .identity_file = o->identity_file,
        .agent_path = o->agent_path,
        .accept_new = o->ssh_accept_new,
        .retry_s = o->start_timeout,
    };
}

/* Adds the agent of host h (index in job->hosts) and says how it is
 * reached; it is started by its link's start. 0, or horovodrun's exit
 * code once it said why. */
int hr_agents_add(struct hr_job *job, int h, struct hr_agent **out)
{
    const struct hr_opts *o = job->opts;
    struct hr_agents *g = agents_of(job);
    const struct hr_ssh_cfg ssh_cfg = hr_agents_ssh_cfg(o);
    struct hr_agent *a = calloc(1, sizeof(*a));

    if (a == NULL || (g->nagents == g->cap && grow_agents(g) != 0)) {
        free(a);
        hvd_log_error("out of memory for host %s", job->hosts->hosts[h].name);
        return HR_EXIT_INTERNAL;
    }
    a->job = job;
    a->loop = job->loop;
    a->link = &hr_link_pipes;
    a->cb = &agent_cb;
    a->host = h;
    a->name = job->hosts->hosts[h].name;
    a->nranks = (uint32_t)hvd_plan_host_ranks(job->plan, h);
    hvd_frame_reader_init(&a->reader, HVD_FRAME_MAX);
    hvd_strvec_init(&a->argv);
    int rc = 0;
    if (!hr_host_is_local(a->name)) {
        if (o->launcher == HR_LAUNCH_SLURM) {
            /* Found once, and only when a host needs srun. */
            if ((rc = remote_paths(o, &g->srun)) == 0)
                rc = hr_srun_argv(&a->argv, g->srun.srun, a->name,
                                  g->srun.agent);
        } else if (o->launcher == HR_LAUNCH_RSH) {
            rc = rsh_link(job, a);
        } else {
            a->link = &hr_link_ssh;
            if ((a->ssh = hr_ssh_new(a, &ssh_cfg)) == NULL)
                rc = HVD_ENOMEM;
        }
        if (rc == HVD_ENOMEM)
            hvd_log_error("out of memory");
        if (rc != 0) {
            /* Not counted in nagents: the cleanup never sees it. */
            hr_rsh_free(a->rsh);
            hvd_frame_reader_close(&a->reader);
            hvd_strvec_close(&a->argv);
            free(a);
            return rc == HVD_ENOMEM || rc == HVD_ESYS ? HR_EXIT_INTERNAL
                                                      : HR_EXIT_USAGE;
        }
        g->remote = 1;
    }
    g->agents[g->nagents++] = a;
    g->agents_left++;
    *out = a;
    return 0;
}

/*
 * Room for the job's descriptors: every rank whose agent does not carry
 * its rendezvous keeps a connection to horovodrun for the whole job,
 * strangers may hold up to 512 more, and the agent on this host (which
 * inherits the limit) holds three pipes a rank. The soft open-files limit
 * is raised that far, up to the hard one; where that is too low, one line
 * says so.
 */
static void make_room(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    int ranks = 0;
    for (int i = 0; i < g->nagents; i++)
        if (!hr_agents_carries(job, g->agents[i]))
            ranks += (int)g->agents[i]->nranks;
    struct rlimit rl;
    rlim_t want = (rlim_t)ranks * 4 + 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= want)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur =
        rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl.rlim_cur = was;
    if (rl.rlim_cur < want)
        hvd_log_warn("%d ranks may need %llu open files in "
                     "horovodrun (a rendezvous connection each), and the "
                     "hard limit is %llu; raise it (ulimit -Hn, or "
                     "LimitNOFILE in systemd) if ranks fail to connect",
                     ranks, (unsigned long long)want,
                     (unsigned long long)rl.rlim_max);
    else
        hvd_log_info("raised the open-files limit from %llu to %llu for "
                     "%d ranks",
                     (unsigned long long)was, (unsigned long long)want, ranks);
}

/* One agent per host that has ranks. 0, or horovodrun's exit code once
 * it said why. */
static int add_agents(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    for (size_t h = 0; h < job->hosts->n; h++) {
        struct hr_agent *a;
        int rc;
        if (hvd_plan_host_ranks(job->plan, (int)h) == 0)
            continue;
        if ((rc = hr_agents_add(job, (int)h, &a)) != 0)
            return rc;
        if ((int)h == job->plan->ranks[0].host)
            g->stdin_agent = g->nagents - 1;
    }
    if (hr_agents_plant_tree(job) != 0) {
        hvd_log_error("out of memory");
        return HR_EXIT_INTERNAL;
    }
    return 0;
}

static int agents_start(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    int rc;

    g->stdin_agent = -1;
    if (getcwd(g->cwd, sizeof(g->cwd)) == NULL) {
        hvd_log_error("cannot get the working directory: %s", strerror(errno));
        return HR_EXIT_INTERNAL;
    }
    if (job->opts->elastic && (rc = hr_elastic_start(job)) != 0)
        return rc;
    if ((rc = hr_job_open(job)) != 0)
        return rc;
    if (hvd_secret_new(g->secret) != 0) {
        hvd_log_error("cannot read random bytes for the job secret: %s",
                      strerror(errno));
        return HR_EXIT_INTERNAL;
    }
    hvd_hex_encode(g->secret, sizeof(g->secret), g->secret_hex);
    if (job->opts->elastic) {
        /* No pre-flight: hosts come and go; each agent gets its part when
         * it says HELLO. */
        uv_timer_init(job->loop, &g->start_timer);
        uv_timer_init(job->loop, &g->ping_timer);
        g->start_timer.data = g->ping_timer.data = job;
        g->started = 1;
        uv_timer_start(&g->ping_timer, on_ping, PING_EVERY_MS, PING_EVERY_MS);
        hr_startup_start(job);
        return hr_elastic_go(job);
    }
    if ((rc = add_agents(job)) != 0)
        return rc;
    make_room(job);

    uv_timer_init(job->loop, &g->start_timer);
    uv_timer_init(job->loop, &g->ping_timer);
    g->start_timer.data = g->ping_timer.data = job;
    uv_timer_start(&g->start_timer, on_start_timeout,
                   (uint64_t)(job->opts->start_timeout * 1000), 0);
    hr_startup_start(job);
    for (int i = 0; i < g->nagents; i++) {
        struct hr_agent *a = g->agents[i];
        if (a->link->start(a) != 0) {
            a->ended = 1;
            g->agents_left--;
            g->preflight_failed = 1;
        }
    }
    check_preflight(job);
    /* No agent started: there is nothing to wait for. */
    if (g->agents_left == 0)
        job->ended = 1;
    return 0;
}

static void agents_close(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    if (g->started)
        hvd_log_info("output: %llu bytes to the terminal, at most %zu "
                     "queued (pausing the agents at %u)",
                     (unsigned long long)job->out.written, job->out.peak,
                     HR_OUTPUT_HIGH);
    hr_elastic_close(g->el);
    for (int i = 0; i < g->nagents; i++)
        hr_rsh_hangup(g->agents[i]->rsh);
    hr_rsh_server_close(g->rsh);
    hr_rdv_close(&g->rdv);
    hr_gloo_store_close(g->gloo);
}

static void agents_free(struct hr_job *job)
{
    struct hr_agents *g = agents_of(job);
    for (int i = 0; i < g->nagents; i++) {
        hvd_frame_reader_close(&g->agents[i]->reader);
        hr_ssh_free(g->agents[i]->ssh);
        hr_rsh_free(g->agents[i]->rsh);
        hr_relay_free(g->agents[i]->relay);
        hr_carry_free(g->agents[i]->carry);
        hvd_strvec_close(&g->agents[i]->argv);
        free(g->agents[i]);
    }
    memset(g->secret, 0, sizeof(g->secret));
    free(g->agents);
    hr_rsh_server_free(g->rsh);
    hr_elastic_free(g->el);
}

const struct hr_launch_ops hr_launch_agents = {
    .forward_to = "all ranks",
    .kill_all = "all ranks",
    .all_stopped = "all ranks exited",
    .stop_late = NULL,
    .no_answer = "hosts did not report their ranks stopped",
    .stops_ranks = 0,
    .size = sizeof(struct hr_agents),
    .start = agents_start,
    .signal = agents_signal,
    .stop = agents_stop,
    .write_stdin = agents_write_stdin,
    .pause = agents_pause,
    .place = NULL,
    .failure = agents_failure,
    .close = agents_close,
    .free = agents_free,
};
