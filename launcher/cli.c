/* horovodrun's option table, its parser and the variables it exports. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/envc.h"
#include "config.h"
#include "hvd_build.h"
#include "hvd_version.h"
#include "srun.h"

#define USAGE                                                                  \
    "usage: horovodrun -np N [-H host:slots,...] [options] command "           \
    "[args...]"

static int opt_np(struct hr_opts *o, const char *arg, char *err, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end != '\0' || v < 1 || v > 1000000) {
        snprintf(err, n, "-np must be a positive integer, got '%s'", arg);
        return -1;
    }
    o->np = (int)v;
    return 0;
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

/* A count Horovod reads as an int (argparse's type=int, at least 0). */
static int check_count(const char *what, const char *arg, char *err, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end != '\0' || v < 0 || v > 1000000000) {
        snprintf(err, n, "%s must be an integer of at least 0, got '%s'", what,
                 arg);
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
        return check_count(name, arg, err, n);                                 \
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
    else {
        snprintf(err, n, "--launcher must be slurm or ssh, got '%.100s'", arg);
        return -1;
    }
    return 0;
}

/* What this build of horovodrun and libhvd has, in Horovod's format. */
static void check_build(FILE *out)
{
    fprintf(out,
            "horovodrun %s:\n\n"
            "Available Controllers:\n"
            "    [X] horovodrun (TCP rendezvous, SSH)\n"
            "    [%c] MPI\n\n"
            "Available Tensor Operations:\n"
            "    [X] TCP\n"
            "    [X] Shared memory\n"
            "    [%c] NCCL\n"
            "    [%c] MPI\n\n"
            "Device buffers:\n"
            "    [%c] CUDA%s\n",
            HVD_VERSION, HVD_HAVE_MPI ? 'X' : ' ', HVD_HAVE_NCCL ? 'X' : ' ',
            HVD_HAVE_MPI ? 'X' : ' ', HVD_HAVE_CUDA ? 'X' : ' ',
            HVD_HAVE_CUDA && !HVD_HAVE_NCCL ? " (staged through host memory)"
                                            : "");
}

#define ELASTIC                                                                \
    "elastic training is not supported yet by this horovodrun; run a "         \
    "fixed-size job with -np"
#define ELASTIC_HELP "elastic training: not supported yet (a usage error)"

/*
 * Every option of Horovod 0.28.1's horovodrun, and horovodrun's own.
 * --help, --version and --check-build are handled by the parser itself.
 */
