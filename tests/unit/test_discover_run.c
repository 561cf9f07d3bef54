/* Unit tests for horovodrun/discover_run.c: the host discovery script run
 * on a real loop, with scripts in a temporary directory. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/hvd_err.h"
#include "launcher/horovodrun/discover_run.h"
#include "tmppath.h"

static uv_loop_t loop;
static uv_timer_t guard; /* ends a run of the loop that takes too long */
static uv_timer_t poke;  /* a test's own timer */
static char dir[64];
static char path[128]; /* the script */
static struct hr_discover *d;
static struct hr_discover_cfg cfg;

/* What the callback saw. */
static int calls;
static int firsts;      /* calls with first set */
static int first_first; /* first was set on the first call */
static int got_hosts;   /* the last call had a host list */
static char hosts[512]; /* the last list as "a:2,b:3" */
static char err[512];   /* the last err, "" on success */
static int stop_at;     /* uv_stop once calls reaches this; 0: never */
static void (*on_result)(void);

static void setup(void)
{
    /* Orphans of killed groups come back to this process, which reaps
     * them, so that a group's end does not wait for init. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    tmp_template(dir, sizeof(dir), "hr-discover");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(uv_loop_init(&loop), 0);
    uv_timer_init(&loop, &guard);
    uv_unref((uv_handle_t *)&guard);
    uv_timer_init(&loop, &poke);
    d = NULL;
    calls = firsts = first_first = got_hosts = stop_at = 0;
    hosts[0] = err[0] = '\0';
    on_result = NULL;
    cfg = (struct hr_discover_cfg){
        .script = path, .interval_s = 100, .timeout_s = 5};
}

static void teardown(void)
{
    DIR *dp;
    struct dirent *e;

    hr_discover_close(d);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_close((uv_handle_t *)&poke, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    dp = opendir(dir);
    if (dp != NULL) {
        while ((e = readdir(dp)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(dirfd(dp), e->d_name, 0);
        }
        closedir(dp);
    }
    rmdir(dir);
}

TestSuite(discover_run, .init = setup, .fini = teardown, .timeout = 20);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Writes the script "name" into the directory and points path at it;
 * every "@" in body becomes the directory. */
static void script(const char *name, const char *body)
{
    char text[2048];
    size_t n = 0;
    FILE *f;

    n += (size_t)snprintf(text, sizeof(text), "#!/bin/sh\n");
    for (const char *s = body; *s && n + 64 < sizeof(text); s++) {
        if (*s == '@')
            n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", dir);
        else
            text[n++] = *s;
    }
    text[n] = '\0';
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, 0700), 0);
}

