/* horovodrun's job controller: one agent per host, fail-fast, summary. */
#include "launcher/horovodrun/job.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/lib/env.h"
#include "common/envc.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/linesplit.h"
#include "launcher/lib/log.h"
#include "launcher/lib/proto.h"
#include "common/wire.h"
#include "launcher/horovodrun/gloo_store.h"
#include "launcher/link/link.h"
#include "launcher/lib/loop.h"
#include "launcher/lib/net.h"
#include "launcher/lib/spawn.h"
#include "launcher/link/srun.h"
#include "launcher/link/ssh.h"
#include "launcher/horovodrun/startup.h"
#include "launcher/horovodrun/detach.h"
#include "launcher/horovodrun/serve.h"

extern char **environ;

/* How long agents get, beyond the kill grace, to report a stopped job. */
#define STOP_SLACK_MS 5000

static void on_stdin(struct hr_stdin *in, const char *buf, size_t n);
static void stop_all(struct hr_job *job, int now);
static void check_preflight(struct hr_job *job);
static int rdv_addr(struct hr_job *job, char *out, size_t len);

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
        a->link->send(a, f, len, 0);
}

static const char *host_name(const struct hr_job *job, int h)
{
    return job->hosts->hosts[h].name;
}

static int is_the_cause(const struct hr_job *job)
{
    return hr_summary_is_cause(job->ranks, job->failed_rank, job->failed_at,
                               job->interrupt_sig, uv_now(job->loop),
                               job->opts->kill_grace);
}

/* Records an agent-level failure (the first one wins) and ends the job. */
static void fail_job(struct hr_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail_job(struct hr_job *job, const char *fmt, ...)
{
    if (!job->agent_failure && (job->failed_rank < 0 || is_the_cause(job))) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(job->failure, sizeof(job->failure), fmt, ap);
        va_end(ap);
        job->agent_failure = 1;
    }
    stop_all(job, 0);
}

static void on_stop_timeout(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    /* The agents may have reported long ago, their frames waiting behind
     * lines for a slow terminal: wait as long as the terminal moves. */
    if (hr_output_pending(&job->out) > 0 && job->out.written != job->out_mark) {
        job->out_mark = job->out.written;
        uv_timer_again(&job->stop_timer);
        return;
    }
    if (!job->killing) {
        stop_all(job, 1);
        return;
    }
    /* The agents neither finished nor answered: give up on them. Closing
     * their pipes makes them kill their ranks. */
    if (hr_output_pending(&job->out) > 0)
        fail_job(job, "the terminal took no output for %d s; gave up",
                 STOP_SLACK_MS / 1000);
    else
        fail_job(job, "hosts did not report their ranks stopped; gave up");
    uv_timer_stop(&job->stop_timer);
    uv_stop(job->loop);
}

static void stop_all(struct hr_job *job, int now)
{
    if (now ? job->killing : job->stopping)
        return;
    job->stopping = 1;
    job->killing |= now;
    for (int i = 0; i < job->nagents; i++) {
        struct hr_agent *a = &job->agents[i];
        if (!a->running)
            continue;
        if (a->hello && job->started)
            send_simple(a, HVD_MSG_STOP, (uint32_t)now, 1);
        else
            a->link->kill(a, now ? SIGKILL : SIGTERM);
    }
    uint64_t ms =
        now ? STOP_SLACK_MS
            : (uint64_t)(job->opts->kill_grace * 1000) + STOP_SLACK_MS;
    job->out_mark = job->out.written;
    uv_timer_start(&job->stop_timer, on_stop_timeout, ms, ms);
}

static void rank_done(struct hr_job *job, uint32_t rank, uint8_t kind,
                      int32_t code)
{
    if (rank >= (uint32_t)job->plan->size || job->ranks[rank].done)
        return;
    struct hr_rank_state *rs = &job->ranks[rank];
    rs->done = 1;
    rs->kind = kind;
    rs->code = code;
    job->ranks_done++;
    int failed = kind != HVD_EXIT_CODE || code != 0;
    int cause = kind == HVD_EXIT_SIGNAL && code != SIGTERM && is_the_cause(job);
    if (failed && (job->failed_rank < 0 || cause) && !job->agent_failure) {
        job->failed_rank = (int)rank;
        job->failed_at = uv_now(job->loop);
        stop_all(job, 0);
    }
}

