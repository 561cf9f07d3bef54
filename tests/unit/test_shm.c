/* Unit tests for the shared-memory sync's deadline, wake-ups and split
 * form (arrive, release) (transport/shm.c). This process and a forked
 * child are the two ranks of one host. */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker/transport/shm.h"
#include "worker/sock.h"

#define PROGRESS_MS 1000

static const uint8_t secret[32] = {7, 1, 9};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Sets up a segment shared with a child that runs child_fn before its own
 * sync; returns the child's pid. */
static pid_t pair(struct hvd_shm *s, void (*child_fn)(struct hvd_shm *))
{
    char host[64], err[256] = "";
    int ranks[2] = {0, 1};
    snprintf(host, sizeof(host), "shm-test-%d", (int)getpid());
    pid_t pid = fork();
    cr_assert(pid >= 0);
    int rc = hvd__shm_setup(s, secret, sizeof(secret), ranks, 2, pid == 0, host,
                            hvd__now_ms() + 10000, err, sizeof(err));
    s->progress_ms = PROGRESS_MS;
    if (pid == 0) {
        if (rc == 0) {
            child_fn(s);
            (void)hvd__shm_sync(s, err, sizeof(err));
            hvd__shm_close(s);
        }
        _exit(rc == 0 ? 0 : 10);
    }
    cr_assert_eq(rc, 0, "%s", err);
    return pid;
}

static void reap(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}

/* A leader in a long ring between hosts: data moves every 100 ms. */
static void busy_for_2500_ms(struct hvd_shm *s)
{
    _Atomic int64_t *busy = hvd__shm_busy_ms(s);
    int64_t end = hvd__now_ms() + 2500;
    while (hvd__now_ms() < end) {
        atomic_store(busy, hvd__now_ms());
        sleep_ms(100);
    }
}

/* A leader whose ring moved data once, then nothing (a stopped peer). */
static void busy_once_then_still(struct hvd_shm *s)
{
    atomic_store(hvd__shm_busy_ms(s), hvd__now_ms());
    sleep_ms(3000);
}

Test(shm, a_wait_lasts_while_the_awaited_rank_moves_data_elsewhere)
{
    struct hvd_shm s;
    char err[256] = "";
    pid_t pid = pair(&s, busy_for_2500_ms);
    int64_t t0 = hvd__now_ms();
    int rc = hvd__shm_sync(&s, err, sizeof(err));
    int64_t took = hvd__now_ms() - t0;
    cr_expect_eq(rc, 0, "after %lld ms: %s", (long long)took, err);
    cr_expect_geq(took, 2000, "the wait outlived the progress timeout");
    reap(pid);
    hvd__shm_close(&s);
}

Test(shm, a_wait_fails_when_the_awaited_rank_moves_nothing)
{
    struct hvd_shm s;
    char err[256] = "";
    pid_t pid = pair(&s, busy_once_then_still);
    int64_t t0 = hvd__now_ms();
    int rc = hvd__shm_sync(&s, err, sizeof(err));
    int64_t took = hvd__now_ms() - t0;
    cr_expect_eq(rc, HVD_ETIMEDOUT, "after %lld ms: %s", (long long)took, err);
    cr_expect(strstr(err, "rank 1 (host shm-test-") != NULL, "%s", err);
    cr_expect(strstr(err, "did not arrive in time") != NULL, "%s", err);
    cr_expect_geq(took, PROGRESS_MS - 100);
    cr_expect_lt(took, 2800, "failed about %d ms after the last data moved",
                 PROGRESS_MS);
    reap(pid);
    hvd__shm_close(&s);
}

/* The child's report: how long it slept before the parent's sync woke
 * it, in the mode the parent chose before the fork. */
static int g_report[2];
static int g_mode;

static void sleep_until_woken(struct hvd_shm *s)
{
    hvd__shm_set_sleeping(s, g_mode);
    while (!hvd__shm_peer_ahead(s))
        sleep_ms(0);
    int64_t t0 = hvd__now_ms();
    struct pollfd p = {.fd = s->efd[s->me], .events = POLLIN};
    (void)poll(&p, 1, 3000);
    int64_t took = hvd__now_ms() - t0;
    hvd__shm_set_sleeping(s, HVD_SHM_AWAKE);
    hvd__shm_drain(s);
    (void)!write(g_report[1], &took, sizeof(took));
}

/* How long the child, asleep in mode, slept once this rank synced. */
static int64_t slept(int mode)
{
    struct hvd_shm s;
    char err[256] = "";
    int64_t took = -1;
    g_mode = mode;
    cr_assert_eq(pipe(g_report), 0);
    pid_t pid = pair(&s, sleep_until_woken);
    cr_expect_eq(hvd__shm_sync(&s, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(read(g_report[0], &took, sizeof(took)), sizeof(took));
    reap(pid);
    hvd__shm_close(&s);
    close(g_report[0]);
    close(g_report[1]);
    return took;
}

Test(shm, a_rank_with_work_in_flight_is_woken_at_once)
{
    int64_t took = slept(HVD_SHM_WAKE_NOW);
    cr_expect(took >= 0 && took < 1000, "woken after %lld ms", (long long)took);
}

Test(shm, an_idle_rank_is_woken_only_once_the_wait_gets_long)
{
    int64_t took = slept(HVD_SHM_WAKE_LATE);
    cr_expect_geq(took, HVD_SHM_LATE_WAKE_MS - 1,
                  "the first rank's arrival woke the idle one");
    cr_expect_lt(took, 2000, "the waiting rank never woke the idle one");
}

/* The child's half of a split sync: it arrives late, then waits for the
 * parent's release, and reports how long that took and what the parent
 * left in the result slot. */
static void arrive_late_then_wait(struct hvd_shm *s)
{
    char err[256] = "";
    int64_t got[2] = {-1, -1};
    sleep_ms(300);
    if (hvd__shm_arrive(s, err, sizeof(err)) == 0) {
        int64_t t0 = hvd__now_ms();
        if (hvd__shm_release(s, err, sizeof(err)) == 0) {
            got[0] = hvd__now_ms() - t0;
            memcpy(&got[1], hvd__shm_slot(s, s->n), sizeof(got[1]));
        }
    }
    (void)!write(g_report[1], got, sizeof(got));
}

Test(shm, rank_0_waits_for_all_to_arrive_and_the_others_for_its_release)
{
    struct hvd_shm s;
    char err[256] = "";
    int64_t got[2] = {0, 0}, mark = 4242;
    cr_assert_eq(pipe(g_report), 0);
    pid_t pid = pair(&s, arrive_late_then_wait);
    int64_t t0 = hvd__now_ms();
    cr_expect_eq(hvd__shm_arrive(&s, err, sizeof(err)), 0, "%s", err);
    cr_expect_geq(hvd__now_ms() - t0, 250, "arrive returned before the child");
    memcpy(hvd__shm_slot(&s, s.n), &mark, sizeof(mark));
    sleep_ms(300);
    cr_expect_eq(hvd__shm_release(&s, err, sizeof(err)), 0, "%s", err);
    /* Both have entered the same syncs: a plain one pairs up. */
    cr_expect_eq(hvd__shm_sync(&s, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(read(g_report[0], got, sizeof(got)), sizeof(got));
    cr_expect_geq(got[0], 250, "the child's release returned early");
    cr_expect_eq(got[1], mark);
    reap(pid);
    hvd__shm_close(&s);
    close(g_report[0]);
    close(g_report[1]);
}