/* A number the script wrote into the file "name", or -1. */
static long number(const char *name)
{
    char p[128];
    long v = -1;
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

static void cb(void *arg, const struct hvd_hostlist *hl, const char *e,
               int first)
{
    (void)arg;
    cr_assert((hl == NULL) != (e == NULL), "hosts %p, err %s", (void *)hl,
              e ? e : "NULL");
    calls++;
    firsts += first != 0;
    if (calls == 1)
        first_first = first != 0;
    got_hosts = hl != NULL;
    hosts[0] = '\0';
    for (size_t i = 0; hl && i < hl->n; i++) {
        size_t used = strlen(hosts);
        snprintf(hosts + used, sizeof(hosts) - used, "%s%s:%d", i ? "," : "",
                 hl->hosts[i].name, hl->hosts[i].slots);
    }
    snprintf(err, sizeof(err), "%s", e ? e : "");
    if (on_result)
        on_result();
    if (stop_at && calls >= stop_at)
        uv_stop(&loop);
}

static void on_guard(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Runs the loop until stop_at results, max_s or an empty loop; returns
 * the seconds it ran. */
static double run(double max_s)
{
    double t0 = now();
    uv_timer_start(&guard, on_guard, (uint64_t)(max_s * 1000), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_timer_stop(&guard);
    return now() - t0;
}

static void start(void)
{
    cr_assert_eq(hr_discover_start(&d, &loop, &cfg, cb, NULL), 0);
    cr_assert_not_null(d);
}

/* Starts, runs until the first result, and checks it came once. */
static void first_result(void)
{
    start();
    stop_at = 1;
    double took = run(3);
    cr_assert_eq(calls, 1, "%d results in %.2f s", calls, took);
    cr_assert(first_first);
}

/* Closes d and checks that every handle closed (and, under ASan, that
 * nothing leaked): the loop ends by itself and closes cleanly. */
static void done(void)
{
    hr_discover_close(d);
    d = NULL;
    uv_close((uv_handle_t *)&guard, NULL);
    uv_close((uv_handle_t *)&poke, NULL);
    double t0 = now();
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_lt(now() - t0, 1.0);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(uv_loop_init(&loop), 0); /* for teardown */
    uv_timer_init(&loop, &guard);
    uv_timer_init(&loop, &poke);
}

/* True once no process of the group is left, reaping the orphans this
 * process adopted; waits at most 1 s. Only while no run is in flight,
 * or the reaping could take the run's own child. */
static int group_gone(pid_t pgid)
{
    for (int i = 0; i < 200; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (kill(-pgid, 0) == -1 && errno == ESRCH)
            return 1;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return 0;
}

/* Records the script's pid, its process group and a background child,
 * then waits on the child. */
#define SLEEPER                                                                \
    "echo $$ > @/pid\n"                                                        \
    "cut -d' ' -f5 /proc/$$/stat > @/pgid.tmp && mv @/pgid.tmp @/pgid\n"       \
    "sleep 100 &\n"                                                            \
    "echo $! > @/kid.tmp && mv @/kid.tmp @/kid\n"                              \
    "wait\n"

/* Checks that the sleeper's processes and group are gone. */
static void sleeper_gone(void)
{
    long pid = number("pid"), pgid = number("pgid"), kid = number("kid");
    cr_assert_gt(pid, 0);
    cr_assert_gt(kid, 0);
    cr_assert_gt(pgid, 0);
    cr_assert_neq(pgid, (long)getpgrp(), "the script shares our group");
    cr_assert(group_gone((pid_t)pgid), "group %ld still has processes", pgid);
    cr_assert(kill((pid_t)pid, 0) == -1 && errno == ESRCH);
    cr_assert(kill((pid_t)kid, 0) == -1 && errno == ESRCH);
}

Test(discover_run, two_hosts_with_slots)
{
    script("d.sh", "echo host-a:2\necho host-b:3\n");
    first_result();
    cr_assert(got_hosts, "%s", err);
    cr_assert_str_eq(hosts, "host-a:2,host-b:3");
    done();
}

Test(discover_run, line_without_slots_uses_default)
{
    script("d.sh", "echo host-a\necho host-b:1\n");
    cfg.default_slots = 4;
    first_result();
    cr_assert(got_hosts, "%s", err);
    cr_assert_str_eq(hosts, "host-a:4,host-b:1");
    done();
}

Test(discover_run, parse_error_names_script_and_line)
{
    char want[256];

    script("d.sh", "echo host-a:2\necho host-b\n");
    first_result();
    cr_assert_not(got_hosts);
    snprintf(want, sizeof(want), "host discovery script '%s': line 2: ", path);
    cr_assert_eq(strncmp(err, want, strlen(want)), 0, "%s", err);
    done();
}

Test(discover_run, empty_output_is_empty_list)
{
    script("d.sh", "echo\necho '   '\n");
    first_result();
    cr_assert(got_hosts, "%s", err);
    cr_assert_str_eq(hosts, "");
    done();
}

Test(discover_run, stdin_is_dev_null)
{
    int p[2];

    /* A stdin that never ends: a script that inherited it would hang. */
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(dup2(p[0], 0), 0);
    script("d.sh", "cat\necho host-a:1\n");
    cfg.timeout_s = 1;
    first_result();
    cr_assert_str_eq(hosts, "host-a:1", "%s", err);
    done();
    close(p[1]);
}

Test(discover_run, keeps_no_descriptor_of_ours)
{
    char body[256];
    int fd = open("/dev/null", O_RDONLY); /* inheritable on purpose */

    cr_assert_geq(fd, 3);
    snprintf(body, sizeof(body),
             "if [ -e /proc/self/fd/%d ]; then echo leaked >&2; exit 1; fi\n"
             "echo host-a:1\n",
             fd);
    script("d.sh", body);
    first_result();
    cr_assert_str_eq(hosts, "host-a:1", "%s", err);
    done();
    close(fd);
}

Test(discover_run, exit_status_and_first_stderr_line)
{
    char want[256];

    script("d.sh", "echo >&2\necho '  first problem' >&2\n"
                   "echo second >&2\necho host-a:1\nexit 3\n");
    first_result();
    cr_assert_not(got_hosts);
    snprintf(want, sizeof(want),
             "host discovery script '%s' exited with status 3: first problem",
             path);
    cr_assert_str_eq(err, want);
    done();
}

Test(discover_run, exit_without_stderr)
{
    char want[256];

    script("d.sh", "exit 7\n");
    first_result();
    snprintf(want, sizeof(want),
             "host discovery script '%s' exited with status 7", path);
    cr_assert_str_eq(err, want);
    done();
}

Test(discover_run, killed_by_signal)
{
    cfg.script = "kill -9 $$";
    first_result();
    cr_assert_str_eq(err, "host discovery script 'kill -9 $$' was killed by "
                          "signal 9 (SIGKILL)");
    done();
}

Test(discover_run, timeout_kills_the_group)
{
    char want[256];

    script("d.sh", SLEEPER);
    cfg.timeout_s = 0.3;
    start();
    stop_at = 1;
    double took = run(3);
    cr_assert_eq(calls, 1);
    cr_assert_geq(took, 0.29);
    cr_assert_lt(took, 1.5);
    snprintf(want, sizeof(want),
             "host discovery script '%s' did not finish within 0.3 s", path);
    cr_assert_str_eq(err, want);
    /* The next run is 100 s away: nothing of d's is left to reap. */
    sleeper_gone();
    done();
}

Test(discover_run, end_of_run_kills_what_the_script_left)
{
    script("d.sh", "cut -d' ' -f5 /proc/$$/stat > @/pgid\n"
                   "sleep 100 &\necho host-a:1\n");
    first_result();
    cr_assert_str_eq(hosts, "host-a:1", "%s", err);
    /* The next run is 100 s away: nothing of d's is left to reap. */
    long pgid = number("pgid");
    cr_assert_gt(pgid, 0);
    cr_assert(group_gone((pid_t)pgid), "group %ld still has processes", pgid);
    done();
}

Test(discover_run, too_much_output)
{
    char want[256];

    script("d.sh", "cut -d' ' -f5 /proc/$$/stat > @/pgid\n"
                   "exec yes host-a:1\n");
    first_result();
    snprintf(want, sizeof(want),
             "host discovery script '%s' printed more than 1 MiB", path);
    cr_assert_str_eq(err, want);
    done();
    long pgid = number("pgid");
    cr_assert_gt(pgid, 0);
    cr_assert(group_gone((pid_t)pgid), "group %ld still has processes", pgid);
}

Test(discover_run, output_limit_is_exactly_one_mib)
{
    /* 1 MiB of blank lines is an empty list; one byte more fails. */
    script("d.sh", "head -c 1048576 /dev/zero | tr '\\0' '\\n'\n");
    first_result();
    cr_assert(got_hosts, "%s", err);
    done();
    calls = 0;
    script("e.sh", "head -c 1048577 /dev/zero | tr '\\0' '\\n'\n");
    first_result();
    cr_assert_not(got_hosts);
    cr_assert_not_null(strstr(err, "printed more than 1 MiB"), "%s", err);
    done();
}

Test(discover_run, interval_reruns)
{
    script("d.sh", "echo host-a:1\n");
    cfg.interval_s = 0.1;
    start();
    stop_at = 3;
    double took = run(3);
    cr_assert_eq(calls, 3);
    /* Two pauses of 0.1 s between the three runs. */
    cr_assert_geq(took, 0.19);
    cr_assert_eq(firsts, 1);
    cr_assert(first_first);
    /* Without the pause, 0.35 s would give dozens of runs. */
    calls = 0;
    stop_at = 0;
    took = run(0.35);
    cr_assert(calls >= 1 && calls <= 4, "%d runs in %.2f s", calls, took);
    cr_assert_str_eq(hosts, "host-a:1");
    done();
}

static void call_now(uv_timer_t *t)
{
    (void)t;
    hr_discover_now(d);
}

/* After the second result: asks again while d waits out its interval. */
static void now_when_idle(void)
{
    if (calls == 2)
        uv_timer_start(&poke, call_now, 20, 0);
}

Test(discover_run, now_skips_the_interval)
{
    script("d.sh", "sleep 0.1\necho host-a:1\n");
    start();
    /* During the first run: a second one follows at once. */
    uv_timer_start(&poke, call_now, 30, 0);
    on_result = now_when_idle;
    stop_at = 3;
    double took = run(3);
    cr_assert_eq(calls, 3, "%d results in %.2f s", calls, took);
    cr_assert_lt(took, 1.5);
    cr_assert_eq(firsts, 1);
    done();
}

/* Closes d once the sleeper has recorded itself. */
static void close_when_ready(uv_timer_t *t)
{
    if (number("kid") <= 0)
        return;
    uv_timer_stop(t);
    hr_discover_close(d);
    d = NULL;
}

Test(discover_run, close_in_flight_kills_and_calls_nothing)
{
    script("d.sh", SLEEPER);
    cfg.timeout_s = 0;
    cfg.interval_s = 0;
    start();
    uv_timer_start(&poke, close_when_ready, 10, 10);
    double took = run(3);
    cr_assert_null(d, "the script never recorded itself");
    cr_assert_lt(took, 1.5);
    cr_assert_eq(calls, 0);
    done();
    sleeper_gone();
}

static void close_now(void)
{
    hr_discover_close(d);
    d = NULL;
}

Test(discover_run, close_from_the_callback)
{
    script("d.sh", "echo host-a:1\n");
    cfg.interval_s = 0;
    start();
    on_result = close_now;
    double took = run(3);
    cr_assert_eq(calls, 1);
    cr_assert_lt(took, 1.5);
    done();
}

Test(discover_run, group_dies_with_its_launcher)
{
    script("d.sh", SLEEPER);
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0) {
        /* A stand-in for horovodrun, killed below with SIGKILL. */
        uv_loop_t l;
        struct hr_discover *x;
        uv_loop_init(&l);
        if (hr_discover_start(&x, &l, &cfg, cb, NULL) != 0)
            _exit(1);
        uv_run(&l, UV_RUN_DEFAULT);
        _exit(1);
    }
    for (int i = 0; i < 400 && number("kid") <= 0; i++)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    cr_assert_gt(number("kid"), 0, "the script never recorded itself");
    kill(c, SIGKILL);
    cr_assert_eq(waitpid(c, NULL, 0), c);
    sleeper_gone();
}

Test(discover_run, start_refuses_bad_arguments)
{
    struct hr_discover *x = (struct hr_discover *)&x;

    cfg.script = "";
    cr_assert_eq(hr_discover_start(&x, &loop, &cfg, cb, NULL), HVD_EINVAL);
    cr_assert_null(x);
    cfg.script = "true";
    cr_assert_eq(hr_discover_start(&x, &loop, &cfg, NULL, NULL), HVD_EINVAL);
    cfg.interval_s = -1;
    cr_assert_eq(hr_discover_start(&x, &loop, &cfg, cb, NULL), HVD_EINVAL);
    hr_discover_close(NULL);
    hr_discover_now(NULL);
    cr_assert_eq(hr_discover_should_log(NULL, "x", err, sizeof(err)), 0);
}

Test(discover_run, log_cap)
{
    struct hr_discover_logcap c = {0};
    char line[256];
    double t = 0;

    for (int i = 0; i < HR_DISCOVER_LOG_FIRST - 1; i++) {
        cr_assert_eq(hr_discover_logcap(&c, t++, "boom", line, sizeof(line)),
                     1);
        cr_assert_str_eq(line, "boom");
    }
    cr_assert_eq(hr_discover_logcap(&c, t, "boom", line, sizeof(line)), 1);
    cr_assert_str_eq(line, "boom; further failures are only counted, and "
                           "logged once a minute");
    double last = t++;
    int quiet = 0;
    for (; t < last + HR_DISCOVER_LOG_EVERY; t++, quiet++)
        cr_assert_eq(hr_discover_logcap(&c, t, "boom", line, sizeof(line)), 0);
    cr_assert_eq(hr_discover_logcap(&c, t, "bang", line, sizeof(line)), 1);
    char want[128];
    snprintf(want, sizeof(want),
             "bang (%d more failures since the last message)", quiet);
    cr_assert_str_eq(line, want);
    cr_assert_eq(hr_discover_logcap(&c, t + 1, "x", line, sizeof(line)), 0);
    cr_assert_eq(hr_discover_logcap(&c, t + 200, "x", line, sizeof(line)), 1);
    cr_assert_str_eq(line, "x (1 more failure since the last message)");
    cr_assert_eq(hr_discover_logcap(&c, t + 400, "y", line, sizeof(line)), 1);
    cr_assert_str_eq(line, "y");
}
