/* Unit tests for the option table and parser (horovodrun/cli.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/horovodrun/cli.h"
#include "tmppath.h"

static char errbuf[512];
static struct hr_opts o;
static char *argv_[64];
static int argc_;

/* Every variable hr_cli_export_env may set, cleared before each test so
 * that the machine's environment cannot leak into the checks. */
static const char *const exported[] = {
    "HOROVOD_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME",
    "HOROVOD_CACHE_CAPACITY",
    "HOROVOD_HIERARCHICAL_ALLREDUCE",
    "HOROVOD_HIERARCHICAL_ALLGATHER",
    "HOROVOD_TORUS_ALLREDUCE",
    "HOROVOD_AUTOTUNE",
    "HOROVOD_AUTOTUNE_LOG",
    "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
    "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
    "HOROVOD_TIMELINE",
    "HOROVOD_TIMELINE_MARK_CYCLES",
    "HOROVOD_STALL_CHECK_DISABLE",
    "HOROVOD_STALL_CHECK_TIME_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
    "HOROVOD_MPI_THREADS_DISABLE",
    "HOROVOD_NUM_NCCL_STREAMS",
    "HOROVOD_THREAD_AFFINITY",
    "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_LOG_LEVEL",
    "HOROVOD_LOG_HIDE_TIME",
    "NCCL_IB_DISABLE",
};

static void setup(void)
{
    unsetenv("HOROVOD_START_TIMEOUT");
    unsetenv("HOROVOD_ELASTIC_TIMEOUT");
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_NODELIST");
    for (size_t i = 0; i < sizeof(exported) / sizeof(exported[0]); i++)
        unsetenv(exported[i]);
}

static void teardown(void)
{
    hr_opts_close(&o);
}

TestSuite(cli, .init = setup, .fini = teardown);