const struct hr_option hr_options[] = {
    {"num-proc", "-np", 0, "N", "number of processes (ranks) to start", opt_np,
     NULL},
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
    {"start-timeout", NULL, 0, "SEC",
     "seconds for every host to start (default 30, or "
     "HOROVOD_START_TIMEOUT)",
     opt_start_timeout, NULL},
    {"kill-grace", NULL, 0, "SEC",
     "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)",
     opt_kill_grace, NULL},
    {"no-gpu-pinning", NULL, 0, NULL,
     "do not set CUDA_VISIBLE_DEVICES to one GPU per rank", opt_no_gpu, NULL},
    {"launcher", NULL, 0, "KIND",
     "how agents on other hosts start: slurm (srun, the default inside a "
     "Slurm allocation) or ssh (the default elsewhere)",
     opt_launcher, NULL},
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
    {"min-np", "--min-num-proc", 0, "N", ELASTIC_HELP, NULL, ELASTIC},
    {"max-np", "--max-num-proc", 0, "N", ELASTIC_HELP, NULL, ELASTIC},
    {"slots-per-host", NULL, 0, "N", ELASTIC_HELP, NULL, ELASTIC},
    {"elastic-timeout", NULL, 0, "SEC", ELASTIC_HELP, NULL, ELASTIC},
    {"reset-limit", NULL, 0, "N", ELASTIC_HELP, NULL, ELASTIC},
    {"blacklist-cooldown-range", NULL, 0, "MIN MAX", ELASTIC_HELP, NULL,
     ELASTIC},
    {"host-discovery-script", NULL, 0, "FILE", ELASTIC_HELP, NULL, ELASTIC},
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

/* "-np/--num-proc", "-H/--hosts" or "--hostfile": the option in errors. */
static void spellings(const struct hr_option *op, char *buf, size_t len)
{
    if (op->alias && op->alias[1] != '-')
        snprintf(buf, len, "%s/--%s", op->alias, op->name);
    else if (op->short_name)
        snprintf(buf, len, "-%c/--%s", op->short_name, op->name);
    else
        snprintf(buf, len, "--%s", op->name);
}

void hr_cli_help(FILE *out)
{
    fprintf(out,
            "%s\n\nStarts N copies of a command as the ranks of a "
            "Horovod job and streams their output.\n\nOptions:\n",
            USAGE);
    for (size_t i = 0; i < hr_noptions; i++) {
        const struct hr_option *op = &hr_options[i];
        const char *a = op->arg ? op->arg : "";
        const char *sp = op->arg ? " " : "";
        char left[96];
        int n = 0;
        if (op->help == NULL)
            continue;
        if (op->alias && op->alias[1] != '-')
            n = snprintf(left, sizeof(left), "%s, ", op->alias);
        else if (op->short_name)
            n = snprintf(left, sizeof(left), "-%c, ", op->short_name);
        n += snprintf(left + n, sizeof(left) - (size_t)n, "--%s%s%s", op->name,
                      sp, a);
        if (op->alias && op->alias[1] == '-')
            snprintf(left + n, sizeof(left) - (size_t)n, ", %s%s%s", op->alias,
                     sp, a);
        /* Long names get the help on a line of its own. */
        if (strlen(left) > 28)
            fprintf(out, "  %s\n  %-28s %s\n", left, "", op->help);
        else
            fprintf(out, "  %-28s %s\n", left, op->help);
    }
    fprintf(out, "\nThe command is everything after the options (or after "
                 "'--').\nSee horovodrun(1) for the environment given to "
                 "each rank, output and exit codes.\n");
}

/* Whether the len bytes at s name op with two dashes, fully (exact) or as
 * a prefix. */
static int long_match(const struct hr_option *op, const char *s, size_t len,
                      int exact)
{
    const char *names[2] = {op->name, NULL};
    if (op->alias && op->alias[1] == '-')
        names[1] = op->alias + 2;
    for (int k = 0; k < 2; k++)
        if (names[k] && strncmp(names[k], s, len) == 0 &&
            (!exact || names[k][len] == '\0'))
            return 1;
    return 0;
}

/*
 * The option that --word names: exactly, else as the prefix of one
 * option only (getopt_long and Python's argparse both take "--verb").
 */
static const struct hr_option *
find_long(const char *s, size_t len, const char *word, char *err, size_t errlen)
{
    const struct hr_option *found = NULL;
    int ambiguous = 0;
    for (size_t i = 0; i < hr_noptions; i++)
        if (long_match(&hr_options[i], s, len, 1))
            return &hr_options[i];
    for (size_t i = 0; len > 0 && i < hr_noptions; i++)
        if (long_match(&hr_options[i], s, len, 0)) {
            ambiguous |= found != NULL;
            found = &hr_options[i];
        }
    if (found && !ambiguous)
        return found;
    if (ambiguous) {
        const char *sep = "";
        size_t n = (size_t)snprintf(err, errlen,
                                    "option '--%.*s' is ambiguous; it could "
                                    "be ",
                                    (int)len, s);
        for (size_t i = 0; i < hr_noptions && n < errlen; i++)
            if (long_match(&hr_options[i], s, len, 0)) {
                n += (size_t)snprintf(err + n, errlen - n, "%s--%s", sep,
                                      hr_options[i].name);
                sep = ", ";
            }
    } else {
        snprintf(err, errlen, "unknown option '%.*s'; see horovodrun --help",
                 (int)(s - word + len), word);
    }
    return NULL;
}

/*
 * The option that a single-dash word names: one of Horovod's single-dash
 * long spellings (-np, -hostfile), or a one-letter option with its
 * argument attached or not (-H host:2, -Hhost:2, -p22). Anything else is
 * unknown: a cluster of one-letter options would make -hostfilex mean
 * -h -o -s ... . *val is the attached argument, *glued whether it follows
 * the letter without '='.
 */
static const struct hr_option *find_short(const char *word, const char **val,
                                          int *glued, char *err, size_t errlen)
{
    const char *eq = strchr(word, '=');
    size_t len = eq ? (size_t)(eq - word) : strlen(word);
    for (size_t i = 0; i < hr_noptions; i++) {
        const char *a = hr_options[i].alias;
        if (a && a[1] != '-' && strlen(a) == len &&
            strncmp(a, word, len) == 0) {
            *val = eq ? eq + 1 : NULL;
            return &hr_options[i];
        }
    }
    for (size_t i = 0; i < hr_noptions; i++) {
        const struct hr_option *op = &hr_options[i];
        if (op->short_name == 0 || op->short_name != word[1])
            continue;
        if (word[2] == '\0') {
            *val = NULL;
            return op;
        }
        if (op->arg == NULL)
            break; /* -vx is no -v */
        *glued = word[2] != '=';
        *val = word + 2 + !*glued;
        return op;
    }
    snprintf(err, errlen, "unknown option '%.*s'; see horovodrun --help",
             (int)len, word);
    return NULL;
}

/*
 * One walk over argv's options, applying each to o. Sets *next to the
 * index of the command. Returns an hr_cli_result.
 */
static int parse_words(struct hr_opts *o, int argc, char **argv, FILE *out,
                       int *next, char *err, size_t errlen)
{
    int i = 1;
    while (i < argc) {
        const char *a = argv[i], *val = NULL;
        const struct hr_option *op;
        int glued = 0;
        char name[96];

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* the command ("-" alone too, as for getopt) */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            op = find_long(a + 2, len, a, err, errlen);
            val = eq ? eq + 1 : NULL;
        } else {
            op = find_short(a, &val, &glued, err, errlen);
        }
        if (op == NULL)
            return HR_CLI_USAGE;
        spellings(op, name, sizeof(name));
        if (op->refused) {
            /* The spelling given, unless it was an abbreviation. */
            size_t al = op->alias ? strlen(op->alias) : 0;
            if (al && strncmp(a, op->alias, al) == 0 &&
                (a[al] == '\0' || a[al] == '='))
                snprintf(err, errlen, "%s: %s", op->alias, op->refused);
            else
                snprintf(err, errlen, "--%s: %s", op->name, op->refused);
            return HR_CLI_USAGE;
        }
        if (op->arg && val == NULL) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "option '%s' needs an argument", name);
                return HR_CLI_USAGE;
            }
            val = argv[++i];
        } else if (op->arg == NULL && val) {
            snprintf(err, errlen, "option '%s' takes no argument, got '%s'",
                     name, a);
            return HR_CLI_USAGE;
        }
        i++;
        if (strcmp(op->name, "help") == 0) {
            hr_cli_help(out);
            return HR_CLI_DONE;
        }
        if (strcmp(op->name, "version") == 0) {
            fprintf(out, "horovodrun %s\n", HVD_VERSION);
            return HR_CLI_DONE;
        }
        if (strcmp(op->name, "check-build") == 0) {
            check_build(out);
            return HR_CLI_DONE;
        }
        if (op->handler(o, val, err, errlen) != 0) {
            /* -prefix-timestampx reads as -p refix-timestampx: say so. */
            if (glued) {
                char why[256];
                snprintf(why, sizeof(why), "%s", err);
                snprintf(err, errlen, "'%s' reads as -%c %s: %s", a,
                         op->short_name, val, why);
            }
            return HR_CLI_USAGE;
        }
    }
    *next = i;
    return HR_CLI_RUN;
}

