/* horovodrun's option table, each option's checks and what it exports. */
#include "launcher/horovodrun/cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/envc.h"
#include "launcher/lib/blacklist.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/ranklist.h"
#include "launcher/horovodrun/tty.h"

/* The most ranks a job may have: -np, --min-np, --max-np. */
#define MAX_NP 1000000

/*
 * An integer from least (0 or 1) to most, as Horovod's argparse type=int
 * with the bounds that make sense; stored in *out unless it is NULL.
 */
static int parse_int(const char *what, const char *arg, long least, long most,
                     int *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end != '\0' || v < least || v > most) {
        snprintf(err, n,
                 least > 0 ? "%s must be a positive integer, got '%s'"
                           : "%s must be an integer of at least 0, got '%s'",
                 what, arg);
        return -1;
    }
    if (out)
        *out = (int)v;
    return 0;
}

static int opt_np(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    return parse_int("-np", arg, 1, MAX_NP, &o->np, err, n);
}

static int opt_output(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    if (arg[0] == '\0') {
        snprintf(err, n, "--output-filename needs a directory name");
        return -1;
    }
    o->output_dir = arg;
    return 0;
}

static int opt_config(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    if (arg[0] == '\0') {
        snprintf(err, n, "--config-file needs a file name");
        return -1;
    }
    o->config_file = arg;
    return 0;
}

/* Seconds as a positive decimal number (fractions allowed). */
static int parse_seconds(const char *what, const char *arg, double *out,
                         char *err, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end != '\0' || !isfinite(v) || v <= 0 ||
        v > 86400 * 7) {
        snprintf(err, n, "%s must be a positive number of seconds, got '%s'",
                 what, arg);
        return -1;
    }
    *out = v;
    return 0;
}

static int opt_start_timeout(struct hr_opts *o, const char *arg, char *err,
                             size_t n)
{
    return parse_seconds("--start-timeout", arg, &o->start_timeout, err, n);
}

static int opt_kill_grace(struct hr_opts *o, const char *arg, char *err,
                          size_t n)
{
    o->kill_grace_set = 1;
    return parse_seconds("--kill-grace", arg, &o->kill_grace, err, n);
}

/* Options without an argument that set a field to a value. */
#define SET(fn, field, value)                                                  \
    static int fn(struct hr_opts *o, const char *arg, char *err, size_t n)     \
    {                                                                          \
        (void)arg, (void)err, (void)n;                                         \
        o->field = value;                                                      \
        return 0;                                                              \
    }
SET(opt_no_gpu, gpu_pinning, 0)
SET(opt_prefix_ts, prefix_timestamp, 1)
SET(opt_disable_cache, disable_cache, 1)
SET(opt_no_gloo_rdv, no_gloo_rendezvous, 1)
SET(opt_tcp, tcp, 1)
SET(opt_stall_off, stall_check_disable, "1")
SET(opt_stall_on, stall_check_disable, "0")
SET(opt_mark_cycles, timeline_mark_cycles, "1")
SET(opt_no_mark_cycles, timeline_mark_cycles, "0")
SET(opt_hier_on, hierarchical, "1")
SET(opt_hier_off, hierarchical, "0")
SET(opt_hier_gather_on, hierarchical_allgather, "1")
SET(opt_hier_gather_off, hierarchical_allgather, "0")
SET(opt_torus_on, torus_allreduce, "1")
SET(opt_torus_off, torus_allreduce, "0")
SET(opt_autotune_on, autotune, "1")
SET(opt_autotune_off, autotune, "0")
SET(opt_mpi_threads_off, mpi_threads_disable, "1")
SET(opt_mpi_threads_on, mpi_threads_disable, "0")
SET(opt_log_time, log_hide_time, "0")
SET(opt_log_no_time, log_hide_time, "1")
SET(opt_accept_new, ssh_accept_new, 1)
SET(opt_mpi, mpi, 1)
SET(opt_gloo, gloo, 1)
SET(opt_verbose, verbose, 1)
SET(opt_rsh_tree, rsh_tree, 1)
SET(opt_no_tty_status, no_tty_status, 1)
SET(opt_detach, detach, 1)
#undef SET

/* Horovod's spellings from before v0.21, which it still takes. */
static int warn_deprecated(struct hr_opts *o, const char *old, const char *now)
{
    return hvd_strvec_pushf(&o->warnings, "%s is deprecated; use %s", old,
                            now) == 0
               ? 0
               : -1;
}

