/* horovodrun's command line: the parser over the option table, --help. */
#include "launcher/horovodrun/cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/envc.h"
#include "launcher/horovodrun/config.h"
#include "launcher/lib/clusterhosts.h"
#include "hvd_build.h"
#include "hvd_version.h"
#include "launcher/link/srun.h"

#define USAGE                                                                  \
    "usage: horovodrun -np N [-H host:slots,...] [options] command "           \
    "[args...]"

/* What this build of horovodrun and libhvd has, in Horovod's format. */
static void check_build(FILE *out)
{
    fprintf(out,
            "horovodrun %s:\n\n"
            "Available Controllers:\n"
            "    [X] horovodrun (TCP rendezvous, SSH)\n"
            "    [X] Gloo (Horovod's HTTP rendezvous, for ranks that link "
            "real Horovod)\n"
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
    fprintf(out,
            "\nThe command is everything after the options (or after "
            "'--').\n\nJobs started with --detach:\n"
            "  horovodrun ps [--prune]      list them (--prune: forget the "
            "ended ones)\n"
            "  horovodrun logs [-f] [--rank R] [--tail N] JOB\n"
            "                               print their output kept so far "
            "(-f: and follow it)\n"
            "  horovodrun attach JOB        logs -f; Ctrl-C stops the job\n"
            "  horovodrun stop [--now] JOB  stop it as SIGTERM would (--now: "
            "kill its ranks)\n"
            "\nSee horovodrun(1) for the environment given to "
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
            snprintf(err, errlen, "--%s: %s", op->name, op->refused);
            return HR_CLI_USAGE;
        }
        /* Words the option takes: "MIN MAX" is two (never after '='). */
        int words = op->arg == NULL ? 0 : strchr(op->arg, ' ') ? 2 : 1;
        if (words == 2 && val) {
            snprintf(err, errlen, "option '%s' takes two words, %s, not '='",
                     name, op->arg);
            return HR_CLI_USAGE;
        }
        if (words && val == NULL) {
            if (i + words >= argc) {
                snprintf(err, errlen, "option '%s' needs %s", name,
                         words == 2 ? "two arguments" : "an argument");
                return HR_CLI_USAGE;
            }
            if (words == 2 && hvd_strvec_pushf(&o->strings, "%s %s",
                                               argv[i + 1], argv[i + 2])) {
                snprintf(err, errlen, "out of memory");
                return HR_CLI_USAGE;
            }
            val = words == 2 ? o->strings.v[o->strings.n - 1] : argv[i + 1];
            i += words;
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
    o->bind = HR_BIND_AUTO;
    o->kill_grace = 5;
    o->tree_fanout = HR_TREE_FANOUT;
    o->reset_limit = -1;
}

void hr_opts_close(struct hr_opts *o)
{
    if (o == NULL)
        return;
    hvd_strvec_close(&o->strings);
    hvd_strvec_close(&o->warnings);
}

/* Sets *field, unless an option did, from the variable name or else to
 * dflt seconds. 0, or -1 with err set when the variable is no number. */
static int env_seconds(double *field, const char *name, double dflt, char *err,
                       size_t errlen)
{
    const char *v = getenv(name);
    char *end;
    if (*field != 0)
        return 0;
    *field = dflt;
    if (v == NULL || v[0] == '\0')
        return 0;
    double d = strtod(v, &end);
    if (*end != '\0' || !isfinite(d) || d <= 0 || d > 86400 * 7) {
        snprintf(err, errlen,
                 "%s must be a positive number of seconds, got '%s'", name, v);
        return -1;
    }
    *field = d;
    return 0;
}

/*
 * Elastic mode as Horovod's launch.py decides it: --host-discovery-script
 * or --min-np. Outside it Horovod ignores the other elastic options; so
 * does this, with a warning. 0, or -1 with err set.
 */
static int check_elastic(struct hr_opts *o, int in_slurm, char *err,
                         size_t errlen)
{
    const struct {
        const char *name;
        int given;
    } unused[] = {
        {"--max-np", o->max_np != 0},
        {"--slots-per-host", o->slots_per_host != 0},
        {"--elastic-timeout", o->elastic_timeout != 0},
        {"--reset-limit", o->reset_limit >= 0},
        {"--blacklist-cooldown-range", o->cooldown_min != 0},
    };
    o->elastic = o->discovery_script != NULL || o->min_np != 0;
    for (size_t i = 0; !o->elastic && i < sizeof(unused) / sizeof(unused[0]);
         i++)
        if (unused[i].given &&
            hvd_strvec_pushf(&o->warnings,
                             "%s is ignored without --min-np or "
                             "--host-discovery-script (elastic training), as "
                             "in Horovod",
                             unused[i].name) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    if (!o->elastic)
        return 0;
    /* Horovod's elastic driver is Gloo's and leaves --mpi unread; refused
     * here rather than ignored. */
    if (o->mpi) {
        snprintf(err, errlen,
                 "--mpi cannot be used with elastic training (--min-np or "
                 "--host-discovery-script): Horovod's elastic mode also "
                 "requires Gloo; drop --mpi to use horovodrun's own launcher");
        return -1;
    }
    /* One argparse group in Horovod: the script lists the hosts. */
    if (o->discovery_script && (o->hosts || o->hostfile)) {
        snprintf(err, errlen,
                 "--host-discovery-script cannot be used with %s: the script "
                 "lists the hosts; pick one",
                 o->hosts ? "-H/--hosts" : "--hostfile");
        return -1;
    }
    /*
     * --min-np with -H or --hostfile is a fixed set of hosts that may
     * fail (Horovod also wants 2 of them at least; here one host runs,
     * and its failure ends the job). Without either, localhost alone has
     * nothing to fail over to: refused, as Horovod refuses it. A Slurm
     * allocation is a host list too.
     */
    if (!o->discovery_script && !o->hosts && !o->hostfile && !in_slurm) {
        snprintf(err, errlen,
                 "--min-np without --host-discovery-script needs the hosts "
                 "that may fail, in -H or --hostfile: Horovod does not run "
                 "elastic jobs on localhost alone");
        return -1;
    }
    /* argparse requires -np in elastic mode too. */
    if (o->np == 0) {
        snprintf(err, errlen,
                 "-np is required in elastic mode: the ranks needed to start "
                 "(--min-np defaults to it), e.g. horovodrun -np 4 --min-np 2 "
                 "--host-discovery-script ./hosts.sh ./train");
        return -1;
    }
    if (o->min_np == 0)
        o->min_np = o->np;
    if (o->min_np > o->np) {
        snprintf(err, errlen,
                 "--min-np %d is more than -np %d; lower --min-np or raise -np",
                 o->min_np, o->np);
        return -1;
    }
    if (o->max_np != 0 && o->np > o->max_np) {
        snprintf(err, errlen,
                 "-np %d is more than --max-np %d; lower -np or raise --max-np",
                 o->np, o->max_np);
        return -1;
    }
    return env_seconds(&o->elastic_timeout, HVD_ENV_ELASTIC_TIMEOUT, 600, err,
                       errlen);
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
    int next = argc, rc;

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

    if (env_seconds(&o->start_timeout, HVD_ENV_START_TIMEOUT, 30, err,
                    errlen) != 0)
        return HR_CLI_USAGE;

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
    if (o->bind_set && o->mpi) {
        snprintf(err, errlen,
                 "--bind-to cannot be used with --mpi: mpirun binds its "
                 "ranks; give its options with --binding-args");
        return HR_CLI_USAGE;
    }
    int in_slurm = hr_slurm_nodelist_var() != NULL;
    if (hr_cli_launcher(o, in_slurm, err, errlen) != 0)
        return HR_CLI_USAGE;
    if (check_elastic(o, in_slurm, err, errlen) != 0)
        return HR_CLI_USAGE;
    /* Inside an allocation or a batch job without a host list, -np
     * defaults to all its slots, as with srun and mpirun. */
    if (o->np == 0 && !((in_slurm || hvd_cluster_hosts_var() != NULL) &&
                        !o->hosts && !o->hostfile)) {
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