static int send_job(struct hr_job *job, struct hr_agent *a)
{
    struct hvd_jobspec js;
    uint8_t *f = NULL;
    size_t len;
    int err = 0;

    hvd_jobspec_init(&js);
    struct hvd_endpoints ep = {
        .rdv_addr = job->rdv.addr,
        .rdv_port = job->rdv.port,
        .master_addr = host_name(job, job->plan->ranks[0].host),
        .master_port = job->master_port,
        .secret_hex = job->secret_hex,
        .start_timeout = job->opts->start_timeout,
        .gloo_port = job->gloo_port,
        .gloo_iface = job->gloo_iface,
        .nccl_ifnames = job->opts->network_interfaces,
    };
    js.cwd = strdup(job->cwd);
    js.kill_grace_ms = (uint32_t)(job->opts->kill_grace * 1000);
    js.gpu_pinning = (uint8_t)job->opts->gpu_pinning;
    js.bind = (uint8_t)job->opts->bind;
    for (int i = 0; i < job->opts->cmdc && !err; i++)
        err = hvd_strvec_push(&js.argv, job->opts->cmd[i]);
    for (char **e = environ; *e && !err; e++)
        err = hvd_strvec_push(&js.env, *e);
    for (int r = 0; r < job->plan->size && !err; r++) {
        const struct hvd_slot *s = &job->plan->ranks[r];
        if (s->host != a->host)
            continue;
        struct hvd_jobrank *jr =
            hvd_jobspec_add_rank(&js, (uint32_t)r, (uint32_t)s->local_rank);
        err = jr ? hvd_env_contract(&jr->env, job->plan, job->hosts, r, &ep)
                 : HVD_ENOMEM;
    }
    if (!err && js.cwd == NULL)
        err = HVD_ENOMEM;
    if (!err)
        err = hvd_jobspec_encode(&js, &f, &len);
    if (!err)
        a->link->send(a, f, len, 0);
    hvd_jobspec_close(&js);
    return err;
}

/* Remote agents stop their ranks if they hear nothing for this long. */
#define PING_EVERY_MS 1000
#define PING_SILENCE_MS 4000

static void on_ping(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    for (int i = 0; i < job->nagents; i++)
        if (job->agents[i].ssh && job->agents[i].running)
            send_simple(&job->agents[i], HVD_MSG_PING, PING_SILENCE_MS, 0);
}

/* Horovod's Gloo rendezvous on the rendezvous address, open to the job's
 * hosts and this one, for ranks that link real Horovod. Without it
 * (--no-gloo-rendezvous) those ranks get port 0, where nothing listens,
 * so that they fail in hvd.init() instead of each running alone. */
static int start_gloo(struct hr_job *job, const char *addr)
{
    struct hr_gloo_cfg cfg;
    char err[256];
    int rc = 0;

    const char *ctl = getenv(HVD_ENV_CONTROLLER);
    if (ctl != NULL && strcmp(ctl, "gloo") != 0)
        hvd_log_warn("the ranks get %s=gloo, not the %s=%s of this "
                     "environment: horovodrun's own launcher starts them; "
                     "use --mpi to run them under mpirun",
                     HVD_ENV_CONTROLLER, HVD_ENV_CONTROLLER, ctl);
    if (hr_net_addr_if(addr, job->gloo_iface, sizeof(job->gloo_iface)) != 0)
        job->gloo_iface[0] = '\0';
    if (job->opts->no_gloo_rendezvous)
        return 0;
    hr_gloo_cfg_init(&cfg);
    if ((rc = hr_gloo_cfg_allow_self(&cfg, err, sizeof(err))) != 0)
        goto out;
    for (int i = 0; i < job->nagents && rc == 0; i++)
        rc =
            hr_gloo_cfg_allow_host(&cfg, job->agents[i].name, err, sizeof(err));
    if (rc == 0)
        rc = hr_gloo_cfg_plan(&cfg, job->plan, job->hosts, err, sizeof(err));
    if (rc == 0)
        rc = hr_gloo_store_start(&job->gloo, &cfg, addr, 0, &job->gloo_port,
                                 err, sizeof(err));
out:
    if (rc != 0)
        fail_job(job,
                 "cannot start Horovod's Gloo rendezvous on %s: %s "
                 "(--no-gloo-rendezvous turns it off)",
                 addr, err);
    else
        hvd_log_info("Gloo rendezvous (HTTP) on %s:%d, interface '%s'", addr,
                     job->gloo_port, job->gloo_iface);
    hr_gloo_cfg_close(&cfg);
    return rc;
}

