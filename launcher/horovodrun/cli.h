/* horovodrun's command line: one option table, parsing, --help. */
#ifndef HR_CLI_H
#define HR_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "launcher/lib/bind.h"
#include "launcher/lib/strvec.h"

/* How agents on other hosts are started (--launcher). */
enum hr_launcher {
    HR_LAUNCH_AUTO = 0, /* slurm in an allocation, else rsh or ssh */
    HR_LAUNCH_SSH = 1,
    HR_LAUNCH_SLURM = 2,
    HR_LAUNCH_RSH = 3 /* --rsh-agent, or OMPI_MCA_plm_rsh_agent */
};

/* --tree-fanout's default: Open MPI's tree (routed_radix) takes 64. */
#define HR_TREE_FANOUT 32

/*
 * Strings point into argv, into the --config-file's values or into
 * strings (all owned by the struct until hr_opts_close). The runtime's
 * settings are kept as the text horovodrun exports (see
 * hr_cli_export_env); NULL leaves the variable as the environment has it.
 * Switches that Horovod exports both ways hold "1" or "0".
 */
struct hr_opts {
    int np;               /* 0 when -np was not given */
    const char *hosts;    /* -H */
    const char *hostfile; /* --hostfile */
    const char *output_dir;
    double start_timeout; /* seconds */
    double kill_grace;    /* seconds */
    int kill_grace_set;   /* --kill-grace was given */
    int gpu_pinning;
    enum hr_bind bind; /* --bind-to */
    int bind_set;      /* --bind-to was given */
    int verbose;
    int ssh_port;              /* 0: the SSH default, 22 */
    const char *identity_file; /* -i */
    int ssh_accept_new;        /* add unknown host keys */
    const char *agent_path;    /* hvd-agent on remote hosts */
    /* Agents horovodrun reaches itself over SSH; each starts as many
     * more (--tree-fanout; 0: all from horovodrun). */
    int tree_fanout;
    /* The remote-exec command of --launcher rsh, words split at spaces. */
    const char *rsh_agent;
    int rsh_tree; /* it works on every host: agents may run it */
    /* "eth0,eth1" as given (repeated options joined by commas); the
     * first interface gives the rendezvous address. */
    const char *network_interfaces;
    const char *rendezvous_addr;
    const char *config_file;
    int prefix_timestamp;     /* time in front of every rank line */
    const char *output_ranks; /* --output-ranks, checked for syntax */
    int color;                /* enum hr_color */
    int no_tty_status;        /* --no-tty-status */
    int detach;               /* --detach */
    int disable_cache;        /* accepted: there is no cache to disable */
    int no_gloo_rendezvous;   /* no Gloo HTTP store for real Horovod */
    int tcp;                  /* --tcp */
    const char *binding_args; /* mpirun's binding under --mpi */
    const char *fusion_threshold_mb; /* MB; exported in bytes */
    const char *cycle_time_ms;
    const char *cache_capacity;
    const char *hierarchical;           /* allreduce: "1", "0" */
    const char *hierarchical_allgather; /* "1", "0" */
    const char *torus_allreduce;        /* "1", "0" */
    const char *autotune;               /* "1", "0" */
    const char *autotune_log_file;
    const char *autotune_warmup_samples;
    const char *autotune_steps_per_sample;
    const char *autotune_bayes_opt_max_samples;
    const char *autotune_gaussian_process_noise;
    const char *timeline;
    const char *timeline_mark_cycles; /* "1", "0" */
    const char *stall_check_disable;  /* "1", "0" */
    const char *stall_warn_s;
    const char *stall_shutdown_s;
    const char *mpi_threads_disable; /* "1", "0" */
    const char *num_nccl_streams;
    const char *thread_affinity;
    const char *gloo_timeout_s;
    const char *log_level;
    const char *log_hide_time; /* "1", "0" */
    int launcher;              /* enum hr_launcher; never AUTO after parsing */
    int mpi;                   /* --mpi: run the ranks with mpirun */
    int gloo;             /* --gloo: horovodrun's own launcher, said aloud */
    const char *mpi_args; /* --mpi-args, split like a shell would */
    /*
     * Elastic training, in Horovod's meanings. Parsing checks each value
     * and, in elastic mode, how they fit together; outside it the other
     * elastic options are ignored with a warning, as Horovod ignores them.
     */
    int elastic; /* --host-discovery-script or --min-np was given */
    int min_np;  /* 0 when not given; in elastic mode then -np */
    int max_np;  /* 0: unbounded */
    /* Slots of a discovered host whose line has no ":slots"; 0 when not
     * given (such a line is then an error). */
    int slots_per_host;
    /* Seconds to wait for enough slots after the hosts change. In elastic
     * mode, when not given: HOROVOD_ELASTIC_TIMEOUT, else 600. */
    double elastic_timeout;
    int reset_limit; /* resizes the job may go through; -1: no limit */
    /* --blacklist-cooldown-range in seconds, checked to be within
     * HR_BLACKLIST_COOLDOWN_MIN_S..MAX_S with min <= max; 0 and 0: none,
     * a failed host stays out for good. */
    int cooldown_min, cooldown_max;
    /* A path checked to be an executable file (a name without '/' is
     * the file in the current directory: nothing searches PATH). */
    const char *discovery_script;
    char **cmd; /* the command and its arguments, NULL-terminated */
    int cmdc;
    struct hvd_strvec strings;  /* owned values the fields may point to */
    struct hvd_strvec warnings; /* one line each, for the caller to print */
};

