/* horovodrun's option table and its getopt_long parser. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
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
SET(opt_no_stall, no_stall_check, 1)
SET(opt_mark_cycles, timeline_mark_cycles, 1)
SET(opt_hier_on, hierarchical, "1")
SET(opt_hier_off, hierarchical, "0")
SET(opt_accept_new, ssh_accept_new, 1)
SET(opt_mpi, mpi, 1)
SET(opt_gloo, gloo, 1)
SET(opt_verbose, verbose, 1)
#undef SET

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
STORE(opt_network_interface, network_interface)
STORE(opt_rendezvous_addr, rendezvous_addr)
STORE(opt_timeline, timeline)
STORE(opt_mpi_args, mpi_args)
#undef STORE

/* A non-negative decimal number for a tuning variable of the ranks. */
static int check_number(const char *what, const char *arg, char *err, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end != '\0' || !isfinite(v) || v < 0 ||
        v > 1e9) {
        snprintf(err, n, "%s must be a number of at least 0, got '%s'", what,
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
        return check_number(name, arg, err, n);                                \
    }
NUMBER(opt_fusion, fusion_threshold_mb, "--fusion-threshold-mb")
NUMBER(opt_cycle, cycle_time_ms, "--cycle-time-ms")
NUMBER(opt_cache, cache_capacity, "--cache-capacity")
NUMBER(opt_stall_warn, stall_warn_s, "--stall-check-warning-time-seconds")
NUMBER(opt_stall_shutdown, stall_shutdown_s,
       "--stall-check-shutdown-time-seconds")
#undef NUMBER

static int opt_log_level(struct hr_opts *o, const char *arg, char *err,
                         size_t n)
{
    static const char *const levels[] = {"trace",   "debug", "info",
                                         "warning", "error", "fatal"};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcmp(arg, levels[i]) == 0) {
            o->log_level = arg;
            return 0;
        }
    snprintf(err, n,
             "--log-level must be trace, debug, info, warning, error or "
             "fatal, got '%s'",
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

/* --help, --version and --check-build are handled by the parser itself. */
const struct hr_option hr_options[] = {
    {"num-proc", "-np", 0, "N", "number of processes (ranks) to start", opt_np},
    {"hosts", NULL, 'H', "HOSTS",
     "hosts and slots, host:slots[,host:slots...]; default localhost:N",
     opt_hosts},
    {"hostfile", NULL, 0, "FILE",
     "file with one 'host slots=N' per line ('#' comments allowed)",
     opt_hostfile},
    {"output-filename", NULL, 0, "DIR",
     "also write each rank's raw output to DIR/rank.N/stdout and stderr",
     opt_output},
    {"start-timeout", NULL, 0, "SEC",
     "seconds for every host to start (default 30, or "
     "HOROVOD_START_TIMEOUT)",
     opt_start_timeout},
    {"kill-grace", NULL, 0, "SEC",
     "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)",
     opt_kill_grace},
    {"no-gpu-pinning", NULL, 0, NULL,
     "do not set CUDA_VISIBLE_DEVICES to one GPU per rank", opt_no_gpu},
    {"launcher", NULL, 0, "KIND",
     "how agents on other hosts start: slurm (srun, the default inside a "
     "Slurm allocation) or ssh (the default elsewhere)",
     opt_launcher},
    {"ssh-port", NULL, 'p', "PORT", "SSH port of the remote hosts (default 22)",
     opt_ssh_port},
    {"ssh-identity-file", NULL, 'i', "FILE",
     "private key to try after ssh-agent, before ~/.ssh/id_*", opt_identity},
    {"ssh-accept-new", NULL, 0, NULL,
     "add unknown host keys to ~/.ssh/known_hosts (changed keys are "
     "always refused)",
     opt_accept_new},
    {"agent-path", NULL, 0, "PATH",
     "hvd-agent on remote hosts (default: the same path as here)",
     opt_agent_path},
    {"network-interface", NULL, 0, "IF",
     "hand ranks the rendezvous address of this interface",
     opt_network_interface},
    {"rendezvous-addr", NULL, 0, "ADDR",
     "hand ranks this rendezvous address (default: the route to the hosts)",
     opt_rendezvous_addr},
    {"fusion-threshold-mb", NULL, 0, "MB",
     "fuse ready allreduces up to MB mebibytes (default 128; 0 disables); "
     "sets HOROVOD_FUSION_THRESHOLD",
     opt_fusion},
    {"cycle-time-ms", NULL, 0, "MS",
     "least time between negotiation cycles (default 1); sets "
     "HOROVOD_CYCLE_TIME",
     opt_cycle},
    {"cache-capacity", NULL, 0, "N",
     "requests the response cache remembers (default 1024; 0 turns it "
     "off); sets HOROVOD_CACHE_CAPACITY",
     opt_cache},
    {"stall-check-warning-time-seconds", NULL, 0, "SEC",
     "warn when ranks wait this long for others' tensors (default 60)",
     opt_stall_warn},
    {"stall-check-shutdown-time-seconds", NULL, 0, "SEC",
     "fail such tensors after this long (default 0: never)",
     opt_stall_shutdown},
    {"no-stall-check", NULL, 0, NULL, "turn the stall inspector off",
     opt_no_stall},
    {"timeline-filename", NULL, 0, "FILE",
     "rank 0 writes a Chrome trace of every tensor's phases to FILE",
     opt_timeline},
    {"timeline-mark-cycles", NULL, 0, NULL,
     "mark negotiation cycles in the timeline", opt_mark_cycles},
    {"hierarchical-allreduce", NULL, 0, NULL,
     "across hosts, reduce within each host through shared memory and "
     "between one leader per host (the default when hosts run several "
     "ranks); sets HOROVOD_HIERARCHICAL_ALLREDUCE=1",
     opt_hier_on},
    {"no-hierarchical-allreduce", NULL, 0, NULL,
     "one TCP ring through all ranks instead; sets "
     "HOROVOD_HIERARCHICAL_ALLREDUCE=0",
     opt_hier_off},
    {"log-level", NULL, 0, "LEVEL",
     "libhvd's log level (trace, debug, info, warning, error, fatal; "
     "default warning); debug names each rank's transport; sets "
     "HOROVOD_LOG_LEVEL",
     opt_log_level},
    {"mpi", NULL, 0, NULL,
     "run the ranks with Open MPI's mpirun instead of horovodrun's own "
     "launcher; libhvd then uses MPI",
     opt_mpi},
    {"gloo", NULL, 0, NULL,
     "run the ranks with horovodrun's own launcher (the default)", opt_gloo},
    {"mpi-args", NULL, 0, "ARGS",
     "more arguments for mpirun under --mpi, split into words as a shell "
     "would",
     opt_mpi_args},
    {"verbose", NULL, 0, NULL,
     "print what horovodrun does (under --mpi, the mpirun command)",
     opt_verbose},
    {"check-build", "-cb", 0, NULL,
     "print which controllers and tensor operations this build has and "
     "exit",
     NULL},
    {"version", NULL, 'v', NULL, "print the version and exit", NULL},
    {"help", NULL, 'h', NULL, "print this help and exit", NULL},
};
const size_t hr_noptions = sizeof(hr_options) / sizeof(hr_options[0]);

void hr_cli_help(FILE *out)
{
    fprintf(out,
            "%s\n\nStarts N copies of a command as the ranks of a "
            "Horovod job and streams their output.\n\nOptions:\n",
            USAGE);
    for (size_t i = 0; i < hr_noptions; i++) {
        const struct hr_option *op = &hr_options[i];
        char left[64];
        int n = 0;
        if (op->alias)
            n = snprintf(left, sizeof(left), "%s, ", op->alias);
        else if (op->short_name)
            n = snprintf(left, sizeof(left), "-%c, ", op->short_name);
        snprintf(left + n, sizeof(left) - (size_t)n, "--%s%s%s", op->name,
                 op->arg ? " " : "", op->arg ? op->arg : "");
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

static const struct hr_option *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < hr_noptions; i++)
        if (strlen(hr_options[i].name) == len &&
            strncmp(hr_options[i].name, name, len) == 0)
            return &hr_options[i];
    return NULL;
}

static const struct hr_option *find_short(char c)
{
    for (size_t i = 0; i < hr_noptions; i++)
        if (c && hr_options[i].short_name == c)
            return &hr_options[i];
    return NULL;
}

/*
 * getopt_long knows no single-dash long options, so "-np" is renamed to
 * "--num-proc" before it runs, but only up to the command: an "-np" that
 * belongs to the user's program must stay as it is.
 */
static void rename_aliases(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        const struct hr_option *op = NULL;
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
            return;
        for (size_t k = 0; k < hr_noptions; k++) {
            if (hr_options[k].alias && strcmp(a, hr_options[k].alias) == 0) {
                static char buf[64];
                op = &hr_options[k];
                snprintf(buf, sizeof(buf), "--%s", op->name);
                argv[i] = buf;
            }
        }
        if (op == NULL && a[1] == '-') {
            const char *name = a + 2;
            if (strchr(name, '=') == NULL)
                op = find_long(name, strlen(name));
        } else if (op == NULL && a[2] == '\0') {
            op = find_short(a[1]);
        }
        if (op && op->arg)
            i++; /* skip the option's argument */
    }
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

int hr_cli_parse(struct hr_opts *o, int argc, char **argv, FILE *out, char *err,
                 size_t errlen)
{
    struct option longopts[sizeof(hr_options) / sizeof(hr_options[0]) + 1];
    char shortopts[2 * sizeof(hr_options) / sizeof(hr_options[0]) + 4];
    size_t ns = 0;
    int bad_env = 0;

    memset(o, 0, sizeof(*o));
    o->gpu_pinning = 1;
    o->kill_grace = 5;
    /* '+': stop at the first non-option, the user's command. */
    shortopts[ns++] = '+';
    shortopts[ns++] = ':';
    for (size_t i = 0; i < hr_noptions; i++) {
        const struct hr_option *op = &hr_options[i];
        longopts[i] =
            (struct option){op->name, op->arg ? required_argument : no_argument,
                            NULL, 256 + (int)i};
        if (op->short_name) {
            shortopts[ns++] = op->short_name;
            if (op->arg)
                shortopts[ns++] = ':';
        }
    }
    longopts[hr_noptions] = (struct option){0};
    shortopts[ns] = '\0';

    rename_aliases(argc, argv);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const struct hr_option *op = NULL;
        if (c >= 256)
            op = &hr_options[c - 256];
        else if (c != '?' && c != ':')
            op = find_short((char)c);
        if (c == ':' || c == '?') {
            char shortname[3] = {'-', (char)optopt, '\0'};
            const char *bad =
                optopt > 0 && optopt < 256 ? shortname : argv[optind - 1];
            if (c == ':') {
                const struct hr_option *m = find_long(bad + 2, strlen(bad + 2));
                if (m && m->alias)
                    snprintf(err, errlen, "option '%s/%s' needs an argument",
                             m->alias, bad);
                else
                    snprintf(err, errlen, "option '%s' needs an argument", bad);
            } else
                snprintf(err, errlen,
                         "unknown option '%s'; see horovodrun --help", bad);
            return HR_CLI_USAGE;
        }
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
        if (op->handler(o, optarg, err, errlen) != 0)
            return HR_CLI_USAGE;
    }
    o->cmd = argv + optind;
    o->cmdc = argc - optind;

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