/* Pre-flight passed on every host: the rendezvous server goes up where
 * all hosts can reach it, and every agent gets its part of the job. */
static void start_job(struct hr_job *job)
{
    char addr[64];
    int rc;

    uv_timer_stop(&job->start_timer);
    job->started = 1;
    rc = rdv_addr(job, addr, sizeof(addr));
    if (rc == 0)
        rc = hr_rdv_start(&job->rdv, job->loop, job->remote, addr, job->secret,
                          job->plan->size, job->opts->start_timeout);
    if (rc != 0) {
        fail_job(job, "cannot start the rendezvous server on %s: %s", addr,
                 rc < 0 ? uv_strerror(rc) : "no such address");
        return;
    }
    if (start_gloo(job, addr) != 0)
        return;
    job->master_port = job->agents[job->stdin_agent].free_port;
    hvd_log_info("rendezvous server on %s:%d; MASTER_PORT %d", job->rdv.addr,
                 job->rdv.port, job->master_port);
    for (int i = 0; i < job->nagents; i++) {
        struct hr_agent *a = &job->agents[i];
        if ((rc = send_job(job, a)) != 0) {
            fail_job(job, "host %s: cannot send the job: %s", a->name,
                     hr_err_str(rc));
            return;
        }
    }
    hr_stdin_read(&job->in);
    if (job->remote) {
        on_ping(&job->ping_timer);
        uv_timer_start(&job->ping_timer, on_ping, PING_EVERY_MS, PING_EVERY_MS);
    }
}

/* Pre-flight ends when every host is ready or has failed: then either the
 * job starts, or the ready hosts are sent home and every failed host is
 * reported. */
static void check_preflight(struct hr_job *job)
{
    if (job->started || job->stopping)
        return;
    for (int i = 0; i < job->nagents; i++)
        if (!job->agents[i].hello && !job->agents[i].ended)
            return;
    if (job->preflight_failed)
        stop_all(job, 0);
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
    }
    hvd_hello_close(&h);
    check_preflight(job);
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
        rank_done(job, rank, kind, code);
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
    default:
        return HVD_EPROTO;
    }
}

/* The terminal fell behind (pause) or caught up: stop or resume reading
 * every agent. Resuming one may fill the queue again at once, which pauses
 * them all; the loop then stops. */
static void on_output_pause(void *arg, int pause)
{
    struct hr_job *job = arg;
    job->out_paused = pause;
    for (int i = 0; i < job->nagents && job->out_paused == pause; i++)
        if (!job->agents[i].ended)
            job->agents[i].link->pause(&job->agents[i], pause);
}

/* Everything the ranks printed was written: the job may end. */
static void on_output_idle(void *arg)
{
    struct hr_job *job = arg;
    if (job->agents_left == 0)
        uv_stop(job->loop);
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
        if (a->job->started)
            fail_job(a->job, "host %s: %s", a->name, a->failure);
        a->link->kill(a, SIGKILL);
    }
    hr_output_flush(&a->job->out);
}

static void agent_sent(struct hr_agent *a)
{
    if (!a->job->stopping)
        hr_stdin_read(&a->job->in);
}

/* Whether a rank-less failure of this agent ends the job. */
static void agent_lost(struct hr_job *job, struct hr_agent *a)
{
    int lost = 0;
    for (int r = 0; r < job->plan->size; r++)
        if (job->plan->ranks[r].host == a->host && !job->ranks[r].done)
            lost++;
    if (lost == 0 || job->killing)
        return;
    if (a->failure[0])
        fail_job(job, "host %s: %s", a->name, a->failure);
    else if (a->term_signal)
        fail_job(job,
                 "host %s: hvd-agent was killed by signal %d (%s) with %d "
                 "ranks still running",
                 a->name, a->term_signal, hr_summary_signame(a->term_signal),
                 lost);
    else
        fail_job(job,
                 "host %s: hvd-agent exited with status %lld with %d ranks "
                 "still running",
                 a->name, (long long)a->status, lost);
}