int hr_cli_apply(struct hr_opts *o, const char *name, const char *arg,
                 char *err, size_t errlen)
{
    for (size_t i = 0; i < hr_noptions; i++)
        if (strcmp(hr_options[i].name, name) == 0 && hr_options[i].handler)
            return hr_options[i].handler(o, arg, err, errlen) ? -1 : 0;
    snprintf(err, errlen, "no option --%s", name);
    return -1;
}

const char *hr_opts_keep(struct hr_opts *o, const char *s, size_t len)
{
    if (hvd_strvec_pushn(&o->strings, s, len) != 0)
        return NULL;
    return o->strings.v[o->strings.n - 1];
}

/* Everything back to the defaults but the owned strings, which earlier
 * values may still point to. */
static void opts_defaults(struct hr_opts *o)
{
    struct hvd_strvec strings = o->strings;
    hvd_strvec_close(&o->warnings);
    memset(o, 0, sizeof(*o));
    o->strings = strings;
    hvd_strvec_init(&o->warnings);
    o->gpu_pinning = 1;
    o->kill_grace = 5;
}

void hr_opts_close(struct hr_opts *o)
{
    if (o == NULL)
        return;
    hvd_strvec_close(&o->strings);
    hvd_strvec_close(&o->warnings);
}

static double env_seconds(const char *name, double dflt, int *bad)
{
    const char *v = getenv(name);
    char *end;
    if (v == NULL || v[0] == '\0')
        return dflt;
    double d = strtod(v, &end);
    if (*end != '\0' || !isfinite(d) || d <= 0 || d > 86400 * 7) {
        *bad = 1;
        return dflt;
    }
    return d;
}

