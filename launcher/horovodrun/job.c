/* horovodrun's job controller: signals, fail-fast, stdin, the summary. */
#include "launcher/horovodrun/job.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/horovodrun/detach.h"
#include "launcher/horovodrun/serve.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/loop.h"
#include "launcher/lib/proto.h"

static int is_the_cause(const struct hr_job *job)
{
    return hr_summary_is_cause(job->ranks, job->failed_rank, job->failed_at,
                               job->interrupt_sig, uv_now(job->loop),
                               job->opts->kill_grace);
}

void hr_job_fail(struct hr_job *job, const char *fmt, ...)
{
    if (!job->launch_failure && (job->failed_rank < 0 || is_the_cause(job))) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(job->failure, sizeof(job->failure), fmt, ap);
        va_end(ap);
        job->launch_failure = 1;
    }
    hr_job_stop(job, 0);
}

static void on_stop_timeout(uv_timer_t *t)
{
    struct hr_job *job = t->data;
    /* The ranks may have ended long ago, their reports waiting behind
     * lines for a slow terminal: wait as long as the terminal moves. */
    if (hr_output_pending(&job->out) > 0 && job->out.written != job->out_mark) {
        job->out_mark = job->out.written;
        uv_timer_again(&job->stop_timer);
        return;
    }
    if (!job->killing) {
        if (job->ops->stop_late)
            hvd_log_warn("%s", job->ops->stop_late);
        hr_job_stop(job, 1);
        return;
    }
    /* Nothing answered the kill either: give up. Closing the agents'
     * pipes (or leaving mpirun) makes them end their ranks. */
    if (hr_output_pending(&job->out) > 0)
        hr_job_fail(job, "the terminal took no output for %d s; gave up",
                    (int)(job->stop_wait / 1000));
    else
        hr_job_fail(job, "%s; gave up", job->ops->no_answer);
    uv_timer_stop(&job->stop_timer);
    uv_stop(job->loop);
}

/* Waits ms for the current step of a stop, then takes the next one. */
static void arm_stop_timer(struct hr_job *job, uint64_t ms)
{
    job->stop_wait = ms;
    job->out_mark = job->out.written;
    uv_timer_start(&job->stop_timer, on_stop_timeout, ms, ms);
}

void hr_job_stop(struct hr_job *job, int now)
{
    if (now ? job->killing : job->stopping)
        return;
    job->stopping = 1;
    job->killing |= now;
    arm_stop_timer(job, job->ops->stop(job, now));
}

void hr_job_rank_done(struct hr_job *job, uint32_t rank, uint8_t kind,
                      int32_t code)
{
    if (rank >= (uint32_t)job->nranks || job->ranks[rank].done)
        return;
    struct hr_rank_state *rs = &job->ranks[rank];
    rs->done = 1;
    rs->kind = kind;
    rs->code = code;
    job->ranks_done++;
    if (job->rank_ended) {
        job->rank_ended(job, rank);
        return;
    }
    if (kind == HVD_EXIT_CODE && code == 0)
        return;
    /* A launch that stops the ranks itself (mpirun) does so with SIGTERM
     * and SIGKILL after a failure or a signal of ours: those deaths are
     * not failures. */
    int stopped = job->ops->stops_ranks && kind == HVD_EXIT_SIGNAL &&
                  (code == SIGTERM || code == SIGKILL) &&
                  (job->failed_rank >= 0 || job->interrupt_sig);
    /* A rank killed by a signal soon after a rank exited with an error
     * code is named instead: the exit is usually its echo. */
    int cause = kind == HVD_EXIT_SIGNAL && code != SIGTERM && is_the_cause(job);
    if (!stopped && (job->failed_rank < 0 || cause) && !job->launch_failure) {
        job->failed_rank = (int)rank;
        job->failed_at = uv_now(job->loop);
        hr_job_stop(job, 0);
    }
}

void hr_job_ended(struct hr_job *job)
{
    if (!job->ended) {
        job->ended = 1;
        hr_output_end(&job->out);
    }
    /* The last lines may still be on their way to the terminal. */
    if (hr_output_pending(&job->out) == 0)
        uv_stop(job->loop);
}

void hr_job_read_stdin(struct hr_job *job)
{
    if (!job->stopping)
        hr_stdin_read(&job->in);
}

/* A block of stdin for rank 0; the end of input as n 0. The next read
 * starts once the launch has taken it. */
static void on_stdin(struct hr_stdin *in, const char *buf, size_t n)
{
    struct hr_job *job = in->data;
    if (!job->stopping)
        job->ops->write_stdin(job, buf, n);
}

/* The terminal fell behind (pause) or caught up: stop or resume reading
 * the ranks' output. */
static void on_output_pause(void *arg, int pause)
{
    struct hr_job *job = arg;
    job->out_paused = pause;
    job->ops->pause(job, pause);
}

/* Everything the ranks printed was written: the job may end. */
static void on_output_idle(void *arg)
{
    struct hr_job *job = arg;
    if (job->ended)
        uv_stop(job->loop);
}

/* A signal, or a stop request through a detached job's socket (how says
 * which): forwarded to the ranks, which get the grace to exit; a second
 * one kills them. */
