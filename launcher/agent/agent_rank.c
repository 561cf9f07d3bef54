/* hvd-agent's ranks: start them, stream their output, reap and stop them. */
#include "launcher/agent/agent.h"
#include "launcher/lib/bind.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/lib/env.h"
#include "common/envc.h"
#include "common/hvd_err.h"
#include "common/wire.h"
#include "launcher/lib/spawn.h"

static void on_kill_group(uv_timer_t *t);

/* Also says so of a rank that could not get an entry in the table. */
static void exit_frame(struct agent *ag, uint32_t rank, uint8_t kind,
                       int32_t code)
{
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;

    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, rank);
    hvd_wbuf_u8(&w, kind);
    hvd_wbuf_i32(&w, code);
    if (hvd_wbuf_finish(&w, HVD_MSG_EXIT, &f, &len) == 0)
        agent_send(ag, f, len);
}

static void send_exit(struct agent_rank *r)
{
    struct agent *ag = r->ag;

    exit_frame(ag, r->rank, r->kind, r->code);
    r->done = 1;
    if (r->in_open) {
        r->in_open = 0;
        uv_close((uv_handle_t *)&r->in, NULL);
    }
    if (--ag->live == 0) {
        /* Whatever the ranks left behind in their groups goes too. */
        for (uint32_t i = 0; i < ag->nranks; i++) {
            if (ag->ranks[i]->pid > 0)
                kill(-ag->ranks[i]->pid, SIGKILL);
            uv_timer_stop(&ag->ranks[i]->grace);
        }
        uv_timer_stop(&ag->grace);
        agent_finish(ag);
    }
}

/* A rank is done once it was reaped and both pipes reached EOF, so its
 * EXIT always follows its last line. */
static void maybe_done(struct agent_rank *r)
{
    if (r->done || !r->reaped)
        return;
    if (r->out.open || r->err.open) {
        if (!uv_is_active((uv_handle_t *)&r->drain))
            uv_timer_start(&r->drain, on_kill_group, HR_RANKPIPE_DRAIN_MS, 0);
        return;
    }
    uv_timer_stop(&r->drain);
    send_exit(r);
}

static void on_line(void *ctx, int which, const char *line, size_t len,
                    enum hvd_line_term term)
{
    struct agent_rank *r = ctx;
    agent_send_line(r->ag, r->rank, (uint8_t)which, (uint8_t)term, line, len);
}

/* One write for every line of a read. */
static void on_read_done(void *ctx)
{
    struct agent_rank *r = ctx;
    agent_flush(r->ag);
}

static void on_ended(void *ctx, int which)
{
    (void)which;
    maybe_done(ctx);
}

/* The drain and grace timers: something in the rank's group still holds
 * its pipes, or outlived KILL's grace. */
static void on_kill_group(uv_timer_t *t)
{
    struct agent_rank *r = t->data;
    kill(-r->pid, SIGKILL);
}

static void fail_spawn(struct agent_rank *r, uint8_t kind, int err)
{
    r->kind = kind;
    r->code = err;
    r->reaped = 1;
    maybe_done(r);
}

static void open_stream(struct agent_rank *r, struct hr_rankpipe *p, int which,
                        int fd)
{
    if (hr_rankpipe_init(p, r->ag->loop, &r->ag->pipes, r, which) != 0)
        return;
    if (hr_rankpipe_open(p, fd) == 0 && !r->ag->paused)
        hr_rankpipe_start(p);
}

/* Builds the rank's environment: the launcher's, the contract, the GPU. */
static int rank_env(struct agent *ag, const struct hvd_jobrank *jr,
                    struct hvd_strvec *env)
{
    int err = 0;
    for (size_t i = 0; i < ag->job.env.n && !err; i++)
        err = hvd_strvec_push(env, ag->job.env.v[i]);
    for (size_t i = 0; i < jr->env.n && !err; i++)
        err = hvd_strvec_setenv(env, jr->env.v[i]);
    if (!err)
        err = agent_carry_env(ag, env);
    char dev[64], entry[128];
    if (!err && ag->job.gpu_pinning &&
        hvd_gpu_pick(hvd_strvec_getenv(env, HVD_ENV_CUDA_VISIBLE), ag->gpus,
                     (int)jr->local_rank, dev, sizeof(dev))) {
        snprintf(entry, sizeof(entry), HVD_ENV_CUDA_VISIBLE "=%s", dev);
        err = hvd_strvec_setenv(env, entry);
    }
    return err;
}