struct hr_option {
    const char *name;  /* long name without "--" */
    const char *alias; /* another spelling, "-np" or "--min-num-proc" */
    char short_name;   /* or 0 */
    /* Argument name for --help, NULL if none; two names ("MIN MAX")
     * take the next two words, joined by a space for the handler. */
    const char *arg;
    const char *help; /* NULL: a deprecated spelling left out of --help */
    int (*handler)(struct hr_opts *o, const char *arg, char *err,
                   size_t errlen);
    /* Set for the options this horovodrun refuses (jsrun): why, after
     * the option's name, in the usage error. */
    const char *refused;
};

/* The table that --help, the parser and the man page test read. */
extern const struct hr_option hr_options[];
extern const size_t hr_noptions;

enum hr_cli_result {
    HR_CLI_RUN = 0,  /* options are valid: run the job */
    HR_CLI_DONE = 1, /* --help or --version was printed: exit 0 */
    HR_CLI_USAGE = 2 /* err holds the problem: exit 2 */
};

/*
 * Parses argv into o, which hr_opts_close frees even after an error
 * (argv is neither changed nor freed and must outlive o). Parsing stops
 * at the first word that is not an option, or after "--": the command.
 * A --config-file is read under the command line, whose options win
 * whatever their order. Environment defaults (HOROVOD_START_TIMEOUT,
 * HOROVOD_ELASTIC_TIMEOUT) are applied last. Help and version go to out.
 */
int hr_cli_parse(struct hr_opts *o, int argc, char **argv, FILE *out, char *err,
                 size_t errlen);
void hr_opts_close(struct hr_opts *o);
void hr_cli_help(FILE *out);

/*
 * Runs the option with long name name on arg (NULL for a switch), as
 * --config-file does for its keys. 0, or -1 with the option's one-line
 * complaint in err.
 */
int hr_cli_apply(struct hr_opts *o, const char *name, const char *arg,
                 char *err, size_t errlen);

/* A copy of s (len bytes) that o owns, or NULL without memory. */
const char *hr_opts_keep(struct hr_opts *o, const char *s, size_t len);

/* cli_launcher.c: settles o->launcher (never AUTO after it) and
 * o->rsh_agent. 0, or -1 with one line in err. */
int hr_cli_launcher(struct hr_opts *o, int in_slurm, char *err, size_t errlen);

/*
 * Sets the variables Horovod's horovodrun sets for its ranks from the
 * runtime options, in Horovod's units (--fusion-threshold-mb in bytes),
 * in this process's environment, which the ranks inherit. 0, or -1 with
 * errno set by setenv.
 */
int hr_cli_export_env(const struct hr_opts *o);

#endif