static int opt_log_hide(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    (void)arg, (void)err, (void)n;
    o->log_hide_time = "1";
    return warn_deprecated(o, "--log-hide-timestamp",
                           "--log-without-timestamp");
}

static int opt_no_log_hide(struct hr_opts *o, const char *arg, char *err,
                           size_t n)
{
    (void)arg, (void)err, (void)n;
    o->log_hide_time = "0";
    return warn_deprecated(o, "--no-log-hide-timestamp",
                           "--log-with-timestamp");
}

static int opt_ssh_port(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v < 1 || v > 65535) {
        snprintf(err, n, "--ssh-port must be a TCP port (1-65535), got '%s'",
                 arg);
        return -1;
    }
    o->ssh_port = (int)v;
    return 0;
}

static int opt_tree_fanout(struct hr_opts *o, const char *arg, char *err,
                           size_t n)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v < 0 || v > 4096) {
        snprintf(err, n,
                 "--tree-fanout must be a number of hosts (0-4096; 0 starts "
                 "every agent from horovodrun), got '%s'",
                 arg);
        return -1;
    }
    o->tree_fanout = (int)v;
    return 0;
}

/* Options that only store their argument. */
#define STORE(fn, field)                                                       \
    static int fn(struct hr_opts *o, const char *arg, char *err, size_t n)     \
    {                                                                          \
        (void)err, (void)n;                                                    \
        o->field = arg;                                                        \
        return 0;                                                              \
    }
STORE(opt_hosts, hosts)
STORE(opt_hostfile, hostfile)
STORE(opt_identity, identity_file)
STORE(opt_agent_path, agent_path)
STORE(opt_rsh_agent, rsh_agent)
STORE(opt_rendezvous_addr, rendezvous_addr)
STORE(opt_timeline, timeline)
STORE(opt_autotune_log, autotune_log_file)
STORE(opt_mpi_args, mpi_args)
STORE(opt_binding_args, binding_args)
#undef STORE

/*
 * --network-interfaces eth0,eth1, or --network-interface once per
 * interface: Horovod takes the union, so a second option adds to the
 * first.
 */
static int add_nics(struct hr_opts *o, const char *what, const char *arg,
                    char *err, size_t n)
{
    size_t len = strlen(arg);
    if (len == 0 || arg[0] == ',' || arg[len - 1] == ',' || strstr(arg, ",,") ||
        strpbrk(arg, " \t")) {
        snprintf(err, n,
                 "%s needs interface names separated by commas, got '%s'", what,
                 arg);
        return -1;
    }
    if (o->network_interfaces == NULL) {
        o->network_interfaces = arg;
        return 0;
    }
    if (hvd_strvec_pushf(&o->strings, "%s,%s", o->network_interfaces, arg)) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    o->network_interfaces = o->strings.v[o->strings.n - 1];
    return 0;
}

static int opt_nics(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    return add_nics(o, "--network-interfaces", arg, err, n);
}

static int opt_nic(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    /* Horovod warns the same way and splits the list all the same. */
    if (strchr(arg, ',') &&
        hvd_strvec_pushf(&o->warnings,
                         "--network-interface with several interfaces is "
                         "deprecated; use --network-interfaces %s",
                         arg) != 0)
        return -1;
    return add_nics(o, "--network-interface", arg, err, n);
}

/* A non-negative decimal number for a tuning variable of the ranks. */
static int check_number(const char *what, const char *arg, double most,
                        char *err, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end != '\0' || !isfinite(v) || v < 0 ||
        v > most) {
        if (most < 1e9)
            snprintf(err, n, "%s must be a number from 0 to %g, got '%s'", what,
                     most, arg);
        else
            snprintf(err, n, "%s must be a number of at least 0, got '%s'",
                     what, arg);
        return -1;
    }
    return 0;
}

/* Options that store a number the ranks read from their environment. */
#define NUMBER(fn, field, name)                                                \
    static int fn(struct hr_opts *o, const char *arg, char *err, size_t n)     \
    {                                                                          \
        o->field = arg;                                                        \
        return check_number(name, arg, 1e9, err, n);                           \
    }
NUMBER(opt_fusion, fusion_threshold_mb, "--fusion-threshold-mb")
NUMBER(opt_cycle, cycle_time_ms, "--cycle-time-ms")
NUMBER(opt_cache, cache_capacity, "--cache-capacity")
NUMBER(opt_stall_warn, stall_warn_s, "--stall-check-warning-time-seconds")
NUMBER(opt_stall_shutdown, stall_shutdown_s,
       "--stall-check-shutdown-time-seconds")
