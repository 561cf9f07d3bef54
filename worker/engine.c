/* Who runs the engine when: the background thread, or a caller waiting
 * for its own collective; submitting work, waiting for it, and sleeping
 * until there is some (docs/engine.md). */
#include "worker/engine.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/ctx.h"
#include "worker/cycle.h"
#include "worker/failure.h"
#include "worker/join.h"
#include "worker/pending.h"
#include "worker/setting.h"
#include "worker/stall.h"
#include "worker/transport/transport.h"
#include "worker/wait.h"

/* A caller that ran the engine lately is likely to do so again at once:
 * for this long, another rank's cycle is left to it. */
#define INLINE_WINDOW_US 1000
#define INLINE_GRACE_US 30

/* Another rank's cycle found this one idle: the thread waits this long
 * for its caller to ask before it joins (idle_join_us). */
#define IDLE_JOIN_US 2000
#define IDLE_JOIN_LONG_US 100000

void hvd__engine_finish(struct hvd_ctx *c, struct hvd_request *op)
{
    pthread_mutex_lock(&c->eng.mu);
    atomic_store(&op->done, 1);
    pthread_cond_broadcast(&c->eng.cv);
    pthread_mutex_unlock(&c->eng.mu);
}

static void kick(struct hvd_ctx *c)
{
    uint64_t one = 1;
    while (write(c->eng.wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

static void drain_kicks(struct hvd_ctx *c)
{
    uint64_t v;
    while (read(c->eng.wake_fd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

/* Carries out a timeline request (hvd__engine_timeline): the timeline is
 * the holder's, so it alone opens and closes it. */
static void set_timeline(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_timeline tl;
    if (op->tl_path == NULL) {
        hvd__timeline_close(&c->tl);
        return;
    }
    if (hvd__timeline_open(&tl, op->tl_path, op->tl_mark_cycles) != 0) {
        op->rc = HVD_ESYS;
        snprintf(op->err, sizeof(op->err), "cannot open '%.300s': %s",
                 op->tl_path, strerror(errno));
        return;
    }
    hvd__timeline_close(&c->tl);
    c->tl = tl;
}

/* Takes everything submitted into the pending table; a shutdown request
 * goes to eng.stop, for the background thread. */
static void take_submitted(struct hvd_ctx *c)
{
    pthread_mutex_lock(&c->eng.mu);
    struct hvd_request *op = c->eng.head;
    c->eng.head = c->eng.tail = NULL;
    atomic_store(&c->eng.pending, 0);
    pthread_mutex_unlock(&c->eng.mu);
    while (op) {
        /* Admitting the last part may complete the op and let its caller
         * free it: read everything needed first. */
        struct hvd_request *next = op->next;
        int nparts = op->nparts;
        if (op->shutdown)
            c->eng.stop = op;
        if (op->timeline) {
            set_timeline(c, op);
            hvd__engine_finish(c, op);
        }
        for (int i = 0; i < nparts; i++)
            hvd__pending_admit(c, &op->parts[i]);
        op = next;
    }
}

/* When the heartbeat below is due: a peer timeout after the last cycle. */
static int64_t heartbeat_at(const struct hvd_ctx *c)
{
    return c->eng.last_cycle_us + (int64_t)c->peer_timeout_s * 1000000;
}

/*
 * Names this rank announced still wait for other ranks, and no cycle ran
 * for the peer timeout: start one anyway. If a rank is stopped or hung
 * (rank 0 included, whose stall inspector would otherwise end the wait),
 * it fails on the data-plane timeout; a rank that is merely busy joins it
 * at once from its idle background thread, at the cost of one empty cycle.
 */
static int heartbeat_due(const struct hvd_ctx *c, int64_t now)
{
    return !c->failed && c->size > 1 && c->neg.used > 0 &&
           now >= heartbeat_at(c);
}

/* When this rank's next cycle may start: cycle_ms after its last (a job
 * of one has nobody to batch with). */
static int64_t due_at(const struct hvd_ctx *c)
{
    return c->size == 1
               ? 0
               : c->eng.last_cycle_us + (int64_t)(c->eng.cycle_ms * 1000);
}

/* Whether a cycle must run now: this rank has new requests and waited
 * long enough to batch them, rank 0 gives up on stalled names, another
 * rank started one, or the heartbeat is due. */
static int cycle_due(struct hvd_ctx *c, int64_t now)
{
    return (c->eng.nfresh > 0 && now >= due_at(c)) || c->nstall > 0 ||
           hvd__coll_peer_started(c) || heartbeat_due(c, now);
}

/* Says goodbye to the rendezvous and finishes the shutdown request. */
static void stop_engine(struct hvd_ctx *c)
{
    hvd__pending_fail_all(c, HVD_ESHUTDOWN, "hvd_shutdown() was called");
    hvd__join_leave(c);
    hvd__engine_finish(c, c->eng.stop);
}

/* Marks this thread as asleep (on) or awake, for the callers that submit
 * and, through shared memory, for the other local ranks. */
static void set_asleep(struct hvd_ctx *c, int on)
{
    atomic_store(&c->eng.sleeping, on);
    hvd__shm_set_sleeping(&c->shm, on);
}

/* Whether a caller ran the engine lately. */
static int callers_run(struct hvd_ctx *c)
{
    return hvd__now_us() < atomic_load(&c->eng.inline_until_us);
}

/* Woken by another rank's cycle while callers run the engine: lets a
 * caller about to submit take that cycle on its own thread, instead of
 * this thread taking it and the caller waiting for this thread. Only the
 * failure channel cuts the pause short. */
static void defer_to_caller(struct hvd_ctx *c)
{
    if (!callers_run(c) || atomic_load(&c->eng.nwaiting) > 0)
        return;
    struct pollfd q = {.fd = c->rdv_fd, .events = POLLIN};
    struct timespec grace = {0, INLINE_GRACE_US * 1000};
    ppoll(&q, 1, &grace, NULL);
}

/* Takes the engine back after a sleep. Callers that would take it
 * meanwhile leave their collectives to this thread instead (engine_wait):
 * taking it first at every call, they woke the thread at every unlock
 * only for it to lose the engine again (measured: half a futex wake-up
 * per rank per collective at -np 64). */
static void retake(struct hvd_ctx *c)
{
    atomic_store(&c->eng.thread_waits, 1);
    pthread_mutex_lock(&c->eng.run_mu);
    atomic_store(&c->eng.thread_waits, 0);
}

/* Whether this rank has no work of its own in flight. Then no cycle can
 * finish anything without its next request (but a process set's without
 * it), and a cycle it joins empty-handed is one more for every rank. */
static int rank_idle(const struct hvd_ctx *c)
{
    return c->eng.npend == 0 && c->nstall == 0 && !c->failed && !c->eng.stop &&
           atomic_load(&c->eng.pending) == 0;
}

/* Whether a process set leaves this rank out: its collectives need this
 * rank's cycles though this rank asks nothing. */
static int left_out(const struct hvd_ctx *c)
{
    for (size_t i = 0; i < c->psets.n; i++)
        if (c->psets.v[i]->me < 0)
            return 1;
    return 0;
}

/*
 * How long an idle rank's thread waits for its caller. A cycle it joins
 * empty-handed finishes none of the others' collectives in a set that
 * holds this rank (each waits for this rank's request too) and costs
 * every rank one more cycle; it only keeps their wait within the peer
 * timeout. So the wait is long (measured: at -np 64 on two cores a woken
 * caller often took over 2 ms to run, its thread joined without it, and
 * every allreduce took two cycles), unless a process set leaves this
 * rank out.
 */
static int64_t idle_join_us(const struct hvd_ctx *c)
{
    if (left_out(c))
        return IDLE_JOIN_US;
    int64_t cap = (int64_t)c->peer_timeout_s * 250000; /* a quarter */
    return cap > 0 && cap < IDLE_JOIN_LONG_US ? cap : IDLE_JOIN_LONG_US;
}

/*
 * Another rank started a cycle while this one is idle: gives this rank's
 * caller up to idle_join_us to ask, so that the cycle carries its request
 * (measured: at -np 4 and more ranks than CPUs, every allreduce took two
 * cycles, the first started by the rank whose caller asked first and
 * joined empty-handed by every other). Sleeps without the engine, so a
 * caller may take it; a submit or the failure channel cuts the wait short.
 */
static void wait_for_caller(struct hvd_ctx *c)
{
    int64_t us = idle_join_us(c);
    struct pollfd q[2] = {{.fd = c->eng.wake_fd, .events = POLLIN},
                          {.fd = c->rdv_fd, .events = POLLIN}};
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    /* A kick whose work was taken already must not end the wait: read it
     * first, then look for work (a submit counts before it kicks). */
    drain_kicks(c);
    atomic_store(&c->eng.sleeping, 1);
    if (atomic_load(&c->eng.pending) == 0) {
        c->eng.parked = 1;
        pthread_mutex_unlock(&c->eng.run_mu);
        ppoll(q, 2, &ts, NULL);
        retake(c);
        c->eng.parked = 0;
    }
    atomic_store(&c->eng.sleeping, 0);
    if (q[0].revents)
        drain_kicks(c);
}

/* What the background thread's loop remembers from one turn to the next. */
struct loop {
    int quiet; /* the last sleep ended with nothing to do */
    /* The start of the last cycle this rank ran when the thread last
     * waited for its caller: it waits once for each cycle that the others
     * start (a cycle its caller runs meanwhile makes the next one new). */
    int64_t waited;
};

/* Whether work came while the thread spun a little before sleeping. */
static int spin_for_work(struct hvd_ctx *c, const struct loop *l, int64_t due)
{
    struct hvd_spin spin = {0};
    while (c->eng.spin_us > 0 && !l->quiet && !callers_run(c) &&
           atomic_load(&c->eng.pending) == 0 &&
           !(c->eng.nfresh > 0 && hvd__now_us() >= due) &&
           !hvd__coll_peer_started(c) &&
           hvd__spin_spent(&spin) < c->eng.spin_us)
        ;
    return atomic_load(&c->eng.pending) > 0 || hvd__coll_peer_started(c);
}

/*
 * While callers run the engine and this rank has nothing in flight, the
 * other ranks' cycles need not wake this thread (in shared memory or on a
 * ring socket): the callers take those, and the thread looks again when
 * the window closes (watch, microseconds from now). Work in flight is the
 * thread's to carry on: then they wake it at once. An idle rank's caller
 * brings it to the next cycle anyway, so in shared memory the others wake
 * it only if they wait long for it.
 */
static int peers_wake_mode(const struct hvd_ctx *c, int64_t watch)
{
    return !rank_idle(c) || left_out(c) ? HVD_SHM_WAKE_NOW
           : watch <= 0                 ? HVD_SHM_WAKE_LATE
                                        : HVD_SHM_AWAKE;
}

/* How long the thread may sleep, in microseconds (-1: until woken). */
static int64_t sleep_timeout(struct hvd_ctx *c, int64_t now, int64_t due,
                             int64_t watch)
{
    int64_t timeout = c->eng.peers_wake ? -1 : watch;
    if (c->eng.nfresh > 0 && (timeout < 0 || timeout > due - now))
        timeout = due > now ? due - now : 0;
    /* Rank 0 looks for stalls every second while names wait; every rank
     * wakes for its heartbeat. */
    if (c->rank == 0 && !c->stall_off && c->neg.used > 0 &&
        (timeout < 0 || timeout > 1000000))
        timeout = 1000000;
    if (c->neg.used > 0 && !c->failed) {
        int64_t beat = heartbeat_at(c) - now;
        if (beat < 0)
            beat = 0;
        if (timeout < 0 || timeout > beat)
            timeout = beat;
    }
    /* Another rank starting a collective shows on a ring socket or, in
     * shared memory, as a wake-up on our eventfd; under MPI nothing shows,
     * and the thread wakes now and then to look. */
    int64_t idle = hvd__coll_idle_us(c);
    if (idle >= 0 && (timeout < 0 || timeout > idle))
        timeout = idle;
    return timeout;
}

/*
 * Sleeps without the engine until new work, a peer's cycle, a failure,
 * or this rank's next cycle is due (a caller may run the engine
 * meanwhile), then takes the engine back and reads what woke it.
 */
static void park(struct hvd_ctx *c, struct loop *l, int64_t now, int64_t due)
{
    struct hvd_engine *e = &c->eng;
    int64_t watch = atomic_load(&e->inline_until_us) - now;
    e->peers_wake = peers_wake_mode(c, watch);
    atomic_store(&e->sleeping, 1);
    hvd__shm_set_sleeping(&c->shm, e->peers_wake);
    /* A submit or a peer's start that came before the flags were up may
     * have sent no wake-up. */
    if (atomic_load(&e->pending) > 0 || hvd__coll_peer_started(c)) {
        set_asleep(c, 0);
        return;
    }
    int64_t timeout = sleep_timeout(c, now, due, watch);
    int rings = e->peers_wake;
    struct timespec ts = {(time_t)(timeout / 1000000),
                          (long)(timeout % 1000000) * 1000};
    struct pollfd p[5] = {
        {.fd = e->wake_fd, .events = POLLIN},
        {.fd = c->rdv_fd, .events = POLLIN},
        {.fd = rings ? hvd__coll_watched_fd(c, 0) : -1, .events = POLLIN},
        {.fd = rings ? hvd__coll_watched_fd(c, 1) : -1, .events = POLLIN},
        {.fd = c->shm.n > 0 && e->peers_wake ? c->shm.efd[c->shm.me] : -1,
         .events = POLLIN}};
    e->parked = 1;
    l->waited = -1;
    pthread_mutex_unlock(&e->run_mu);
    int n = ppoll(p, 5, timeout < 0 ? NULL : &ts, NULL);
    if (n > 0 && !p[0].revents && !p[1].revents)
        defer_to_caller(c);
    retake(c);
    e->parked = 0;
    set_asleep(c, 0);
    hvd__shm_drain(&c->shm);
    l->quiet = n == 0 || (atomic_load(&e->pending) == 0 &&
                          !hvd__coll_peer_started(c) && !cycle_due(c, now));
    if (n <= 0)
        return;
    if (p[0].revents)
        drain_kicks(c);
    if (c->rdv_fd >= 0 && p[1].revents)
        hvd__read_rdv(c);
    if (c->failed)
        hvd__pending_fail_all(c, c->fail_rc, c->fail_msg);
}

/*
 * The background thread's loop. It runs with run_mu held, and lets go of
 * it only to sleep: a caller waiting for its collective may take the
 * engine meanwhile (run_inline).
 */
static void *thread_main(void *arg)
{
    struct hvd_ctx *c = arg;
    struct loop l = {.quiet = 0, .waited = -1};
    pthread_mutex_lock(&c->eng.run_mu);
    for (;;) {
        take_submitted(c);
        if (c->eng.stop) {
            stop_engine(c);
            pthread_mutex_unlock(&c->eng.run_mu);
            return NULL;
        }
        int64_t now = hvd__now_us(), due = due_at(c);
        hvd__stall_check(c);
        if (cycle_due(c, now)) {
            if (l.waited != c->eng.last_cycle_us && rank_idle(c)) {
                l.waited = c->eng.last_cycle_us;
                wait_for_caller(c);
                continue;
            }
            hvd__cycle_run(c);
            l.quiet = 0;
            continue;
        }
        /* Nothing to do yet: spin a little, then sleep. After a sleep that
         * ended with nothing to do (a timeout; under MPI, a look for
         * bells; a caller's collective run on its own thread) there is no
         * burst of activity to catch: sleep again at once. While callers
         * run the engine, sleep at once too, so that the next caller finds
         * the engine free. */
        if (spin_for_work(c, &l, due))
            continue;
        park(c, &l, now, due);
    }
}

/*
 * A caller waiting for op runs the engine on its own thread while the
 * background thread sleeps: no hand-over to that thread and no wake-up
 * back, which cost more than a small collective (measured: 8 B at -np 2
 * in shared memory went from 11-90 to 6-8 us). It runs the cycles that
 * are due, spinning briefly for the other ranks to start theirs, and
 * stops when op is done or nothing is left to run now. Then the engine
 * goes back to the sleeping thread as that thread left it (asleep for the
 * other local ranks too, or not while callers run it), or the thread is
 * woken when there is work for it or its sleep needs a new timeout.
 * Called with run_mu held.
 */
static void run_inline(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_engine *e = &c->eng;
    struct hvd_spin spin = {0};
    int parked = e->parked;
    /* The others need not wake the sleeping thread: this one is awake. */
    if (parked)
        hvd__shm_set_sleeping(&c->shm, 0);
    while (!atomic_load(&op->done) && !c->failed) {
        take_submitted(c);
        if (e->stop)
            break;
        hvd__stall_check(c);
        if (cycle_due(c, hvd__now_us())) {
            hvd__cycle_run(c);
            spin = (struct hvd_spin){0};
        } else if (e->nfresh > 0 || e->spin_us <= 0 ||
                   hvd__spin_spent(&spin) >= e->spin_us) {
            /* The next cycle is not due yet (HOROVOD_CYCLE_TIME), or the
             * other ranks are slow to ask: the sleeping thread waits. */
            break;
        }
    }
    atomic_store(&e->inline_until_us, hvd__now_us() + INLINE_WINDOW_US);
    if (!parked)
        return; /* the thread is awake and waits for run_mu */
    if (e->stop || e->nfresh > 0 || c->neg.used > 0 || c->nstall > 0 ||
        c->failed) {
        kick(c);
        return;
    }
    hvd__shm_set_sleeping(&c->shm, e->peers_wake);
    if (atomic_load(&e->pending) > 0 ||
        (e->peers_wake && hvd__coll_peer_started(c)))
        kick(c);
}

int hvd__engine_start(struct hvd_ctx *c)
{
    struct hvd_engine *e = &c->eng;
    e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->wake_fd < 0)
        return HVD_ESYS;
    int rc = hvd__cycle_init(c);
    if (rc)
        return rc;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->run_mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* Spinning pays only while every spinning thread has a CPU: one
     * thread per rank spins (the background thread, or a caller running
     * the engine while that thread sleeps), other callers sleep (measured
     * on two cores: callers that spin too slow everything down). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv(HVD_ENV_SPIN_US);
    int spin = v ? atoi(v) : 20;
    e->spin_us = c->local_size <= cpus && spin > 0 ? spin : 0;
    /* Callers may run the engine on their own threads (run_inline), but
     * not under MPI, which is initialised for the background thread alone.
     * Measured on two cores, 8 B, inline against handed over to the
     * thread: -np 12 64-67 against 116-124 us, -np 32 213 against 318 us,
     * -np 64 531-551 against 846-886 us, -np 256 4.1 against 5.9 ms. */
    e->inline_ok = strcmp(c->tp->name, "mpi") != 0;
    /* Inside a shared-memory collective the others are due any moment,
     * and a sleep and wake-up costs tens of microseconds a time: after
     * the spin, yield the CPU until 10 times as long has passed (50 us
     * with more ranks than CPUs) before sleeping. Measured: 64 MiB at
     * -np 2 went from 2-3 to 5 GB/s. */
    c->shm.spin_us = e->spin_us;
    c->shm.yield_us = spin <= 0 ? 0 : e->spin_us > 0 ? 10 * e->spin_us : 50;
    /* Every transport fails its collectives through the same hooks. */
    c->ring.spin_us = c->xring.spin_us = e->spin_us;
    c->abort = (struct hvd_abort){
        .fd = c->rdv_fd, .check = hvd__check_abort, .ctx = c};
    c->ring.ab = c->xring.ab = c->shm.ab = &c->abort;
    /* A collective stuck on a stopped or hung rank fails after the peer
     * timeout, like one whose peer's host vanished. */
    c->ring.progress_ms = c->xring.progress_ms = c->shm.progress_ms =
        c->peer_timeout_s * 1000;
    /* The local ranks waiting for a leader's ring between hosts wait as
     * long as it moves data. */
    c->xring.busy_ms = hvd__shm_busy_ms(&c->shm);
    if (pthread_create(&e->thread, NULL, thread_main, c) != 0)
        return HVD_ESYS;
    /* So that top -H, perf and gdb tell it from the rank's own threads. */
    pthread_setname_np(e->thread, "hvd-engine");
    e->started = 1;
    return 0;
}

/* Whether op's waiter may run the engine itself: host buffers only, and
 * not the requests that the background thread alone carries out. */
static int may_run_inline(const struct hvd_ctx *c, const struct hvd_request *op)
{
    if (!c->eng.inline_ok || op->shutdown || op->timeline)
        return 0;
    for (int i = 0; i < op->nparts; i++)
        if (op->parts[i].device)
            return 0;
    return 1;
}

void hvd__engine_submit(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_engine *e = &c->eng;
    atomic_store(&op->done, 0);
    op->next = NULL;
    op->left = op->nparts;
    pthread_mutex_lock(&e->mu);
    if (e->tail)
        e->tail->next = op;
    else
        e->head = op;
    e->tail = op;
    atomic_fetch_add(&e->pending, 1);
    pthread_mutex_unlock(&e->mu);
    /* A synchronous call's caller takes the sleeping engine itself. */
    if (atomic_load(&e->sleeping) && !(op->sync && may_run_inline(c, op)))
        kick(c);
}

int hvd__engine_wait(struct hvd_ctx *c, struct hvd_request *op)
{
    struct hvd_engine *e = &c->eng;
    /* A thread that wants the engine back takes this collective (the
     * submit counted it before this look, so the thread sees it). */
    if (!atomic_load(&op->done) && may_run_inline(c, op) &&
        !atomic_load(&e->thread_waits)) {
        if (pthread_mutex_trylock(&e->run_mu) == 0) {
            run_inline(c, op);
            pthread_mutex_unlock(&e->run_mu);
        } else if (op->sync) {
            /* Its submit left it to this caller, but the engine was not
             * free: the thread may have been on its way to sleep. */
            kick(c);
        }
    }
    pthread_mutex_lock(&e->mu);
    atomic_fetch_add(&e->nwaiting, 1);
    while (!atomic_load(&op->done))
        pthread_cond_wait(&e->cv, &e->mu);
    atomic_fetch_sub(&e->nwaiting, 1);
    pthread_mutex_unlock(&e->mu);
    return op->rc;
}

int hvd__engine_timeline(struct hvd_ctx *c, const char *path, int mark_cycles,
                         char *err, size_t errlen)
{
    struct hvd_request req = {
        .timeline = 1, .tl_path = path, .tl_mark_cycles = mark_cycles};
    hvd__engine_submit(c, &req);
    int rc = hvd__engine_wait(c, &req);
    if (rc)
        snprintf(err, errlen, "%s", req.err);
    return rc;
}

void hvd__engine_stop(struct hvd_ctx *c)
{
    struct hvd_engine *e = &c->eng;
    if (e->started) {
        struct hvd_request stop = {.shutdown = 1};
        hvd__engine_submit(c, &stop);
        hvd__engine_wait(c, &stop);
        pthread_join(e->thread, NULL);
        e->started = 0;
        pthread_mutex_destroy(&e->mu);
        pthread_mutex_destroy(&e->run_mu);
        pthread_cond_destroy(&e->cv);
    }
    if (e->wake_fd > 0)
        close(e->wake_fd);
    e->wake_fd = -1;
    hvd__cycle_close(c);
}