static void start_rank(struct agent *ag, struct agent_rank *r,
                       const struct hvd_jobrank *jr, const cpu_set_t *cpu)
{
    struct hvd_strvec env;
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, inp[2] = {-1, -1};
    int err = 0;

    hvd_strvec_init(&env);
    if (rank_env(ag, jr, &env) != 0 || env.v == NULL) {
        err = ENOMEM;
        goto out;
    }
    if (pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        err = errno;
        goto out;
    }
    /* Only rank 0 reads the launcher's stdin; the others get /dev/null. */
    if (r->rank == 0 ? pipe2(inp, O_CLOEXEC) != 0
                     : (inp[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        err = errno;
        goto out;
    }
    struct hvd_spawn_req req = {
        .argv = ag->job.argv.v,
        .envp = env.v,
        .stdin_fd = inp[0],
        .stdout_fd = outp[1],
        .stderr_fd = errp[1],
        .cpu = cpu,
    };
    err = hvd_spawn(&req, &r->pid);
    if (err)
        goto out;
    close(outp[1]);
    close(errp[1]);
    close(inp[0]);
    outp[1] = errp[1] = inp[0] = -1;
    open_stream(r, &r->out, HVD_STREAM_STDOUT, outp[0]);
    open_stream(r, &r->err, HVD_STREAM_STDERR, errp[0]);
    outp[0] = errp[0] = -1;
    if (inp[1] >= 0 && uv_pipe_init(ag->loop, &r->in, 0) == 0) {
        r->in.data = r;
        r->in_open = 1;
        if (uv_pipe_open(&r->in, inp[1]) != 0)
            close(inp[1]);
        inp[1] = -1;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (outp[i] >= 0)
            close(outp[i]);
        if (errp[i] >= 0)
            close(errp[i]);
        if (inp[i] >= 0)
            close(inp[i]);
    }
    hvd_strvec_close(&env);
    if (err)
        fail_spawn(r, HVD_EXIT_SPAWN, err);
}

/*
 * Adds entries for the job's ranks from first on, all or none, so that the
 * entry of ag->job.ranks[first + i] is ag->ranks[nranks before + i]. The
 * timers are initialized last: a handle once initialized must be closed
 * before it is freed.
 */
static int add_entries(struct agent *ag, uint32_t first)
{
    const struct hvd_jobspec *js = &ag->job;
    uint32_t n = js->nranks - first;
    struct agent_rank **t = realloc(ag->ranks, (ag->nranks + n) * sizeof(*t));
    if (t == NULL)
        return ENOMEM;
    ag->ranks = t;
    t += ag->nranks;
    for (uint32_t i = 0; i < n; i++) {
        if ((t[i] = calloc(1, sizeof(*t[i]))) == NULL) {
            while (i-- > 0)
                free(t[i]);
            return ENOMEM;
        }
        t[i]->ag = ag;
        t[i]->rank = js->ranks[first + i].rank;
        t[i]->local_rank = js->ranks[first + i].local_rank;
    }
    for (uint32_t i = 0; i < n; i++) {
        uv_timer_init(ag->loop, &t[i]->drain);
        uv_timer_init(ag->loop, &t[i]->grace);
        t[i]->drain.data = t[i]->grace.data = t[i];
    }
    ag->nranks += n;
    ag->live += n;
    return 0;
}

void agent_ranks_start(struct agent *ag, uint32_t first)
{
    struct hvd_jobspec *js = &ag->job;
    uint32_t n = js->nranks - first, base = ag->nranks;

    ag->pipes = (struct hr_rankpipe_cfg){
        .line = on_line,
        .flush = on_read_done,
        .ended = on_ended,
        .buf = ag->readbuf,
        .buflen = sizeof(ag->readbuf),
        .line_max = HR_RANKPIPE_LINE_MAX,
    };
    if (add_entries(ag, first) != 0) {
        /* horovodrun hears of every rank it asked for, even so. */
        agent_note(ag, HVD_NOTE_ERROR, "out of memory for %u ranks", n);
        for (uint32_t i = first; i < js->nranks; i++)
            exit_frame(ag, js->ranks[i].rank, HVD_EXIT_SPAWN, ENOMEM);
        if (ag->live == 0)
            agent_finish(ag);
        return;
    }
    /* Once stopping, the agent starts nothing: a rank started now would
     * only be stopped, or outlive the channel. */
    int refuse = ag->stopping || ag->finished;
    /* What the host runs now, the earlier ranks included; fixed before
     * failed starts lower ag->live, so that the ranks share alike. */
    uint32_t host_ranks = ag->live;
    if (!refuse && js->gpu_pinning && ag->gpus > 0 &&
        host_ranks > (uint32_t)ag->gpus)
        agent_note(ag, HVD_NOTE_WARN,
                   "%u ranks share %d GPU%s on this host (each rank gets GPU "
                   "local_rank modulo %d)",
                   host_ranks, ag->gpus, ag->gpus == 1 ? "" : "s", ag->gpus);
    if (!refuse)
        agent_carry_start(ag);
    int cwd_err = refuse || chdir(js->cwd) == 0 ? 0 : errno;
    struct hr_cpu *cpus = NULL;
    int ncpus = 0;
    if (!refuse && js->bind == HR_BIND_AUTO &&
        hr_bind_cpus(&cpus, &ncpus) == 0 && ncpus < (int)host_ranks)
        agent_note(ag, HVD_NOTE_INFO,
                   "%u ranks on %d CPUs: the ranks are not bound to CPUs",
                   host_ranks, ncpus);
    for (uint32_t i = 0; i < n; i++) {
        struct agent_rank *r = ag->ranks[base + i];
        const struct hvd_jobrank *jr = &js->ranks[first + i];
        cpu_set_t set;
        int bound = cpus && hr_bind_share(cpus, ncpus, (int)jr->local_rank,
                                          (int)host_ranks, &set);
        if (refuse)
            fail_spawn(r, HVD_EXIT_SPAWN, ECANCELED);
        else if (cwd_err)
            fail_spawn(r, HVD_EXIT_NOCWD, cwd_err);
        else
            start_rank(ag, r, jr, bound ? &set : NULL);
    }
    free(cpus);
}

static struct agent_rank *find_rank(struct agent *ag, uint32_t rank)
{
    for (uint32_t i = 0; i < ag->nranks; i++)
        if (ag->ranks[i]->rank == rank)
            return ag->ranks[i];
    return NULL;
}

void agent_rank_kill(struct agent *ag, uint32_t rank, int now)
{
    struct agent_rank *r = find_rank(ag, rank);
    /* It may have ended while the message travelled. */
    if (r == NULL || r->reaped || r->pid <= 0)
        return;
    if (now) {
        uv_timer_stop(&r->grace);
        kill(-r->pid, SIGKILL);
        return;
    }
    /* A second KILL keeps the first one's deadline. */
    if (uv_is_active((uv_handle_t *)&r->grace))
        return;
    kill(-r->pid, SIGTERM);
    uv_timer_start(&r->grace, on_kill_group, ag->job.kill_grace_ms, 0);
}

void agent_ranks_signal(struct agent *ag, int sig)
{
    for (uint32_t i = 0; i < ag->nranks; i++)
        if (ag->ranks[i]->pid > 0 && !ag->ranks[i]->reaped)
            kill(-ag->ranks[i]->pid, sig);
}

static void on_grace(uv_timer_t *t)
{
    agent_ranks_signal(t->data, SIGKILL);
}

void agent_ranks_stop(struct agent *ag, int now)
{
    if (now) {
        ag->stopping = 1;
        uv_timer_stop(&ag->grace);
        agent_ranks_signal(ag, SIGKILL);
        return;
    }
    if (ag->stopping)
        return;
    ag->stopping = 1;
    agent_ranks_signal(ag, SIGTERM);
    uv_timer_start(&ag->grace, on_grace, ag->job.kill_grace_ms, 0);
}

/* A dead rank's pipes hold its last output and then EOF, unless
 * something it started still has them open: read them now, so that ranks
 * are reported in the order they died. Only the ranks are reaped here:
 * the srun processes of the agents this one starts are libuv's. */
void agent_ranks_reap(struct agent *ag)
{
    int status;

    for (uint32_t i = 0; i < ag->nranks; i++) {
        struct agent_rank *r = ag->ranks[i];
        if (r->reaped || r->pid <= 0 ||
            waitpid(r->pid, &status, WNOHANG) != r->pid)
            continue;
        r->reaped = 1;
        if (WIFSIGNALED(status)) {
            r->kind = HVD_EXIT_SIGNAL;
            r->code = WTERMSIG(status);
        } else {
            r->kind = HVD_EXIT_CODE;
            r->code = WEXITSTATUS(status);
        }
        hr_rankpipe_drain(&r->out, AGENT_DRAIN_MAX);
        hr_rankpipe_drain(&r->err, AGENT_DRAIN_MAX);
        maybe_done(r);
    }
    agent_flush(ag);
}

struct stdin_req {
    uv_write_t req;
    struct agent *ag;
    char data[];
};

/* horovodrun sends the next block of stdin only on this. */
static void stdin_taken(struct agent *ag)
{
    struct hvd_wbuf w;
    uint8_t *f;
    size_t len;
    hvd_wbuf_init(&w);
    if (hvd_wbuf_finish(&w, HVD_MSG_STDIN_TAKEN, &f, &len) == 0)
        agent_send(ag, f, len);
}

static void on_stdin_written(uv_write_t *req, int status)
{
    struct stdin_req *sr = (struct stdin_req *)req;
    (void)status; /* rank 0 may have closed its stdin: drop the data */
    stdin_taken(sr->ag);
    free(sr);
}

static void on_stdin_shut(uv_shutdown_t *req, int status)
{
    (void)status;
    uv_close((uv_handle_t *)req->handle, NULL);
    free(req);
}

void agent_ranks_stdin(struct agent *ag, const uint8_t *p, size_t len)
{
    struct agent_rank *r = find_rank(ag, 0);
    if (r == NULL || !r->in_open) {
        if (len > 0)
            stdin_taken(ag);
        return;
    }
    if (len == 0) {
        /* Close only after the queued writes: rank 0 may read late. */
        uv_shutdown_t *req = malloc(sizeof(*req));
        r->in_open = 0;
        if (req == NULL ||
            uv_shutdown(req, (uv_stream_t *)&r->in, on_stdin_shut) != 0) {
            free(req);
            uv_close((uv_handle_t *)&r->in, NULL);
        }
        return;
    }
    struct stdin_req *sr = malloc(sizeof(*sr) + len);
    if (sr == NULL) {
        stdin_taken(ag);
        return;
    }
    sr->ag = ag;
    memcpy(sr->data, p, len);
    uv_buf_t b = uv_buf_init(sr->data, (unsigned)len);
    if (uv_write(&sr->req, (uv_stream_t *)&r->in, &b, 1, on_stdin_written)) {
        free(sr);
        stdin_taken(ag);
    }
}

void agent_ranks_pause(struct agent *ag, int pause)
{
    ag->paused = pause;
    for (uint32_t i = 0; i < ag->nranks; i++) {
        struct hr_rankpipe *ps[] = {&ag->ranks[i]->out, &ag->ranks[i]->err};
        for (int k = 0; k < 2; k++) {
            if (pause)
                hr_rankpipe_stop(ps[k]);
            else
                hr_rankpipe_start(ps[k]);
        }
    }
}

void agent_ranks_free(struct agent *ag)
{
    for (uint32_t i = 0; i < ag->nranks; i++) {
        hr_rankpipe_close(&ag->ranks[i]->out);
        hr_rankpipe_close(&ag->ranks[i]->err);
        free(ag->ranks[i]);
    }
    free(ag->ranks);
    ag->ranks = NULL;
    ag->nranks = 0;
}