static void agent_ended(struct hr_agent *a)
{
    struct hr_job *job = a->job;
    if (a->ended)
        return;
    a->ended = 1;
    a->running = a->reading = 0;
    a->link->release(a);
    if (!job->started) {
        /* Pre-flight: a host that ends before it is ready failed, unless
         * we sent it home. */
        if (a->failure[0] == '\0' && !job->stopping)
            snprintf(a->failure, sizeof(a->failure),
                     "hvd-agent exited with status %lld before it was ready",
                     (long long)a->status);
        if (a->failure[0])
            job->preflight_failed = 1;
        check_preflight(job);
    } else {
        agent_lost(job, a);
    }
    /* The last lines may still be on their way to the terminal. */
    if (--job->agents_left > 0)
        return;
    hr_output_end(&job->out);
    if (hr_output_pending(&job->out) == 0)
        uv_stop(job->loop);
}

/* What the links tell the job controller. */
static const struct hr_link_cb agent_cb = {
    .bytes = agent_bytes,
    .ended = agent_ended,
    .sent = agent_sent,
};

/* A block of stdin to rank 0's agent; the end of input as an empty
 * frame. The next read starts once the agent has taken it. */
static void on_stdin(struct hr_stdin *in, const char *buf, size_t n)
{
    struct hr_job *job = in->data;
    if (job->stopping)
        return;
    struct hr_agent *a = &job->agents[job->stdin_agent];
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, buf, n);
    if (hvd_wbuf_finish(&w, HVD_MSG_STDIN, &f, &len) == 0)
        a->link->send(a, f, len, n > 0);
}

/* A signal, or a stop request through a detached job's socket (how says
 * which): forwarded to the ranks, which get the grace to exit; a second
 * one kills them. */
static void interrupt(struct hr_job *job, int sig, const char *how)
{
    if (++job->signals_seen > 1) {
        hvd_log_warn("%s again: killing all ranks now", how);
        stop_all(job, 1);
        return;
    }
    job->interrupt_sig = sig;
    hvd_log_warn("%s; forwarding it to all ranks (again to kill them at "
                 "once)",
                 how);
    for (int i = 0; i < job->nagents; i++) {
        struct hr_agent *a = &job->agents[i];
        if (a->running && a->hello && job->started)
            send_simple(a, HVD_MSG_SIGNAL, (uint32_t)sig, 0);
        else if (a->running)
            a->link->kill(a, SIGTERM);
    }
}

static void on_signal(uv_signal_t *h, int sig)
{
    char how[64];
    snprintf(how, sizeof(how), "received %s", hr_summary_signame(sig));
    interrupt(h->data, sig, how);
}

/* horovodrun stop JOB, or Ctrl-C in horovodrun attach. */
static void on_stop_request(void *arg, int now)
{
    struct hr_job *job = arg;
    if (now && job->signals_seen == 0) {
        hvd_log_warn("stop --now requested: killing all ranks now");
        job->signals_seen = 1;
        job->interrupt_sig = SIGTERM;
        stop_all(job, 1);
        return;
    }
    interrupt(job, SIGTERM, "stop requested (SIGTERM)");
}

static void on_start_timeout(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    for (int i = 0; i < job->nagents; i++) {
        struct hr_agent *a = &job->agents[i];
        if (!a->hello && a->failure[0] == '\0')
            snprintf(a->failure, sizeof(a->failure),
                     "timed out after %g s while %s (--start-timeout)",
                     job->opts->start_timeout,
                     a->stage ? a->stage : "starting hvd-agent");
    }
    job->preflight_failed = 1;
    stop_all(job, 1);
}

static int summarize(struct hr_job *job)
{
    if (job->preflight_failed && !job->started) {
        for (int i = 0; i < job->nagents; i++)
            if (job->agents[i].failure[0])
                hvd_log_error("host %s: %s", job->agents[i].name,
                              job->agents[i].failure);
        return HR_EXIT_PREFLIGHT;
    }
    if (job->agent_failure) {
        hvd_log_error("%s", job->failure);
        return HR_EXIT_INTERNAL;
    }
    const char *why = "";
    char intr[64] = "";
    if (job->interrupt_sig) {
        snprintf(intr, sizeof(intr),
                 "interrupted by %s: ", hr_summary_signame(job->interrupt_sig));
        why = intr;
    }
    if (job->failed_rank < 0) {
        if (job->interrupt_sig) {
            hvd_log_error("%sall ranks exited", why);
            return 128 + job->interrupt_sig;
        }
        return HR_EXIT_OK;
    }
    int r = job->failed_rank;
    const struct hr_rank_state *rs = &job->ranks[r];
    const struct hvd_slot *s = &job->plan->ranks[r];
    return hr_summary_rank(why, r, host_name(job, s->host), s->local_rank,
                           rs->kind, rs->code, job->opts->cmd[0]);
}