#undef NUMBER

#define COUNT(fn, field, name)                                                 \
    static int fn(struct hr_opts *o, const char *arg, char *err, size_t n)     \
    {                                                                          \
        o->field = arg;                                                        \
        return parse_int(name, arg, 0, 1000000000, NULL, err, n);              \
    }
COUNT(opt_warmup, autotune_warmup_samples, "--autotune-warmup-samples")
COUNT(opt_steps, autotune_steps_per_sample, "--autotune-steps-per-sample")
COUNT(opt_bayes, autotune_bayes_opt_max_samples,
      "--autotune-bayes-opt-max-samples")
COUNT(opt_nccl_streams, num_nccl_streams, "--num-nccl-streams")
COUNT(opt_affinity, thread_affinity, "--thread-affinity")
COUNT(opt_gloo_timeout, gloo_timeout_s, "--gloo-timeout-seconds")
#undef COUNT

static int opt_noise(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    o->autotune_gaussian_process_noise = arg;
    return check_number("--autotune-gaussian-process-noise", arg, 1, err, n);
}

/* Horovod spells the levels in capitals and its runtime, like libhvd,
 * reads them in any case: the value travels as given. */
static int opt_log_level(struct hr_opts *o, const char *arg, char *err,
                         size_t n)
{
    static const char *const levels[] = {"trace",   "debug", "info",
                                         "warning", "error", "fatal"};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcasecmp(arg, levels[i]) == 0) {
            o->log_level = arg;
            return 0;
        }
    snprintf(err, n,
             "--log-level must be trace, debug, info, warning, error or "
             "fatal (in any case), got '%s'",
             arg);
    return -1;
}

static int opt_launcher(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    if (strcmp(arg, "ssh") == 0)
        o->launcher = HR_LAUNCH_SSH;
    else if (strcmp(arg, "slurm") == 0)
        o->launcher = HR_LAUNCH_SLURM;
    else if (strcmp(arg, "rsh") == 0)
        o->launcher = HR_LAUNCH_RSH;
    else {
        snprintf(err, n, "--launcher must be slurm, ssh or rsh, got '%.100s'",
                 arg);
        return -1;
    }
    return 0;
}

static int opt_output_ranks(struct hr_opts *o, const char *arg, char *err,
                            size_t n)
{
    o->output_ranks = arg;
    return hr_ranklist_parse(arg, 0, NULL, err, n);
}

static int opt_bind_to(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    if (strcmp(arg, "auto") == 0 || strcmp(arg, "none") == 0) {
        o->bind = arg[0] == 'a' ? HR_BIND_AUTO : HR_BIND_NONE;
        o->bind_set = 1;
        return 0;
    }
    snprintf(err, n, "--bind-to must be auto or none, got '%.100s'", arg);
    return -1;
}

static int opt_color(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    static const char *names[] = {"auto", "always", "never"};
    for (int i = 0; i < 3; i++)
        if (strcmp(arg, names[i]) == 0) {
            o->color = i;
            return 0;
        }
    snprintf(err, n, "--color must be auto, always or never, got '%.100s'",
             arg);
    return -1;
}

/*
 * Elastic training. Each value is checked here, whether or not the job
 * turns out elastic; how they fit together (--min-np against -np, ...) is
 * checked once parsing is done (hr_cli_parse).
 */
static int opt_min_np(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    return parse_int("--min-np", arg, 1, MAX_NP, &o->min_np, err, n);
}

static int opt_max_np(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    return parse_int("--max-np", arg, 1, MAX_NP, &o->max_np, err, n);
}

static int opt_slots_per_host(struct hr_opts *o, const char *arg, char *err,
                              size_t n)
{
    return parse_int("--slots-per-host", arg, 1, HVD_MAX_SLOTS,
                     &o->slots_per_host, err, n);
}

static int opt_elastic_timeout(struct hr_opts *o, const char *arg, char *err,
                               size_t n)
{
    return parse_seconds("--elastic-timeout", arg, &o->elastic_timeout, err, n);
}

/* 0 is Horovod's "no resize after the first start", not "no limit". */
static int opt_reset_limit(struct hr_opts *o, const char *arg, char *err,
                           size_t n)
{
    return parse_int("--reset-limit", arg, 0, 1000000000, &o->reset_limit, err,
                     n);
}