static void interrupt(struct hr_job *job, int sig, const char *how)
{
    if (++job->signals_seen > 1) {
        hvd_log_warn("%s again: killing %s now", how, job->ops->kill_all);
        hr_job_stop(job, 1);
        return;
    }
    job->interrupt_sig = sig;
    hvd_log_warn("%s; forwarding it to %s (again to kill them at once)", how,
                 job->ops->forward_to);
    uint64_t ms = job->ops->signal(job, sig);
    if (ms > 0 && !job->stopping) {
        job->stopping = 1;
        arm_stop_timer(job, ms);
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
    if (now && !job->killing) {
        hvd_log_warn("stop --now requested: killing %s now",
                     job->ops->kill_all);
        job->signals_seen = 2;
        if (job->interrupt_sig == 0)
            job->interrupt_sig = SIGTERM;
        hr_job_stop(job, 1);
        return;
    }
    interrupt(job, SIGTERM, "stop requested (SIGTERM)");
}

int hr_job_open(struct hr_job *job)
{
    const struct hvd_plan *plan = job->plan;
    char err[512];
    int rc;

    if ((rc = hr_output_init(&job->out, job->loop, plan, job->opts, err,
                             sizeof(err))) != 0) {
        hvd_log_error("%s", rc == HVD_ENOMEM ? "out of memory" : err);
        return rc == HVD_ENOMEM ? HR_EXIT_INTERNAL : HR_EXIT_USAGE;
    }
    job->out.on_pause = on_output_pause;
    job->out.on_idle = on_output_idle;
    job->out.arg = job;
    /* Before anything the launch starts holds horovodrun's stderr. */
    if (job->detach && (rc = hr_detach_serve(
                            job->detach, job->opts, job->loop,
                            job->assignment ? job->assignment : plan, &job->out,
                            on_stop_request, job, &job->serve)) != 0)
        return rc;
    job->ranks =
        calloc(plan->size > 0 ? (size_t)plan->size : 1, sizeof(*job->ranks));
    job->nranks = plan->size;
    if (job->ranks == NULL) {
        hvd_log_error("out of memory for %d ranks", plan->size);
        return HR_EXIT_INTERNAL;
    }
    uv_timer_init(job->loop, &job->stop_timer);
    job->stop_timer.data = job;
    uv_signal_t *const sigs[] = {&job->sigint, &job->sigterm, &job->sighup};
    static const int signums[] = {SIGINT, SIGTERM, SIGHUP};
    hr_loop_signals(job->loop, sigs, signums, 3, job, on_signal, 0);
    return 0;
}

int hr_job_grow(struct hr_job *job)
{
    int n = job->plan->size;
    char err[512];
    if (n > job->nranks) {
        struct hr_rank_state *rs = realloc(job->ranks, (size_t)n * sizeof(*rs));
        if (rs == NULL) {
            hvd_log_error("out of memory for %d processes", n);
            return HVD_ENOMEM;
        }
        memset(rs + job->nranks, 0, (size_t)(n - job->nranks) * sizeof(*rs));
        job->ranks = rs;
        job->nranks = n;
    }
    int rc = hr_output_grow(&job->out, err, sizeof(err));
    if (rc != 0)
        hvd_log_error("%s", rc == HVD_ENOMEM ? "out of memory" : err);
    return rc;
}

static int summarize(struct hr_job *job)
{
    int rc = job->ops->failure(job);
    if (rc >= 0)
        return rc;
    if (job->launch_failure) {
        hvd_log_error("%s", job->failure);
        return HR_EXIT_INTERNAL;
    }
    char why[64] = "";
    if (job->interrupt_sig)
        snprintf(why, sizeof(why),
                 "interrupted by %s: ", hr_summary_signame(job->interrupt_sig));
    if (job->failed_rank < 0) {
        if (job->interrupt_sig) {
            hvd_log_error("%s%s", why, job->ops->all_stopped);
            return 128 + job->interrupt_sig;
        }
        return HR_EXIT_OK;
    }
    int r = job->failed_rank;
    const struct hr_rank_state *rs = &job->ranks[r];
    const char *host = job->hosts->hosts[job->plan->ranks[r].host].name;
    int local_rank = job->plan->ranks[r].local_rank;
    if (job->ops->place)
        job->ops->place(job, r, &host, &local_rank);
    return hr_summary_rank(why, r, host, local_rank, rs->kind, rs->code,
                           job->opts->cmd[0]);
}

int hr_job_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
               const struct hvd_plan *plan, const struct hr_launch_ops *ops,
               struct hr_detach *d)
{
    struct hr_job job = {0};
    int rc;

    job.loop = uv_default_loop();
    hr_stdin_init(&job.in, job.loop, on_stdin, &job);
    job.opts = o;
    job.hosts = hosts;
    job.plan = plan;
    job.ops = ops;
    job.failed_rank = -1;
    job.detach = d;
    signal(SIGPIPE, SIG_IGN);

    job.launch = calloc(1, ops->size);
    if (job.launch == NULL) {
        hvd_log_error("out of memory");
        return HR_EXIT_INTERNAL;
    }
    rc = ops->start(&job);
    if (rc == 0 && !job.ended) {
        hr_output_take_log(&job.out, 1);
        uv_run(job.loop, UV_RUN_DEFAULT);
        hr_output_take_log(&job.out, 0);
    }
    if (rc == 0)
        rc = summarize(&job);
    ops->close(&job);
    if (job.serve)
        hr_serve_end(job.serve, rc);

    /* A stdin read may still block in the thread pool; everything else
     * is closed so that sanitizers see no leaks. */
    hr_loop_close_all(job.loop, UV_RUN_NOWAIT);
    ops->free(&job);
    free(job.launch);
    hr_output_close(&job.out);
    free(job.ranks);
    return hr_loop_finish(job.loop, job.in.busy || hr_output_busy(&job.out),
                          rc);
}