/* The address ranks reach the rendezvous server at: the user's choice
 * (an address, or the first of the --network-interfaces), else this
 * host's address on the route to the remote hosts (that of the first SSH
 * connection, or the route to the first srun host), else loopback. */
static int rdv_addr(struct hr_job *job, char *out, size_t len)
{
    const struct hr_opts *o = job->opts;
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
    for (int i = 0; i < job->nagents; i++)
        if (job->agents[i].ssh)
            return hr_ssh_local_addr(job->agents[i].ssh, out, len);
    for (int i = 0; i < job->nagents; i++)
        if (job->agents[i].argv.n)
            return hr_net_route_addr(job->agents[i].name, out, len);
    snprintf(out, len, "127.0.0.1");
    return 0;
}

/* srun and the hvd-agent it starts, found once for all the Slurm hosts. */
struct srun_paths {
    int found;
    char srun[PATH_MAX];
    char here[PATH_MAX];
    const char *agent;
};

/* Finds srun on PATH and the agent, at the first host that needs them.
 * Returns 0, or HVD_EINVAL once it printed why. */
static int srun_find(const struct hr_opts *o, struct srun_paths *sp)
{
    if (sp->found)
        return 0;
    if (hvd_spawn_resolve("srun", environ, sp->srun, sizeof(sp->srun)) != 0) {
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

/* Everything before the loop runs: returns 0 or horovodrun's exit code. */
static int setup(struct hr_job *job)
{
    const struct hr_opts *o = job->opts;
    const struct hvd_hostlist *hosts = job->hosts;
    const struct hvd_plan *plan = job->plan;
    struct srun_paths sp = {0};
    const struct hr_ssh_cfg ssh_cfg = {
        .port = o->ssh_port,
        .identity_file = o->identity_file,
        .agent_path = o->agent_path,
        .accept_new = o->ssh_accept_new,
    };
    char err[512];
    int rc;

    if (getcwd(job->cwd, sizeof(job->cwd)) == NULL) {
        hvd_log_error("cannot get the working directory: %s", strerror(errno));
        return HR_EXIT_INTERNAL;
    }
    if ((rc = hr_output_init(&job->out, job->loop, plan, o, err,
                             sizeof(err))) != 0) {
        hvd_log_error("%s", rc == HVD_ENOMEM ? "out of memory" : err);
        return rc == HVD_ENOMEM ? HR_EXIT_INTERNAL : HR_EXIT_USAGE;
    }
    job->out.on_pause = on_output_pause;
    job->out.on_idle = on_output_idle;
    job->out.arg = job;
    /* Before any agent holds horovodrun's stderr. */
    if (job->detach &&
        (rc = hr_detach_serve(job->detach, o, job->loop, plan, &job->out,
                              on_stop_request, job, &job->serve)) != 0)
        return rc;
    if (hvd_secret_new(job->secret) != 0) {
        hvd_log_error("cannot read random bytes for the job secret: %s",
                      strerror(errno));
        return HR_EXIT_INTERNAL;
    }
    hvd_hex_encode(job->secret, sizeof(job->secret), job->secret_hex);

    job->ranks = calloc((size_t)plan->size, sizeof(*job->ranks));
    job->agents = calloc(hosts->n, sizeof(*job->agents));
    if (job->ranks == NULL || job->agents == NULL) {
        hvd_log_error("out of memory for %d ranks", plan->size);
        return HR_EXIT_INTERNAL;
    }
    for (size_t h = 0; h < hosts->n; h++) {
        int n = hvd_plan_host_ranks(plan, (int)h);
        if (n == 0)
            continue;
        struct hr_agent *a = &job->agents[job->nagents];
        a->job = job;
        a->loop = job->loop;
        a->link = &hr_link_pipes;
        a->cb = &agent_cb;
        a->host = (int)h;
        a->name = hosts->hosts[h].name;
        a->nranks = (uint32_t)n;
        hvd_frame_reader_init(&a->reader, HVD_FRAME_MAX);
        hvd_strvec_init(&a->argv);
        rc = 0;
        if (!hr_host_is_local(a->name)) {
            if (o->launcher == HR_LAUNCH_SLURM) {
                /* Found once, and only when a host needs srun. */
                if ((rc = srun_find(o, &sp)) == 0)
                    rc = hr_srun_argv(&a->argv, sp.srun, a->name, sp.agent);
            } else {
                a->link = &hr_link_ssh;
                if ((a->ssh = hr_ssh_new(a, &ssh_cfg)) == NULL)
                    rc = HVD_ENOMEM;
            }
            if (rc == HVD_ENOMEM)
                hvd_log_error("out of memory");
            if (rc != 0) {
                /* Not counted in nagents: the cleanup never sees it. */
                hvd_strvec_close(&a->argv);
                return rc == HVD_ENOMEM ? HR_EXIT_INTERNAL : HR_EXIT_USAGE;
            }
            job->remote = 1;
        }
        if ((int)h == plan->ranks[0].host)
            job->stdin_agent = job->nagents;
        job->nagents++;
    }
    job->agents_left = job->nagents;

    uv_timer_init(job->loop, &job->start_timer);
    uv_timer_init(job->loop, &job->stop_timer);
    uv_timer_init(job->loop, &job->ping_timer);
    job->start_timer.data = job->stop_timer.data = job->ping_timer.data = job;
    uv_signal_t *const sigs[] = {&job->sigint, &job->sigterm, &job->sighup};
    static const int signums[] = {SIGINT, SIGTERM, SIGHUP};
    hr_loop_signals(job->loop, sigs, signums, 3, job, on_signal, 0);
    uv_timer_start(&job->start_timer, on_start_timeout,
                   (uint64_t)(o->start_timeout * 1000), 0);
    hr_startup_start(job);
    for (int i = 0; i < job->nagents; i++) {
        struct hr_agent *a = &job->agents[i];
        if (a->link->start(a) != 0) {
            a->ended = 1;
            job->agents_left--;
            job->preflight_failed = 1;
        }
    }
    check_preflight(job);
    return 0;
}

int hr_job_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
               const struct hvd_plan *plan, struct hr_detach *d)
{
    struct hr_job job = {0};
    int rc;

    job.loop = uv_default_loop();
    hr_stdin_init(&job.in, job.loop, on_stdin, &job);
    job.opts = o;
    job.hosts = hosts;
    job.plan = plan;
    job.failed_rank = -1;
    job.stdin_agent = -1;
    job.detach = d;
    signal(SIGPIPE, SIG_IGN);

    rc = setup(&job);
    if (rc == 0 && job.agents_left > 0) {
        hr_output_take_log(&job.out, 1);
        uv_run(job.loop, UV_RUN_DEFAULT);
        hr_output_take_log(&job.out, 0);
    }
    if (rc == 0)
        rc = summarize(&job);
    if (job.started)
        hvd_log_info("output: %llu bytes to the terminal, at most %zu "
                     "queued (pausing the agents at %u)",
                     (unsigned long long)job.out.written, job.out.peak,
                     HR_OUTPUT_HIGH);
    if (job.serve)
        hr_serve_end(job.serve, rc);

    hr_rdv_close(&job.rdv);
    hr_gloo_store_close(job.gloo);

    /* A stdin read may still block in the thread pool; everything else
     * is closed so that sanitizers see no leaks. */
    hr_loop_close_all(job.loop, UV_RUN_NOWAIT);
    for (int i = 0; i < job.nagents; i++) {
        hvd_frame_reader_close(&job.agents[i].reader);
        hr_ssh_free(job.agents[i].ssh);
        hvd_strvec_close(&job.agents[i].argv);
    }
    memset(job.secret, 0, sizeof(job.secret));
    hr_output_close(&job.out);
    free(job.agents);
    free(job.ranks);
    return hr_loop_finish(job.loop, job.in.busy || hr_output_busy(&job.out),
                          rc);
}