/* "MIN MAX": the parser joins the two words with a space. */
static int opt_cooldown(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    const char *what = "--blacklist-cooldown-range";
    char *end, *end2 = NULL;
    errno = 0;
    long lo = strtol(arg, &end, 10);
    long hi = *end == ' ' ? strtol(end + 1, &end2, 10) : 0;
    if (errno || end == arg || end2 == NULL || end2 == end + 1 ||
        *end2 != '\0') {
        snprintf(err, n, "%s needs two whole numbers of seconds, got '%s'",
                 what, arg);
        return -1;
    }
    if (lo < HR_BLACKLIST_COOLDOWN_MIN_S || hi > HR_BLACKLIST_COOLDOWN_MAX_S) {
        snprintf(err, n,
                 "%s must be within %d to %d seconds, as in Horovod, got %ld "
                 "%ld",
                 what, HR_BLACKLIST_COOLDOWN_MIN_S, HR_BLACKLIST_COOLDOWN_MAX_S,
                 lo, hi);
        return -1;
    }
    if (lo > hi) {
        snprintf(err, n,
                 "%s MIN %ld is more than MAX %ld; give the shorter cooldown "
                 "first",
                 what, lo, hi);
        return -1;
    }
    o->cooldown_min = (int)lo;
    o->cooldown_max = (int)hi;
    return 0;
}

/* Checked now, not when the job first needs hosts. */
static int opt_discovery(struct hr_opts *o, const char *arg, char *err,
                         size_t n)
{
    const char *what = "--host-discovery-script", *why;
    struct stat st;
    if (stat(arg, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) {
            snprintf(err, n, "cannot use %s '%s': %s", what, arg,
                     strerror(errno));
            return -1;
        }
        why = "does not exist; give the path of an executable script";
    } else if (!S_ISREG(st.st_mode)) {
        why = "is not a file; give the path of an executable script";
    } else if (access(arg, X_OK) != 0) {
        why = "is not executable; make it so with chmod +x";
    } else {
        o->discovery_script = arg;
        return 0;
    }
    snprintf(err, n, "%s '%s' %s", what, arg, why);
    return -1;
}

/*
 * Every option of Horovod 0.28.1's horovodrun, and horovodrun's own.
 * --help, --version and --check-build are handled by the parser itself.
 */