/* Parses a NULL-terminated argument list (argv[0] is added) into o. */
static int parse(const char *const *args)
{
    argc_ = 0;
    argv_[argc_++] = "horovodrun";
    for (; *args; args++)
        argv_[argc_++] = (char *)*args;
    argv_[argc_] = NULL;
    hr_opts_close(&o);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = hr_cli_parse(&o, argc_, argv_, devnull, errbuf, sizeof(errbuf));
    fclose(devnull);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(cli, defaults_and_command)
{
    cr_assert_eq(parse(ARGS("-np", "4", "python3", "train.py", "-np", "9")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.np, 4);
    cr_expect_eq(o.start_timeout, 30);
    cr_expect_eq(o.kill_grace, 5);
    cr_expect_eq(o.gpu_pinning, 1);
    cr_expect_eq(o.bind, HR_BIND_AUTO);
    cr_expect_null(o.hosts);
    cr_assert_eq(o.cmdc, 4);
    cr_expect_str_eq(o.cmd[0], "python3");
    /* The program's own -np is left alone. */
    cr_expect_str_eq(o.cmd[2], "-np");
    cr_expect_eq(o.warnings.n, 0);
}

Test(cli, every_option)
{
    cr_assert_eq(parse(ARGS("--num-proc", "2", "-H", "a:1,b:1",
                            "--output-filename", "logs", "--start-timeout",
                            "2.5", "--kill-grace", "1", "--no-gpu-pinning",
                            "--verbose", "--bind-to", "none", "--", "-x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.np, 2);
    cr_expect_str_eq(o.hosts, "a:1,b:1");
    cr_expect_str_eq(o.output_dir, "logs");
    cr_expect_eq(o.start_timeout, 2.5);
    cr_expect_eq(o.kill_grace, 1);
    cr_expect_eq(o.gpu_pinning, 0);
    cr_expect_eq(o.bind, HR_BIND_NONE);
    cr_expect_eq(o.verbose, 1);
    cr_assert_eq(o.cmdc, 1);
    cr_expect_str_eq(o.cmd[0], "-x");
}

Test(cli, bind_to_takes_auto_or_none)
{
    cr_assert_eq(parse(ARGS("-np", "2", "--bind-to", "auto", "x")), HR_CLI_RUN,
                 "%s", errbuf);
    cr_expect_eq(o.bind, HR_BIND_AUTO);
    cr_expect_eq(parse(ARGS("-np", "2", "--bind-to", "core", "x")),
                 HR_CLI_USAGE);
    cr_expect(strstr(errbuf, "--bind-to must be auto or none, got 'core'"),
              "%s", errbuf);
    cr_expect_eq(parse(ARGS("-np", "2", "--mpi", "--bind-to", "none", "x")),
                 HR_CLI_USAGE);
    cr_expect(strstr(errbuf, "--bind-to cannot be used with --mpi"), "%s",
              errbuf);
}

/* Horovod's single-dash spellings, which getopt read as clusters. */
Test(cli, single_dash_long_spellings)
{
    cr_assert_eq(
        parse(ARGS("-np", "2", "-hostfile", "hosts", "python", "train.py")),
        HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.hostfile, "hosts");
    cr_expect_eq(o.np, 2);
    cr_assert_eq(o.cmdc, 2);
    cr_expect_str_eq(o.cmd[0], "python");

    cr_assert_eq(parse(ARGS("-np", "1", "-prefix-timestamp", "x")), HR_CLI_RUN,
                 "%s", errbuf);
    cr_expect_eq(o.prefix_timestamp, 1);
    cr_assert_eq(parse(ARGS("-np", "1", "--prefix-output-with-timestamp", "x")),
                 HR_CLI_RUN);
    cr_expect_eq(o.prefix_timestamp, 1);
    cr_assert_eq(parse(ARGS("-np", "1", "x")), HR_CLI_RUN);
    cr_expect_eq(o.prefix_timestamp, 0);
}

Test(cli, check_build_leaves_argv_alone)
{
    const char *const before[] = {"horovodrun", "-cb", "-np", "4", "true"};
    cr_assert_eq(parse(ARGS("-cb", "-np", "4", "true")), HR_CLI_DONE, "%s",
                 errbuf);
    cr_assert_eq(argc_, 5);
    for (int i = 0; i < argc_; i++)
        cr_expect_str_eq(argv_[i], before[i], "argv[%d]", i);
    cr_expect_eq(parse(ARGS("--check-build")), HR_CLI_DONE);
}

Test(cli, equals_and_attached_forms)
{
    cr_assert_eq(parse(ARGS("--num-proc=3", "--hosts=a:3", "--ssh-port=2222",
                            "--ssh-identity-file=key", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.np, 3);
    cr_expect_str_eq(o.hosts, "a:3");
    cr_expect_eq(o.ssh_port, 2222);
    cr_expect_str_eq(o.identity_file, "key");

    cr_assert_eq(parse(ARGS("-np=4", "-Hh:4", "-p22", "-i/k", "x")), HR_CLI_RUN,
                 "%s", errbuf);
    cr_expect_eq(o.np, 4);
    cr_expect_str_eq(o.hosts, "h:4");
    cr_expect_eq(o.ssh_port, 22);
    cr_expect_str_eq(o.identity_file, "/k");
    cr_expect_eq(o.tree_fanout, HR_TREE_FANOUT);
    cr_assert_eq(parse(ARGS("-np", "1", "--tree-fanout=0", "x")), HR_CLI_RUN,
                 "%s", errbuf);
    cr_expect_eq(o.tree_fanout, 0);

    cr_assert_eq(parse(ARGS("-np", "1", "-H=h:1", "-hostfile=f", "x")),
                 HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "-H/--hosts and --hostfile cannot be used "
                             "together; pick one");
    cr_assert_eq(parse(ARGS("-np", "1", "-H=h:1", "x")), HR_CLI_RUN);
    cr_expect_str_eq(o.hosts, "h:1");
    /* An "=" inside the value stays in it. */
    cr_assert_eq(parse(ARGS("-np", "1", "--mpi", "--mpi-args=-x A=1", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.mpi_args, "-x A=1");
}

Test(cli, long_prefixes)
{
    cr_assert_eq(parse(ARGS("--num-p", "2", "--verb", "x")), HR_CLI_RUN, "%s",
                 errbuf);
    cr_expect_eq(o.np, 2);
    cr_expect_eq(o.verbose, 1);
    /* An exact name wins over the longer names it begins. */
    cr_assert_eq(parse(ARGS("-np", "1", "--mpi", "--gloo", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf,
                     "--mpi and --gloo cannot be used together; pick one");
    cr_assert_eq(parse(ARGS("-np", "1", "--hier", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "option '--hier' is ambiguous; it could be "
                             "--hierarchical-allreduce, "
                             "--hierarchical-allgather");
}

Test(cli, unknown_single_dash_words)
{
    static const char *const words[] = {"-x",  "-hostfilex", "-vx", "-npx",
                                        "-hx", "-cbx",       "-5"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        char want[128];
        cr_expect_eq(parse(ARGS("-np", "1", words[i], "x")), HR_CLI_USAGE, "%s",
                     words[i]);
        snprintf(want, sizeof(want),
                 "unknown option '%s'; see horovodrun --help", words[i]);
        cr_expect_str_eq(errbuf, want);
    }
    /* The value is not part of the name in the message. */
    cr_expect_eq(parse(ARGS("-np", "1", "-x=3", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "unknown option '-x'; see horovodrun --help");
    cr_expect_eq(parse(ARGS("--frobnicate=3", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf,
                     "unknown option '--frobnicate'; see horovodrun --help");
    /* A glued value that does not fit says how it was read. */
    cr_expect_eq(parse(ARGS("-np", "1", "-prefix-timestampx", "x")),
                 HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "'-prefix-timestampx' reads as -p "
                             "refix-timestampx: --ssh-port must be a TCP "
                             "port (1-65535), got 'refix-timestampx'");
}

Test(cli, options_after_the_command_are_untouched)
{
    const char *const tail[] = {"-hostfile", "-cb",    "--min-np", "2",
                                "-x",        "--help", "--",       "-H"};
    cr_assert_eq(parse(ARGS("-np", "2", "prog", "-hostfile", "-cb", "--min-np",
                            "2", "-x", "--help", "--", "-H")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_assert_eq(o.cmdc, 9);
    cr_expect_str_eq(o.cmd[0], "prog");
    for (int i = 0; i < 8; i++)
        cr_expect_eq(o.cmd[i + 1], argv_[i + 4], "word %d was copied", i);
    for (int i = 0; i < 8; i++)
        cr_expect_str_eq(o.cmd[i + 1], tail[i]);
    cr_expect_null(o.cmd[9]);
    /* After "--", even an option's spelling is the command. */
    cr_assert_eq(parse(ARGS("-np", "2", "--", "-np", "3")), HR_CLI_RUN);
    cr_expect_eq(o.np, 2);
    cr_expect_str_eq(o.cmd[0], "-np");
    /* "-" alone is a command word, as for getopt. */
    cr_assert_eq(parse(ARGS("-np", "1", "-", "a")), HR_CLI_RUN);
    cr_expect_str_eq(o.cmd[0], "-");
}

Test(cli, refused_options)
{
    cr_expect_eq(parse(ARGS("-np", "2", "--jsrun", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "--jsrun: launching with jsrun is not "
                             "supported yet by this horovodrun; use --mpi "
                             "or the default launcher");
}

/* A file of mode mode for --host-discovery-script; unlink it after. */
static const char *script(char *path, size_t len, mode_t mode)
{
    tmp_template(path, len, "hvdtest-cli");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "#!/bin/sh\necho a:1\n", 20), 20);
    close(fd);
    cr_assert_eq(chmod(path, mode), 0);
    return path;
}

Test(cli, elastic_options_land_in_their_fields)
{
    char path[64];
    script(path, sizeof(path), 0755);
    cr_assert_eq(
        parse(ARGS("-np", "4", "--min-np", "2", "--max-np", "8",
                   "--slots-per-host", "3", "--elastic-timeout", "30.5",
                   "--reset-limit", "5", "--blacklist-cooldown-range", "10",
                   "100", "--host-discovery-script", path, "--verbose", "x")),
        HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 1);
    cr_expect_eq(o.np, 4);
    cr_expect_eq(o.min_np, 2);
    cr_expect_eq(o.max_np, 8);
    cr_expect_eq(o.slots_per_host, 3);
    cr_expect_eq(o.elastic_timeout, 30.5);
    cr_expect_eq(o.reset_limit, 5);
    cr_expect_eq(o.cooldown_min, 10);
    cr_expect_eq(o.cooldown_max, 100);
    cr_expect_str_eq(o.discovery_script, path);
    /* The option after the two words of the range is read as one. */
    cr_expect_eq(o.verbose, 1);
    cr_assert_eq(o.cmdc, 1);
    cr_expect_str_eq(o.cmd[0], "x");
    cr_expect_eq(o.warnings.n, 0);
    /* The script alone makes the job elastic; 0 resets is a limit. */
    cr_assert_eq(parse(ARGS("-np", "2", "--reset-limit", "0",
                            "--blacklist-cooldown-range", "1", "3600",
                            "--host-discovery-script", path, "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 1);
    cr_expect_eq(o.min_np, 2);
    cr_expect_eq(o.reset_limit, 0);
    cr_expect_eq(o.cooldown_min, 1);
    cr_expect_eq(o.cooldown_max, 3600);
    unlink(path);
}

Test(cli, elastic_aliases_and_fixed_hosts)
{
    cr_assert_eq(parse(ARGS("-np", "3", "--min-num-proc", "2",
                            "--max-num-proc=6", "-H", "a:2,b:2", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 1);
    cr_expect_eq(o.min_np, 2);
    cr_expect_eq(o.max_np, 6);
    cr_expect_null(o.discovery_script);
    cr_assert_eq(
        parse(ARGS("-np", "2", "--min-np=2", "--hostfile", "hosts", "x")),
        HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 1);
    cr_expect_eq(o.max_np, 0);
    /* A Slurm allocation is a host list too. */
    setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
    cr_expect_eq(parse(ARGS("-np", "2", "--min-np", "1", "x")), HR_CLI_RUN,
                 "%s", errbuf);
}

Test(cli, elastic_defaults)
{
    char path[64];
    cr_assert_eq(parse(ARGS("-np", "2", "x")), HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 0);
    cr_expect_eq(o.min_np, 0);
    cr_expect_eq(o.max_np, 0);
    cr_expect_eq(o.slots_per_host, 0);
    cr_expect_eq(o.elastic_timeout, 0);
    cr_expect_eq(o.reset_limit, -1);
    cr_expect_eq(o.cooldown_min, 0);
    cr_expect_eq(o.cooldown_max, 0);
    cr_expect_null(o.discovery_script);

    script(path, sizeof(path), 0700);
    cr_assert_eq(parse(ARGS("-np", "4", "--host-discovery-script", path, "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.min_np, 4, "--min-np defaults to -np");
    cr_expect_eq(o.max_np, 0);
    cr_expect_eq(o.elastic_timeout, 600);
    cr_expect_eq(o.reset_limit, -1);
    cr_expect_eq(o.cooldown_min, 0);
    cr_expect_eq(o.cooldown_max, 0);

    setenv("HOROVOD_ELASTIC_TIMEOUT", "42", 1);
    cr_assert_eq(parse(ARGS("-np", "4", "--host-discovery-script", path, "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic_timeout, 42);
    cr_assert_eq(parse(ARGS("-np", "4", "--elastic-timeout", "7",
                            "--host-discovery-script", path, "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic_timeout, 7, "the option wins");
    setenv("HOROVOD_ELASTIC_TIMEOUT", "later", 1);
    cr_expect_eq(parse(ARGS("-np", "4", "--host-discovery-script", path, "x")),
                 HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "HOROVOD_ELASTIC_TIMEOUT must be a positive "
                             "number of seconds, got 'later'");
    /* Only elastic jobs read it. */
    cr_expect_eq(parse(ARGS("-np", "4", "x")), HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic_timeout, 0);
    unlink(path);
}

/* Horovod reads them only in elastic mode: ignored, with a warning. */
Test(cli, elastic_options_without_elastic_mode_warn)
{
    cr_assert_eq(parse(ARGS("-np", "2", "--max-np", "4", "--slots-per-host",
                            "2", "--elastic-timeout", "9", "--reset-limit", "0",
                            "--blacklist-cooldown-range", "1", "2", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.elastic, 0);
    cr_expect_eq(o.max_np, 4);
    cr_assert_eq(o.warnings.n, 5);
    cr_expect_str_eq(o.warnings.v[0],
                     "--max-np is ignored without --min-np or "
                     "--host-discovery-script (elastic training), as in "
                     "Horovod");
    cr_expect(strstr(o.warnings.v[4], "--blacklist-cooldown-range is ignored"),
              "%s", o.warnings.v[4]);
}

Test(cli, elastic_errors)
{
    char path[64], noexec[64], dir[64];
    tmp_template(dir, sizeof(dir), "hvdtest-cli-dir");
    char missing[80], msg[5][256];
    script(path, sizeof(path), 0755);
    script(noexec, sizeof(noexec), 0644);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(missing, sizeof(missing), "%s/none.sh", dir);
    snprintf(msg[0], sizeof(msg[0]),
             "--host-discovery-script '%s' does not exist; give the path of "
             "an executable script",
             missing);
    snprintf(msg[1], sizeof(msg[1]),
             "--host-discovery-script '%s' is not executable; make it so "
             "with chmod +x",
             noexec);
    snprintf(msg[2], sizeof(msg[2]),
             "--host-discovery-script '%s' is not a file; give the path of "
             "an executable script",
             dir);
    struct {
        const char *args[12];
        const char *msg;
    } cases[] = {
        {{"-np", "2", "--host-discovery-script", missing, "x", NULL}, msg[0]},
        {{"-np", "2", "--host-discovery-script", noexec, "x", NULL}, msg[1]},
        {{"-np", "2", "--host-discovery-script", dir, "x", NULL}, msg[2]},
        {{"-np", "2", "--min-np", "0", "-H", "a:1,b:1", "x", NULL},
         "--min-np must be a positive integer, got '0'"},
        {{"-np", "2", "--min-num-proc", "two", "x", NULL},
         "--min-np must be a positive integer, got 'two'"},
        {{"-np", "2", "--max-np", "-4", "x", NULL},
         "--max-np must be a positive integer, got '-4'"},
        {{"-np", "2", "--slots-per-host", "0", "x", NULL},
         "--slots-per-host must be a positive integer, got '0'"},
        {{"-np", "2", "--elastic-timeout", "0", "x", NULL},
         "--elastic-timeout must be a positive number of seconds, got '0'"},
        {{"-np", "2", "--reset-limit", "-1", "x", NULL},
         "--reset-limit must be an integer of at least 0, got '-1'"},
        {{"-np", "2", "--blacklist-cooldown-range", "300", "60", "x", NULL},
         "--blacklist-cooldown-range MIN 300 is more than MAX 60; give the "
         "shorter cooldown first"},
        {{"-np", "2", "--blacklist-cooldown-range", "0", "60", "x", NULL},
         "--blacklist-cooldown-range must be within 1 to 3600 seconds, as "
         "in Horovod, got 0 60"},
        {{"-np", "2", "--blacklist-cooldown-range", "1", "3601", "x", NULL},
         "--blacklist-cooldown-range must be within 1 to 3600 seconds, as "
         "in Horovod, got 1 3601"},
        {{"-np", "2", "--blacklist-cooldown-range", "1", "x", NULL},
         "--blacklist-cooldown-range needs two whole numbers of seconds, "
         "got '1 x'"},
        {{"-np", "2", "--blacklist-cooldown-range", "1", NULL},
         "option '--blacklist-cooldown-range' needs two arguments"},
        {{"-np", "2", "--blacklist-cooldown-range=1", "2", "x", NULL},
         "option '--blacklist-cooldown-range' takes two words, MIN MAX, not "
         "'='"},
        {{"-np", "2", "--mpi", "--min-np", "1", "-H", "a:1,b:1", "x", NULL},
         "--mpi cannot be used with elastic training (--min-np or "
         "--host-discovery-script): Horovod's elastic mode also requires "
         "Gloo; drop --mpi to use horovodrun's own launcher"},
        {{"-np", "2", "--host-discovery-script", path, "-H", "a:2", "x", NULL},
         "--host-discovery-script cannot be used with -H/--hosts: the "
         "script lists the hosts; pick one"},
        {{"-np", "2", "--hostfile", "f", "--host-discovery-script", path, "x",
          NULL},
         "--host-discovery-script cannot be used with --hostfile: the "
         "script lists the hosts; pick one"},
        {{"-np", "2", "--min-np", "1", "x", NULL},
         "--min-np without --host-discovery-script needs the hosts that "
         "may fail, in -H or --hostfile: Horovod does not run elastic jobs "
         "on localhost alone"},
        {{"--host-discovery-script", path, "x", NULL},
         "-np is required in elastic mode: the ranks needed to start "
         "(--min-np defaults to it), e.g. horovodrun -np 4 --min-np 2 "
         "--host-discovery-script ./hosts.sh ./train"},
        {{"-np", "2", "--min-np", "3", "--host-discovery-script", path, "x",
          NULL},
         "--min-np 3 is more than -np 2; lower --min-np or raise -np"},
        {{"-np", "8", "--min-np", "2", "--max-np", "4", "-H", "a:4,b:4", "x",
          NULL},
         "-np 8 is more than --max-np 4; lower -np or raise --max-np"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_eq(parse(cases[i].args), HR_CLI_USAGE, "case %zu", i);
        cr_expect_str_eq(errbuf, cases[i].msg, "case %zu", i);
    }
    /* Inside a Slurm allocation -np may be left out, but not when the
     * job is elastic. */
    setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
    cr_expect_eq(parse(ARGS("--host-discovery-script", path, "x")),
                 HR_CLI_USAGE);
    cr_expect(strstr(errbuf, "-np is required in elastic mode"), "%s", errbuf);
    unlink(path);
    unlink(noexec);
    rmdir(dir);
}

/* controller: mpi in a --config-file is --mpi. */
Test(cli, elastic_refuses_the_config_files_mpi)
{
    char cfg[64];
    tmp_template(cfg, sizeof(cfg), "hvdtest-cli-cfg");
    int fd = mkstemp(cfg);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "controller: mpi\n", 16), 16);
    close(fd);
    cr_expect_eq(parse(ARGS("-np", "2", "--config-file", cfg, "--min-np", "1",
                            "-H", "a:1,b:1", "x")),
                 HR_CLI_USAGE);
    cr_expect(strstr(errbuf, "--mpi cannot be used with elastic training"),
              "%s", errbuf);
    unlink(cfg);
}

Test(cli, start_timeout_from_env_and_option_wins)
{
    setenv("HOROVOD_START_TIMEOUT", "7", 1);
    cr_assert_eq(parse(ARGS("-np", "1", "x")), HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 7);
    cr_assert_eq(parse(ARGS("-np", "1", "--start-timeout", "3", "x")),
                 HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 3);
    setenv("HOROVOD_START_TIMEOUT", "soon", 1);
    /* The option makes a bad variable irrelevant. */
    cr_expect_eq(parse(ARGS("-np", "1", "--start-timeout", "3", "x")),
                 HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 3);
    cr_expect_eq(parse(ARGS("-np", "1", "x")), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "HOROVOD_START_TIMEOUT must be a positive "
                             "number of seconds, got 'soon'");
}

Test(cli, errors)
{
    struct {
        const char *args[8];
        const char *msg;
    } cases[] = {
        {{"x", NULL},
         "-np is required: the number of processes to start, "
         "e.g. horovodrun -np 4 ./train"},
        {{"-np", "0", "x", NULL}, "-np must be a positive integer, got '0'"},
        {{"-np", "-1", "x", NULL}, "-np must be a positive integer, got '-1'"},
        {{"-np", "abc", "x", NULL},
         "-np must be a positive integer, got 'abc'"},
        {{"-np", "4", NULL},
         "no command given; usage: horovodrun -np N "
         "[-H host:slots,...] [options] command "
         "[args...]"},
        {{"-np", "1", "-H", "a:1", "--hostfile", "f", "x", NULL},
         "-H/--hosts and --hostfile cannot be used together; pick one"},
        {{"--frobnicate", NULL},
         "unknown option '--frobnicate'; see horovodrun --help"},
        {{"-np", NULL}, "option '-np/--num-proc' needs an argument"},
        {{"-np", "1", "-H", NULL}, "option '-H/--hosts' needs an argument"},
        {{"-np", "1", "-hostfile", NULL},
         "option '-hostfile/--hostfile' needs an argument"},
        {{"-np", "1", "--config-file", NULL},
         "option '--config-file' needs an argument"},
        {{"-np", "1", "--kill-grace", "0", "x", NULL},
         "--kill-grace must be a positive number of seconds, got '0'"},
        {{"-np", "1", "--fusion-threshold-mb", "-1", "x", NULL},
         "--fusion-threshold-mb must be a number of at least 0, got '-1'"},
        {{"-np", "1", "--ssh-port", "70000", "x", NULL},
         "--ssh-port must be a TCP port (1-65535), got '70000'"},
        {{"-np", "1", "--tree-fanout", "-1", "x", NULL},
         "--tree-fanout must be a number of hosts (0-4096; 0 starts every "
         "agent from horovodrun), got '-1'"},
        {{"-np", "1", "-cb=1", "x", NULL},
         "option '-cb/--check-build' takes no argument, got '-cb=1'"},
        {{"-np", "1", "--tcp=yes", "x", NULL},
         "option '--tcp' takes no argument, got '--tcp=yes'"},
        {{"-np", "1", "--autotune-warmup-samples", "1.5", "x", NULL},
         "--autotune-warmup-samples must be an integer of at least 0, got "
         "'1.5'"},
        {{"-np", "1", "--autotune-gaussian-process-noise", "1.5", "x", NULL},
         "--autotune-gaussian-process-noise must be a number from 0 to 1, "
         "got '1.5'"},
        {{"-np", "1", "--gloo-timeout-seconds", "-3", "x", NULL},
         "--gloo-timeout-seconds must be an integer of at least 0, got '-3'"},
        {{"-np", "1", "--log-level", "loud", "x", NULL},
         "--log-level must be trace, debug, info, warning, error or fatal "
         "(in any case), got 'loud'"},
        {{"-np", "1", "--network-interfaces", "eth0,,eth1", "x", NULL},
         "--network-interfaces needs interface names separated by commas, "
         "got 'eth0,,eth1'"},
        {{"-np", "1", "--config-file", "", "x", NULL},
         "--config-file needs a file name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_eq(parse(cases[i].args), HR_CLI_USAGE, "case %zu", i);
        cr_expect_str_eq(errbuf, cases[i].msg, "case %zu", i);
    }
}

/* Each of Horovod's options is taken, in each of its spellings, and lands
 * in its field. */
Test(cli, horovod_options)
{
    cr_assert_eq(
        parse(ARGS(
            "-np", "2", "--disable-cache", "--network-interfaces", "eth0,eth1",
            "--gloo-timeout-seconds", "60", "--log-with-timestamp",
            "--hierarchical-allgather", "--no-stall-check", "--stall-check",
            "--no-timeline-mark-cycles", "--autotune", "--autotune-log-file",
            "at.csv", "--autotune-warmup-samples", "5",
            "--autotune-steps-per-sample", "20",
            "--autotune-bayes-opt-max-samples", "50",
            "--autotune-gaussian-process-noise", "0.9", "--mpi-threads-disable",
            "--num-nccl-streams", "2", "--thread-affinity", "1",
            "--torus-allreduce", "--tcp", "--binding-args", "--bind-to core",
            "--no-gloo-rendezvous", "x")),
        HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.disable_cache, 1);
    cr_expect_str_eq(o.network_interfaces, "eth0,eth1");
    cr_expect_str_eq(o.gloo_timeout_s, "60");
    cr_expect_str_eq(o.log_hide_time, "0");
    cr_expect_str_eq(o.hierarchical_allgather, "1");
    cr_expect_str_eq(o.stall_check_disable, "0"); /* the last one wins */
    cr_expect_str_eq(o.timeline_mark_cycles, "0");
    cr_expect_str_eq(o.autotune, "1");
    cr_expect_str_eq(o.autotune_log_file, "at.csv");
    cr_expect_str_eq(o.autotune_warmup_samples, "5");
    cr_expect_str_eq(o.autotune_steps_per_sample, "20");
    cr_expect_str_eq(o.autotune_bayes_opt_max_samples, "50");
    cr_expect_str_eq(o.autotune_gaussian_process_noise, "0.9");
    cr_expect_str_eq(o.mpi_threads_disable, "1");
    cr_expect_str_eq(o.num_nccl_streams, "2");
    cr_expect_str_eq(o.thread_affinity, "1");
    cr_expect_str_eq(o.torus_allreduce, "1");
    cr_expect_eq(o.tcp, 1);
    cr_expect_str_eq(o.binding_args, "--bind-to core");
    cr_expect_eq(o.no_gloo_rendezvous, 1);
    cr_expect_eq(o.warnings.n, 0);

    cr_assert_eq(parse(ARGS("-np", "2", "--log-without-timestamp",
                            "--no-hierarchical-allgather", "--no-autotune",
                            "--no-mpi-threads-disable", "--no-torus-allreduce",
                            "--timeline-mark-cycles", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.log_hide_time, "1");
    cr_expect_str_eq(o.hierarchical_allgather, "0");
    cr_expect_str_eq(o.autotune, "0");
    cr_expect_str_eq(o.mpi_threads_disable, "0");
    cr_expect_str_eq(o.torus_allreduce, "0");
    cr_expect_str_eq(o.timeline_mark_cycles, "1");
    cr_expect_null(o.stall_check_disable);
    cr_expect_null(o.network_interfaces);
    cr_expect_eq(o.tcp, 0);
}

Test(cli, deprecated_spellings_warn)
{
    cr_assert_eq(parse(ARGS("-np", "1", "--log-hide-timestamp", "x")),
                 HR_CLI_RUN);
    cr_expect_str_eq(o.log_hide_time, "1");
    cr_assert_eq(o.warnings.n, 1);
    cr_expect_str_eq(o.warnings.v[0], "--log-hide-timestamp is deprecated; "
                                      "use --log-without-timestamp");
    cr_assert_eq(parse(ARGS("-np", "1", "--no-log-hide-timestamp", "x")),
                 HR_CLI_RUN);
    cr_expect_str_eq(o.log_hide_time, "0");
    cr_expect_eq(o.warnings.n, 1);
}

Test(cli, network_interfaces_add_up)
{
    cr_assert_eq(parse(ARGS("-np", "1", "--network-interface", "eth0",
                            "--network-interface", "eth1", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.network_interfaces, "eth0,eth1");
    cr_expect_eq(o.warnings.n, 0);
    cr_assert_eq(parse(ARGS("-np", "1", "--network-interfaces=ib0,eth0",
                            "--network-interface", "lo", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.network_interfaces, "ib0,eth0,lo");
    /* A list through the older spelling works, with Horovod's warning. */
    cr_assert_eq(parse(ARGS("-np", "1", "--network-interface", "a,b", "x")),
                 HR_CLI_RUN);
    cr_expect_str_eq(o.network_interfaces, "a,b");
    cr_assert_eq(o.warnings.n, 1);
    cr_expect_str_eq(o.warnings.v[0],
                     "--network-interface with several interfaces is "
                     "deprecated; use --network-interfaces a,b");
}

Test(cli, log_level_in_any_case)
{
    cr_assert_eq(parse(ARGS("-np", "1", "--log-level", "INFO", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.log_level, "INFO");
    cr_assert_eq(parse(ARGS("-np", "1", "--log-level", "debug", "x")),
                 HR_CLI_RUN);
    cr_expect_str_eq(o.log_level, "debug");
}

static void expect_env(const char *name, const char *want)
{
    const char *v = getenv(name);
    if (want == NULL)
        cr_expect_null(v, "%s=%s", name, v);
    else if (v == NULL)
        cr_expect_fail("%s is not set, want %s", name, want);
    else
        cr_expect_str_eq(v, want, "%s", name);
}

/* The variables and values of Horovod's config_parser.set_env_from_args,
 * in its units. */
Test(cli, export_env_has_horovods_values)
{
    cr_assert_eq(
        parse(ARGS(
            "-np", "2", "--fusion-threshold-mb", "32", "--cycle-time-ms", "10",
            "--cache-capacity", "2048", "--hierarchical-allreduce",
            "--hierarchical-allgather", "--no-torus-allreduce", "--autotune",
            "--autotune-log-file", "log.csv", "--autotune-warmup-samples", "5",
            "--autotune-steps-per-sample", "20",
            "--autotune-bayes-opt-max-samples", "50",
            "--autotune-gaussian-process-noise", "0.9", "--timeline-filename",
            "/tmp/t.json", "--timeline-mark-cycles", "--no-stall-check",
            "--stall-check-warning-time-seconds", "120",
            "--stall-check-shutdown-time-seconds", "240",
            "--mpi-threads-disable", "--num-nccl-streams", "2",
            "--thread-affinity", "1", "--gloo-timeout-seconds", "60",
            "--log-level", "INFO", "--log-without-timestamp", "--tcp", "x")),
        HR_CLI_RUN, "%s", errbuf);
    cr_assert_eq(hr_cli_export_env(&o), 0);
    expect_env("HOROVOD_FUSION_THRESHOLD", "33554432");
    expect_env("HOROVOD_CYCLE_TIME", "10");
    expect_env("HOROVOD_CACHE_CAPACITY", "2048");
    expect_env("HOROVOD_HIERARCHICAL_ALLREDUCE", "1");
    expect_env("HOROVOD_HIERARCHICAL_ALLGATHER", "1");
    expect_env("HOROVOD_TORUS_ALLREDUCE", "0");
    expect_env("HOROVOD_AUTOTUNE", "1");
    expect_env("HOROVOD_AUTOTUNE_LOG", "log.csv");
    expect_env("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5");
    expect_env("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20");
    expect_env("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "50");
    expect_env("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.9");
    expect_env("HOROVOD_TIMELINE", "/tmp/t.json");
    expect_env("HOROVOD_TIMELINE_MARK_CYCLES", "1");
    expect_env("HOROVOD_STALL_CHECK_DISABLE", "1");
    expect_env("HOROVOD_STALL_CHECK_TIME_SECONDS", "120");
    expect_env("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "240");
    expect_env("HOROVOD_MPI_THREADS_DISABLE", "1");
    expect_env("HOROVOD_NUM_NCCL_STREAMS", "2");
    expect_env("HOROVOD_THREAD_AFFINITY", "1");
    expect_env("HOROVOD_GLOO_TIMEOUT_SECONDS", "60");
    expect_env("HOROVOD_LOG_LEVEL", "INFO");
    expect_env("HOROVOD_LOG_HIDE_TIME", "1");
    expect_env("NCCL_IB_DISABLE", "1");
}

Test(cli, export_env_leaves_the_rest_alone)
{
    /* What the user set stays when no option says otherwise, as in
     * Horovod (HOROVOD_GLOO_TIMEOUT_SECONDS=1800 from the environment). */
    setenv("HOROVOD_GLOO_TIMEOUT_SECONDS", "1800", 1);
    cr_assert_eq(parse(ARGS("-np", "2", "x")), HR_CLI_RUN);
    cr_assert_eq(hr_cli_export_env(&o), 0);
    expect_env("HOROVOD_GLOO_TIMEOUT_SECONDS", "1800");
    for (size_t i = 0; i < sizeof(exported) / sizeof(exported[0]); i++)
        if (strcmp(exported[i], "HOROVOD_GLOO_TIMEOUT_SECONDS") != 0)
            expect_env(exported[i], NULL);
}

Test(cli, export_env_autotune_settings_need_autotune)
{
    /* Horovod passes the autotune settings on only with --autotune, and
     * --no-autotune sets nothing at all. */
    cr_assert_eq(parse(ARGS("-np", "2", "--autotune-warmup-samples", "5",
                            "--autotune-log-file", "f", "x")),
                 HR_CLI_RUN);
    cr_assert_eq(hr_cli_export_env(&o), 0);
    expect_env("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", NULL);
    expect_env("HOROVOD_AUTOTUNE_LOG", NULL);
    cr_assert_eq(parse(ARGS("-np", "2", "--no-autotune", "x")), HR_CLI_RUN);
    cr_assert_eq(hr_cli_export_env(&o), 0);
    expect_env("HOROVOD_AUTOTUNE", NULL);
    cr_assert_eq(
        parse(ARGS("-np", "2", "--stall-check", "--no-hierarchical-allreduce",
                   "--log-with-timestamp", "--fusion-threshold-mb", "0.5",
                   "x")),
        HR_CLI_RUN);
    cr_assert_eq(hr_cli_export_env(&o), 0);
    expect_env("HOROVOD_STALL_CHECK_DISABLE", "0");
    expect_env("HOROVOD_HIERARCHICAL_ALLREDUCE", "0");
    expect_env("HOROVOD_LOG_HIDE_TIME", "0");
    expect_env("HOROVOD_FUSION_THRESHOLD", "524288");
}

Test(cli, help_and_version_stop_parsing)
{
    cr_expect_eq(parse(ARGS("-h")), HR_CLI_DONE);
    cr_expect_eq(parse(ARGS("--version")), HR_CLI_DONE);
    cr_expect_eq(parse(ARGS("-v")), HR_CLI_DONE);
    cr_expect_eq(parse(ARGS("--help", "--frobnicate")), HR_CLI_DONE);
}

Test(cli, help_lists_every_option)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hr_cli_help(f);
    fclose(f);
    for (size_t i = 0; i < hr_noptions; i++) {
        char name[64];
        snprintf(name, sizeof(name), "--%s", hr_options[i].name);
        if (hr_options[i].help == NULL) {
            /* Deprecated spellings are taken but not shown. */
            cr_expect_null(strstr(text, name), "%s shown", name);
            continue;
        }
        cr_expect_not_null(strstr(text, name), "%s missing", name);
        cr_expect_not_null(strstr(text, hr_options[i].help));
    }
    cr_expect_not_null(strstr(text, "-np, --num-proc N"));
    cr_expect_not_null(strstr(text, "-hostfile, --hostfile FILE"));
    cr_expect_not_null(strstr(text, "-prefix-timestamp, "
                                    "--prefix-output-with-timestamp"));
    cr_expect_not_null(strstr(text, "--min-np N, --min-num-proc N"));
    cr_expect_not_null(strstr(text, "--blacklist-cooldown-range MIN MAX"));
    free(text);
}
