/* Running an elastic job's host discovery script on horovodrun's loop. */
#ifndef HR_DISCOVER_RUN_H
#define HR_DISCOVER_RUN_H

#include <stddef.h>
#include <uv.h>

#include "launcher/lib/hostspec.h"

/*
 * Runs --host-discovery-script as Horovod does, /bin/sh -c SCRIPT, at once
 * and then interval_s after each run ends, until closed, and hands every
 * result to a callback: the hosts parsed by hr_discovery_parse, or one
 * line saying why the run failed. Everything happens on the loop, from
 * timers and the script's exit; nothing blocks or polls.
 *
 * Each run: stdin is /dev/null; stdout is collected, up to 1 MiB (more
 * fails the run, and the script is killed); stderr is collected, its first
 * 4 KiB kept for the failure message; neither reaches horovodrun's
 * terminal. A run fails on a non-zero exit, a death by a signal, a
 * timeout, too much output or output that does not parse. An empty output
 * is an empty host list, not a failure.
 *
 * Processes. horovodrun forks a middleman, which leads a process group of
 * its own and forks the shell into it; the script and whatever it starts
 * stay in that group. A timeout, too much output and hr_discover_close
 * kill the whole group with SIGKILL, and so does the end of each run, so
 * that nothing a script left in the background piles up run after run.
 * The middleman exists so that the group cannot outlive horovodrun, even
 * a horovodrun killed by SIGKILL: it asks the kernel for SIGTERM when
 * horovodrun dies (PR_SET_PDEATHSIG) and answers it by killing its group.
 * hvd_spawn (launcher/lib/spawn.c) and uv_spawn cannot give that: the
 * parent-death signal reaches only the process forked, here /bin/sh, and
 * dash forks the script instead of executing it, so the script itself
 * would live on. The middleman also hands the shell's wait status back
 * through a pipe, so that an exit code and a signal stay apart.
 * The parent-death signal follows the thread that forks: the loop's thread
 * must live as long as the discovery does (horovodrun's main thread does).
 * Children are reaped by pid on SIGCHLD (a uv_signal_t); nothing else in
 * the process may reap with waitpid(-1) (libuv reaps by pid too).
 */

struct hr_discover;

struct hr_discover_cfg {
    const char *script; /* run as /bin/sh -c SCRIPT, as Horovod runs it */
    double interval_s;  /* pause between the end of one run and the next */
    double timeout_s;   /* a run longer than this is killed and fails;
                           <= 0: no limit */
    int default_slots;  /* --slots-per-host; < 1: not given */
    const char *name;   /* what messages call it; NULL: script */
};

/*
 * hosts: the parsed list on success (valid during the call only), NULL on
 * failure; err: one line on failure, NULL on success, naming the script
 * ("host discovery script './d.sh' exited with status 3: <first non-blank
 * line of its stderr>", "... was killed by signal 9 (SIGKILL)", "... did
 * not finish within 30 s", "... printed more than 1 MiB", "...: line 2:
 * ..."); first: this is the first run's result. The callback may call
 * hr_discover_now and hr_discover_close.
 */
typedef void (*hr_discover_cb)(void *arg, const struct hvd_hostlist *hosts,
                               const char *err, int first);

/*
 * Starts the discovery on loop; the first run starts on the loop's next
 * iteration, never inside this call. 0, or HVD_EINVAL (a NULL argument, an
 * empty script, a negative interval) or HVD_ENOMEM with *out NULL.
 */
int hr_discover_start(struct hr_discover **out, uv_loop_t *loop,
                      const struct hr_discover_cfg *cfg, hr_discover_cb cb,
                      void *arg);

/*
 * Stops: kills a running script's process group (SIGKILL), closes every
 * handle; the struct is freed once the handles are closed and the killed
 * middleman is reaped (the loop must run on). NULL is a no-op. No callback
 * after this.
 */
void hr_discover_close(struct hr_discover *d);

/* Runs the script again as soon as the current run (if any) ends, instead
 * of waiting out the interval. */
void hr_discover_now(struct hr_discover *d);

/*
 * A script that fails every second must not flood the terminal: this says
 * which failures to log. The first HR_DISCOVER_LOG_FIRST are logged as
 * they are, the last of them saying that further failures are only
 * counted; after that, a failure is logged when HR_DISCOVER_LOG_EVERY
 * seconds have passed since the last line, with the number of failures
 * left out since. Successes change nothing, so a script that fails every
 * other run is bounded too.
 */
#define HR_DISCOVER_LOG_FIRST 5
#define HR_DISCOVER_LOG_EVERY 60.0

struct hr_discover_logcap {
    unsigned long logged; /* lines logged */
    unsigned long quiet;  /* failures not logged since the last line */
    double last;          /* when the last line was logged, in seconds */
};

/*
 * Counts the failure err at time now (seconds on any monotonic clock;
 * zero the struct first). Returns 1 with the line to log in line (len
 * bytes), or 0 when this failure is only counted.
 */
int hr_discover_logcap(struct hr_discover_logcap *c, double now,
                       const char *err, char *line, size_t len);

/* hr_discover_logcap on d's own count and its loop's clock; 0 if d is
 * NULL. */
int hr_discover_should_log(struct hr_discover *d, const char *err, char *line,
                           size_t len);

#endif
