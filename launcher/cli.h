/* horovodrun's command line: one option table, parsing, --help. */
#ifndef HR_CLI_H
#define HR_CLI_H

#include <stddef.h>
#include <stdio.h>

/* How agents on other hosts are started (--launcher). */
enum hr_launcher {
    HR_LAUNCH_AUTO = 0, /* slurm inside an allocation, else ssh */
    HR_LAUNCH_SSH = 1,
    HR_LAUNCH_SLURM = 2
};

struct hr_opts {
    int np;               /* 0 when -np was not given */
    const char *hosts;    /* -H */
    const char *hostfile; /* --hostfile */
    const char *output_dir;
    double start_timeout; /* seconds */
    double kill_grace;    /* seconds */
    int kill_grace_set;   /* --kill-grace was given */
    int gpu_pinning;
    int verbose;
    int ssh_port;              /* 0: the SSH default, 22 */
    const char *identity_file; /* -i */
    int ssh_accept_new;        /* add unknown host keys */
    const char *agent_path;    /* hvd-agent on remote hosts */
    const char *network_interface;
    const char *rendezvous_addr;
    const char *fusion_threshold_mb; /* exported to the ranks */
    const char *cycle_time_ms;
    const char *cache_capacity;
    const char *stall_warn_s;
    const char *stall_shutdown_s;
    int no_stall_check;
    const char *timeline;
    int timeline_mark_cycles;
    const char *hierarchical; /* "1", "0", or NULL: the runtime decides */
    const char *log_level;
    int launcher;         /* enum hr_launcher; never AUTO after parsing */
    int mpi;              /* --mpi: run the ranks with mpirun */
    int gloo;             /* --gloo: horovodrun's own launcher, said aloud */
    const char *mpi_args; /* --mpi-args, split like a shell would */
    char **cmd;           /* the command and its arguments, NULL-terminated */
    int cmdc;
};

struct hr_option {
    const char *name;  /* long name without "--" */
    const char *alias; /* another spelling, e.g. "-np"; or NULL */
    char short_name;   /* or 0 */
    const char *arg;   /* argument name for --help, NULL if none */
    const char *help;
    int (*handler)(struct hr_opts *o, const char *arg, char *err,
                   size_t errlen);
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
 * Parses argv into o (argv may be reordered, never freed). Environment
 * defaults (HOROVOD_START_TIMEOUT) are applied first. Help and version go
 * to out.
 */
int hr_cli_parse(struct hr_opts *o, int argc, char **argv, FILE *out, char *err,
                 size_t errlen);
void hr_cli_help(FILE *out);

#endif