/*
 * Reads the config file under the command line: the options are applied
 * once more on top of the file, so that they win whatever their place.
 */
static int apply_config(struct hr_opts *o, int argc, char **argv, FILE *out,
                        int *next, char *err, size_t errlen)
{
    const char *path = o->config_file;
    int mpi = o->mpi, gloo = o->gloo;
    opts_defaults(o);
    if (hr_config_load(o, path, err, errlen) != 0)
        return HR_CLI_USAGE;
    int rc = parse_words(o, argc, argv, out, next, err, errlen);
    /* The file's controller counts only when the command line names
     * none, as in Horovod. */
    if (mpi || gloo) {
        o->mpi = mpi;
        o->gloo = gloo;
    }
    return rc;
}

int hr_cli_parse(struct hr_opts *o, int argc, char **argv, FILE *out, char *err,
                 size_t errlen)
{
    int bad_env = 0, next = argc, rc;

    memset(o, 0, sizeof(*o));
    hvd_strvec_init(&o->strings);
    opts_defaults(o);
    rc = parse_words(o, argc, argv, out, &next, err, errlen);
    if (rc == HR_CLI_RUN && o->config_file)
        rc = apply_config(o, argc, argv, out, &next, err, errlen);
    if (rc != HR_CLI_RUN)
        return rc;
    o->cmd = argv + next;
    o->cmdc = argc - next;

    if (o->start_timeout == 0) {
        o->start_timeout = env_seconds(HVD_ENV_START_TIMEOUT, 30, &bad_env);
        if (bad_env) {
            snprintf(err, errlen,
                     HVD_ENV_START_TIMEOUT
                     " must be a positive number of seconds, got '%s'",
                     getenv(HVD_ENV_START_TIMEOUT));
            return HR_CLI_USAGE;
        }
    }

    if (o->hosts && o->hostfile) {
        snprintf(err, errlen,
                 "-H/--hosts and --hostfile cannot be used "
                 "together; pick one");
        return HR_CLI_USAGE;
    }
    if (o->mpi && o->gloo) {
        snprintf(err, errlen,
                 "--mpi and --gloo cannot be used together; pick one");
        return HR_CLI_USAGE;
    }
    if (o->mpi_args && !o->mpi) {
        snprintf(err, errlen, "--mpi-args needs --mpi");
        return HR_CLI_USAGE;
    }
    int in_slurm = hr_slurm_nodelist_var() != NULL;
    /* Still AUTO here unless --launcher was given. */
    if (o->launcher != HR_LAUNCH_AUTO && o->mpi) {
        snprintf(err, errlen,
                 "--launcher cannot be used with --mpi: mpirun starts its "
                 "own daemons");
        return HR_CLI_USAGE;
    }
    if (o->launcher == HR_LAUNCH_SLURM && !in_slurm) {
        snprintf(err, errlen,
                 "--launcher slurm needs a Slurm allocation (neither "
                 "SLURM_JOB_NODELIST nor SLURM_NODELIST is set); run "
                 "horovodrun under salloc or sbatch");
        return HR_CLI_USAGE;
    }
    if (o->launcher == HR_LAUNCH_AUTO)
        o->launcher = in_slurm ? HR_LAUNCH_SLURM : HR_LAUNCH_SSH;
    /* Inside an allocation without a host list, -np defaults to the
     * allocation's tasks, as with srun and mpirun. */
    if (o->np == 0 && !(in_slurm && !o->hosts && !o->hostfile)) {
        snprintf(err, errlen,
                 "-np is required: the number of processes to "
                 "start, e.g. horovodrun -np 4 ./train");
        return HR_CLI_USAGE;
    }
    if (o->cmdc == 0) {
        snprintf(err, errlen, "no command given; " USAGE);
        return HR_CLI_USAGE;
    }
    return HR_CLI_RUN;
}