const struct hr_option hr_options[] = {
    {"num-proc", "-np", 0, "N",
     "number of processes (ranks) to start; elastic: the ranks needed to "
     "start",
     opt_np, NULL},
    {"hosts", NULL, 'H', "HOSTS",
     "hosts and slots, host:slots[,host:slots...]; default localhost:N",
     opt_hosts, NULL},
    {"hostfile", "-hostfile", 0, "FILE",
     "file with one 'host slots=N' per line ('#' comments allowed)",
     opt_hostfile, NULL},
    {"config-file", NULL, 0, "FILE",
     "read runtime settings from a YAML file in Horovod's layout; options "
     "on the command line win, wherever they are",
     opt_config, NULL},
    {"output-filename", NULL, 0, "DIR",
     "also write each rank's raw output to DIR/rank.N/stdout and stderr",
     opt_output, NULL},
    {"prefix-output-with-timestamp", "-prefix-timestamp", 0, NULL,
     "put the local time in front of each rank's line on the terminal, as "
     "Horovod does (the --output-filename files stay raw)",
     opt_prefix_ts, NULL},
    {"output-ranks", NULL, 0, "LIST",
     "show only these ranks on the terminal, for example 0 or 0,4-7 (the "
     "--output-filename files still get every rank)",
     opt_output_ranks, NULL},
    {"color", NULL, 0, "WHEN",
     "colour each rank's prefix: auto (on a terminal, unless NO_COLOR is "
     "set), always or never",
     opt_color, NULL},
    {"no-tty-status", NULL, 0, NULL,
     "write every rank line as it comes: no progress lines redrawn in place "
     "or held back, no start-up line, no colour unless --color always",
     opt_no_tty_status, NULL},
    {"detach", NULL, 0, NULL,
     "start the job, print its id and return: the job runs on with no "
     "terminal, its output kept for horovodrun logs/attach and written to "
     "./horovodrun-ID unless --output-filename says where",
     opt_detach, NULL},
    {"start-timeout", NULL, 0, "SEC",
     "seconds for every host to start (default 30, or "
     "HOROVOD_START_TIMEOUT)",
     opt_start_timeout, NULL},
    {"kill-grace", NULL, 0, "SEC",
     "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)",
     opt_kill_grace, NULL},
    {"no-gpu-pinning", NULL, 0, NULL,
     "do not set CUDA_VISIBLE_DEVICES to one GPU per rank", opt_no_gpu, NULL},
    {"bind-to", NULL, 0, "WHAT",
     "auto (the default): each rank runs on an equal share of its host's "
     "cores (whole cores; nothing is bound when a host has more ranks than "
     "CPUs); none: ranks run anywhere, as with Horovod's horovodrun. Not "
     "with --mpi (see --binding-args)",
     opt_bind_to, NULL},
    {"launcher", NULL, 0, "KIND",
     "how agents on other hosts start: slurm (srun, the default inside a "
     "Slurm allocation), rsh (--rsh-agent, the default when "
     "OMPI_MCA_plm_rsh_agent names a program) or ssh (the default "
     "elsewhere)",
     opt_launcher, NULL},
    {"rsh-agent", NULL, 0, "CMD",
     "start each remote host's agent with CMD HOST hvd-agent ... (such as "
     "kubexec.sh, blaunch, pbs_tmrsh or ssh); the agent connects back to "
     "horovodrun over TCP",
     opt_rsh_agent, NULL},
    {"rsh-tree", NULL, 0, NULL,
     "the --rsh-agent command works on every host, not only here (as ssh "
     "does): agents start agents with it, as over SSH (--tree-fanout). "
     "Without it, horovodrun runs the command for every host, as kubectl "
     "or pbs_tmrsh usually work only on the launcher's node",
     opt_rsh_tree, NULL},
    {"ssh-port", NULL, 'p', "PORT", "SSH port of the remote hosts (default 22)",
     opt_ssh_port, NULL},
    {"ssh-identity-file", NULL, 'i', "FILE",
     "private key to try after ssh-agent, before ~/.ssh/id_*", opt_identity,
     NULL},
    {"ssh-accept-new", NULL, 0, NULL,
     "add unknown host keys to ~/.ssh/known_hosts (changed keys are "
     "always refused)",
     opt_accept_new, NULL},
    {"agent-path", NULL, 0, "PATH",
     "hvd-agent on remote hosts (default: the same path as here)",
     opt_agent_path, NULL},
    {"tree-fanout", NULL, 0, "N",
     "over SSH or srun, horovodrun starts the agents of at most N hosts "
     "itself, and each of them those of up to N more, and so on (a tree; "
     "default 32; 0: every host from horovodrun, and every rank registers "
     "with it directly, not through its agent). In an elastic job, a host "
     "that comes later is started where the tree has room",
     opt_tree_fanout, NULL},
    {"network-interfaces", NULL, 0, "IFS",
     "interfaces for the job, separated by commas: ranks get the "
     "rendezvous address of the first; under --mpi, mpirun's TCP uses them",
     opt_nics, NULL},
    {"network-interface", NULL, 0, "IF",
     "one interface for --network-interfaces (repeat it for more)", opt_nic,
     NULL},
    {"rendezvous-addr", NULL, 0, "ADDR",
     "hand ranks this rendezvous address (default: the route to the hosts)",
     opt_rendezvous_addr, NULL},
    {"no-gloo-rendezvous", NULL, 0, NULL,
     "do not serve Horovod's Gloo rendezvous (HTTP key-value store) for "
     "ranks that link real Horovod",
     opt_no_gloo_rdv, NULL},
    {"disable-cache", NULL, 0, NULL,
     "accepted and changes nothing: horovodrun keeps no cache of host "
     "checks between runs",
     opt_disable_cache, NULL},
    {"fusion-threshold-mb", NULL, 0, "MB",
     "fuse ready allreduces up to MB mebibytes (default 128; 0 disables); "
     "sets HOROVOD_FUSION_THRESHOLD in bytes",
     opt_fusion, NULL},
    {"cycle-time-ms", NULL, 0, "MS",
     "least time between negotiation cycles (default 1); sets "
     "HOROVOD_CYCLE_TIME",
     opt_cycle, NULL},
    {"cache-capacity", NULL, 0, "N",
     "requests the response cache remembers (default 1024; 0 turns it "
     "off); sets HOROVOD_CACHE_CAPACITY",
     opt_cache, NULL},
    {"hierarchical-allreduce", NULL, 0, NULL,
     "across hosts, reduce within each host through shared memory and "
     "between one leader per host (the default when hosts run several "
     "ranks); sets HOROVOD_HIERARCHICAL_ALLREDUCE=1",
     opt_hier_on, NULL},
    {"no-hierarchical-allreduce", NULL, 0, NULL,
     "one TCP ring through all ranks instead; sets "
     "HOROVOD_HIERARCHICAL_ALLREDUCE=0",
     opt_hier_off, NULL},
    {"hierarchical-allgather", NULL, 0, NULL,
     "sets HOROVOD_HIERARCHICAL_ALLGATHER=1 (libhvd's allgather takes the "
     "path --hierarchical-allreduce chooses)",
     opt_hier_gather_on, NULL},
    {"no-hierarchical-allgather", NULL, 0, NULL,
     "sets HOROVOD_HIERARCHICAL_ALLGATHER=0", opt_hier_gather_off, NULL},
    {"torus-allreduce", NULL, 0, NULL,
     "passed on as HOROVOD_TORUS_ALLREDUCE=1 (libhvd has no torus "
     "allreduce)",
     opt_torus_on, NULL},
    {"no-torus-allreduce", NULL, 0, NULL,
     "passed on as HOROVOD_TORUS_ALLREDUCE=0", opt_torus_off, NULL},
    {"autotune", NULL, 0, NULL,
     "passed on as HOROVOD_AUTOTUNE=1 with the --autotune-* settings "
     "(libhvd has no autotuner)",
     opt_autotune_on, NULL},
    {"no-autotune", NULL, 0, NULL,
     "no autotuning, whatever --config-file says; sets nothing",
     opt_autotune_off, NULL},
    {"autotune-log-file", NULL, 0, "FILE",
     "with --autotune, passed on as HOROVOD_AUTOTUNE_LOG", opt_autotune_log,
     NULL},
    {"autotune-warmup-samples", NULL, 0, "N",
     "with --autotune, passed on as HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
     opt_warmup, NULL},
    {"autotune-steps-per-sample", NULL, 0, "N",
     "with --autotune, passed on as HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
     opt_steps, NULL},
    {"autotune-bayes-opt-max-samples", NULL, 0, "N",
     "with --autotune, passed on as HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
     opt_bayes, NULL},
    {"autotune-gaussian-process-noise", NULL, 0, "X",
     "with --autotune, passed on as "
     "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (0 to 1)",
     opt_noise, NULL},
    {"stall-check-warning-time-seconds", NULL, 0, "SEC",
     "warn when ranks wait this long for others' tensors (default 60); "
     "sets HOROVOD_STALL_CHECK_TIME_SECONDS",
     opt_stall_warn, NULL},
    {"stall-check-shutdown-time-seconds", NULL, 0, "SEC",
     "fail such tensors after this long (default 0: never); sets "
     "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     opt_stall_shutdown, NULL},
    {"no-stall-check", NULL, 0, NULL,
     "turn the stall inspector off; sets HOROVOD_STALL_CHECK_DISABLE=1",
     opt_stall_off, NULL},
    {"stall-check", NULL, 0, NULL,
     "keep the stall inspector on, whatever --config-file says; sets "
     "HOROVOD_STALL_CHECK_DISABLE=0",
     opt_stall_on, NULL},
    {"timeline-filename", NULL, 0, "FILE",
     "rank 0 writes a Chrome trace of every tensor's phases to FILE; sets "
     "HOROVOD_TIMELINE",
     opt_timeline, NULL},
    {"timeline-mark-cycles", NULL, 0, NULL,
     "mark negotiation cycles in the timeline; sets "
     "HOROVOD_TIMELINE_MARK_CYCLES=1",
     opt_mark_cycles, NULL},
    {"no-timeline-mark-cycles", NULL, 0, NULL,
     "do not mark them; sets HOROVOD_TIMELINE_MARK_CYCLES=0",
     opt_no_mark_cycles, NULL},
    {"mpi-threads-disable", NULL, 0, NULL,
     "under --mpi, libhvd asks MPI for MPI_THREAD_SERIALIZED, not "
     "MULTIPLE; sets HOROVOD_MPI_THREADS_DISABLE=1",
     opt_mpi_threads_off, NULL},
    {"no-mpi-threads-disable", NULL, 0, NULL,
     "sets HOROVOD_MPI_THREADS_DISABLE=0", opt_mpi_threads_on, NULL},
    {"num-nccl-streams", NULL, 0, "N",
     "passed on as HOROVOD_NUM_NCCL_STREAMS (libhvd uses one stream)",
     opt_nccl_streams, NULL},
    {"thread-affinity", NULL, 0, "CPU",
     "passed on as HOROVOD_THREAD_AFFINITY (libhvd does not pin its "
     "thread)",
     opt_affinity, NULL},
    {"gloo-timeout-seconds", NULL, 0, "SEC",
     "timeout of real Horovod's Gloo operations; sets "
     "HOROVOD_GLOO_TIMEOUT_SECONDS",
     opt_gloo_timeout, NULL},
    {"tcp", NULL, 0, NULL,
     "TCP only: sets NCCL_IB_DISABLE=1, and under --mpi keeps mpirun off "
     "UCX and InfiniBand; libhvd's own data plane is TCP already",
     opt_tcp, NULL},
    {"binding-args", NULL, 0, "ARGS",
     "under --mpi, mpirun's process binding instead of --bind-to none "
     "--map-by slot; ignored otherwise",
     opt_binding_args, NULL},
    {"log-level", NULL, 0, "LEVEL",
     "libhvd's log level (trace, debug, info, warning, error, fatal; "
     "default warning); debug names each rank's transport; sets "
     "HOROVOD_LOG_LEVEL",
     opt_log_level, NULL},
    {"log-with-timestamp", NULL, 0, NULL,
     "sets HOROVOD_LOG_HIDE_TIME=0 (libhvd's messages carry no time "
     "either way)",
     opt_log_time, NULL},
    {"log-without-timestamp", NULL, 0, NULL,
     "sets HOROVOD_LOG_HIDE_TIME=1: real Horovod logs without the time",
     opt_log_no_time, NULL},
    {"log-hide-timestamp", NULL, 0, NULL, NULL, opt_log_hide, NULL},
    {"no-log-hide-timestamp", NULL, 0, NULL, NULL, opt_no_log_hide, NULL},
    {"mpi", NULL, 0, NULL,
     "run the ranks with Open MPI's mpirun instead of horovodrun's own "
     "launcher; libhvd then uses MPI",
     opt_mpi, NULL},
    {"gloo", NULL, 0, NULL,
     "run the ranks with horovodrun's own launcher (the default)", opt_gloo,
     NULL},
    {"mpi-args", NULL, 0, "ARGS",
     "more arguments for mpirun under --mpi, split into words as a shell "
     "would",
     opt_mpi_args, NULL},
    {"jsrun", NULL, 0, NULL, "IBM's jsrun: not supported yet (a usage error)",
     NULL,
     "launching with jsrun is not supported yet by this horovodrun; use "
     "--mpi or the default launcher"},
    {"min-np", "--min-num-proc", 0, "N",
     "elastic training (makes the job elastic): the fewest ranks it runs "
     "with; below that it waits for hosts (default -np)",
     opt_min_np, NULL},
    {"max-np", "--max-num-proc", 0, "N",
     "elastic training: the most ranks the job grows to (default no bound)",
     opt_max_np, NULL},
    {"slots-per-host", NULL, 0, "N",
     "elastic training: slots of a discovered host whose line has no "
     ":slots",
     opt_slots_per_host, NULL},
    {"elastic-timeout", NULL, 0, "SEC",
     "elastic training: seconds to wait for -np slots at the start and "
     "--min-np after a reset (default 600, or HOROVOD_ELASTIC_TIMEOUT)",
     opt_elastic_timeout, NULL},
    {"reset-limit", NULL, 0, "N",
     "elastic training: fail the job at its reset after N resets (0: "
     "none after the start; default no limit)",
     opt_reset_limit, NULL},
    {"blacklist-cooldown-range", NULL, 0, "MIN MAX",
     "elastic training: keep a failed host out MIN to MAX seconds, longer at "
     "each failure (1-3600; default: for good)",
     opt_cooldown, NULL},
    {"host-discovery-script", NULL, 0, "FILE",
     "elastic training (makes the job elastic): an executable that prints "
     "the available hosts, 'host' or 'host:slots' a line; not with -H or "
     "--hostfile",
     opt_discovery, NULL},
    {"verbose", NULL, 0, NULL,
     "print what horovodrun does (under --mpi, the mpirun command)",
     opt_verbose, NULL},
    {"check-build", "-cb", 0, NULL,
     "print which controllers and tensor operations this build has and "
     "exit",
     NULL, NULL},
    {"version", NULL, 'v', NULL, "print the version and exit", NULL, NULL},
    {"help", NULL, 'h', NULL, "print this help and exit", NULL, NULL},
};
const size_t hr_noptions = sizeof(hr_options) / sizeof(hr_options[0]);

/* The variable of each runtime setting, named once. */
enum export_kind {
    EXPORT_AS_IS,
    EXPORT_MIB,     /* mebibytes on the command line, bytes in the variable */
    EXPORT_AUTOTUNE /* only with --autotune, as Horovod does */
};

static const struct {
    const char *env;
    size_t field; /* offset of a const char * in struct hr_opts */
    int kind;
} exports[] = {
    {HVD_ENV_FUSION_THRESHOLD, offsetof(struct hr_opts, fusion_threshold_mb),
     EXPORT_MIB},
    {HVD_ENV_CYCLE_TIME, offsetof(struct hr_opts, cycle_time_ms), EXPORT_AS_IS},
    {HVD_ENV_CACHE_CAPACITY, offsetof(struct hr_opts, cache_capacity),
     EXPORT_AS_IS},
    {HVD_ENV_HIERARCHICAL_ALLREDUCE, offsetof(struct hr_opts, hierarchical),
     EXPORT_AS_IS},
    {HVD_ENV_HIERARCHICAL_ALLGATHER,
     offsetof(struct hr_opts, hierarchical_allgather), EXPORT_AS_IS},
    {HVD_ENV_TORUS_ALLREDUCE, offsetof(struct hr_opts, torus_allreduce),
     EXPORT_AS_IS},
    {HVD_ENV_AUTOTUNE, offsetof(struct hr_opts, autotune), EXPORT_AUTOTUNE},
    {HVD_ENV_AUTOTUNE_LOG, offsetof(struct hr_opts, autotune_log_file),
     EXPORT_AUTOTUNE},
    {HVD_ENV_AUTOTUNE_WARMUP, offsetof(struct hr_opts, autotune_warmup_samples),
     EXPORT_AUTOTUNE},
    {HVD_ENV_AUTOTUNE_STEPS,
     offsetof(struct hr_opts, autotune_steps_per_sample), EXPORT_AUTOTUNE},
    {HVD_ENV_AUTOTUNE_BAYES,
     offsetof(struct hr_opts, autotune_bayes_opt_max_samples), EXPORT_AUTOTUNE},
    {HVD_ENV_AUTOTUNE_NOISE,
     offsetof(struct hr_opts, autotune_gaussian_process_noise),
     EXPORT_AUTOTUNE},
    {HVD_ENV_TIMELINE, offsetof(struct hr_opts, timeline), EXPORT_AS_IS},
    {HVD_ENV_TIMELINE_MARK_CYCLES,
     offsetof(struct hr_opts, timeline_mark_cycles), EXPORT_AS_IS},
    {HVD_ENV_STALL_DISABLE, offsetof(struct hr_opts, stall_check_disable),
     EXPORT_AS_IS},
    {HVD_ENV_STALL_WARN, offsetof(struct hr_opts, stall_warn_s), EXPORT_AS_IS},
    {HVD_ENV_STALL_SHUTDOWN, offsetof(struct hr_opts, stall_shutdown_s),
     EXPORT_AS_IS},
    {HVD_ENV_MPI_THREADS_DISABLE, offsetof(struct hr_opts, mpi_threads_disable),
     EXPORT_AS_IS},
    {HVD_ENV_NUM_NCCL_STREAMS, offsetof(struct hr_opts, num_nccl_streams),
     EXPORT_AS_IS},
    {HVD_ENV_THREAD_AFFINITY, offsetof(struct hr_opts, thread_affinity),
     EXPORT_AS_IS},
    {HVD_ENV_GLOO_TIMEOUT, offsetof(struct hr_opts, gloo_timeout_s),
     EXPORT_AS_IS},
    {HVD_ENV_LOG_LEVEL, offsetof(struct hr_opts, log_level), EXPORT_AS_IS},
    {HVD_ENV_LOG_HIDE_TIME, offsetof(struct hr_opts, log_hide_time),
     EXPORT_AS_IS},
};

int hr_cli_export_env(const struct hr_opts *o)
{
    int autotune = o->autotune && strcmp(o->autotune, "1") == 0;
    for (size_t i = 0; i < sizeof(exports) / sizeof(exports[0]); i++) {
        const char *v =
            *(const char *const *)((const char *)o + exports[i].field);
        char bytes[32];
        if (v == NULL || (exports[i].kind == EXPORT_AUTOTUNE && !autotune))
            continue;
        if (exports[i].kind == EXPORT_MIB) {
            snprintf(bytes, sizeof(bytes), "%.0f",
                     strtod(v, NULL) * 1024 * 1024);
            v = bytes;
        }
        if (setenv(exports[i].env, v, 1) != 0)
            return -1;
    }
    /* Horovod sets it whatever the controller: NCCL's own transport. */
    if (o->tcp && setenv(HVD_ENV_NCCL_IB_DISABLE, "1", 1) != 0)
        return -1;
    return 0;
}
