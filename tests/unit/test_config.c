/* Unit tests for horovodrun --config-file (launcher/horovodrun/config.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/horovodrun/config.h"
#include "tmppath.h"

static char errbuf[512];
static struct hr_opts o;
static char dir[64];
static char path[128];

static void setup(void)
{
    unsetenv("HOROVOD_START_TIMEOUT");
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_NODELIST");
    tmp_template(dir, sizeof(dir), "hvd-test-config");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/horovod.yaml", dir);
}

static void teardown(void)
{
    hr_opts_close(&o);
    unlink(path);
    rmdir(dir);
}

TestSuite(config, .init = setup, .fini = teardown);

static void write_config(const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* Parses a NULL-terminated argument list (argv[0] is added) into o; the
 * word "CFG" stands for the config file's path. */
static int parse(const char *const *args)
{
    static char *argv[64];
    int argc = 0;
    argv[argc++] = "horovodrun";
    for (; *args; args++)
        argv[argc++] = strcmp(*args, "CFG") == 0 ? path : (char *)*args;
    argv[argc] = NULL;
    hr_opts_close(&o);
    int rc = hr_cli_parse(&o, argc, argv, stdout, errbuf, sizeof(errbuf));
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Every section and key of Horovod's layout. */
static const char *const full = "controller: gloo\n"
                                "\n"
                                "params:\n"
                                "  fusion_threshold_mb: 32\n"
                                "  cycle_time_ms: 10\n"
                                "  cache_capacity: 2048\n"
                                "  hierarchical_allreduce: true\n"
                                "  hierarchical_allgather: false\n"
                                "  torus_allreduce: yes\n"
                                "autotune:\n"
                                "  enabled: true\n"
                                "  log_file: 'tune.csv'\n"
                                "  warmup_samples: 5\n"
                                "  steps_per_sample: 20\n"
                                "  bayes_opt_max_samples: 50\n"
                                "  gaussian_process_noise: 0.9\n"
                                "timeline:\n"
                                "  filename: \"timeline.json\"\n"
                                "  mark_cycles: on\n"
                                "stall_check:\n"
                                "  enabled: True\n"
                                "  warning_time_seconds: 120\n"
                                "  shutdown_time_seconds: 240\n"
                                "library_options:\n"
                                "  mpi_threads_disable: true\n"
                                "  num_nccl_streams: 2\n"
                                "  thread_affinity: 1\n"
                                "  gloo_timeout_seconds: 60\n"
                                "logging:\n"
                                "  level: INFO\n"
                                "  with_timestamp: false\n";

Test(config, horovods_layout)
{
    write_config(full);
    cr_assert_eq(parse(ARGS("-np", "2", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.gloo, 1);
    cr_expect_eq(o.mpi, 0);
    cr_expect_str_eq(o.fusion_threshold_mb, "32");
    cr_expect_str_eq(o.cycle_time_ms, "10");
    cr_expect_str_eq(o.cache_capacity, "2048");
    cr_expect_str_eq(o.hierarchical, "1");
    cr_expect_str_eq(o.hierarchical_allgather, "0");
    cr_expect_str_eq(o.torus_allreduce, "1");
    cr_expect_str_eq(o.autotune, "1");
    cr_expect_str_eq(o.autotune_log_file, "tune.csv");
    cr_expect_str_eq(o.autotune_warmup_samples, "5");
    cr_expect_str_eq(o.autotune_steps_per_sample, "20");
    cr_expect_str_eq(o.autotune_bayes_opt_max_samples, "50");
    cr_expect_str_eq(o.autotune_gaussian_process_noise, "0.9");
    cr_expect_str_eq(o.timeline, "timeline.json");
    cr_expect_str_eq(o.timeline_mark_cycles, "1");
    cr_expect_str_eq(o.stall_check_disable, "0");
    cr_expect_str_eq(o.stall_warn_s, "120");
    cr_expect_str_eq(o.stall_shutdown_s, "240");
    cr_expect_str_eq(o.mpi_threads_disable, "1");
    cr_expect_str_eq(o.num_nccl_streams, "2");
    cr_expect_str_eq(o.thread_affinity, "1");
    cr_expect_str_eq(o.gloo_timeout_s, "60");
    cr_expect_str_eq(o.log_level, "INFO");
    cr_expect_str_eq(o.log_hide_time, "1");
    cr_expect_eq(o.warnings.n, 0);
    cr_expect_str_eq(o.config_file, path);
    cr_assert_eq(o.cmdc, 1);
    cr_expect_str_eq(o.cmd[0], "x");
    cr_assert_eq(hr_cli_export_env(&o), 0);
    cr_expect_str_eq(getenv("HOROVOD_FUSION_THRESHOLD"), "33554432");
    cr_expect_str_eq(getenv("HOROVOD_AUTOTUNE"), "1");
    cr_expect_str_eq(getenv("HOROVOD_LOG_HIDE_TIME"), "1");
}

Test(config, command_line_wins_whatever_the_order)
{
    write_config(full);
    cr_assert_eq(parse(ARGS("-np", "2", "--fusion-threshold-mb", "256",
                            "--config-file", "CFG", "--cycle-time-ms", "20",
                            "--no-hierarchical-allreduce", "--no-autotune",
                            "--log-with-timestamp", "--log-level", "debug",
                            "--mpi", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.fusion_threshold_mb, "256");
    cr_expect_str_eq(o.cycle_time_ms, "20");
    cr_expect_str_eq(o.hierarchical, "0");
    cr_expect_str_eq(o.autotune, "0");
    cr_expect_str_eq(o.log_hide_time, "0");
    cr_expect_str_eq(o.log_level, "debug");
    /* The file's controller counts only without one on the command line,
     * so --mpi and the file's gloo do not clash. */
    cr_expect_eq(o.mpi, 1);
    cr_expect_eq(o.gloo, 0);
    /* What the command line leaves alone still comes from the file. */
    cr_expect_str_eq(o.cache_capacity, "2048");
    cr_expect_str_eq(o.gloo_timeout_s, "60");
}

Test(config, section_defaults_as_in_horovod)
{
    /* A stall_check section without "enabled" turns the check on, which
     * Horovod exports; an autotune section without it turns tuning off,
     * which exports nothing. */
    write_config("stall_check:\n  warning_time_seconds: 5\n"
                 "autotune:\n  log_file: t.csv\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.stall_check_disable, "0");
    cr_expect_str_eq(o.autotune, "0");
    cr_expect_str_eq(o.autotune_log_file, "t.csv");
    /* --no-stall-check wins over that. */
    cr_assert_eq(parse(ARGS("-np", "1", "--no-stall-check", "--config-file",
                            "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.stall_check_disable, "1");
    write_config("stall_check:\n  enabled: false\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.stall_check_disable, "1");
}

Test(config, nulls_and_empty_files_set_nothing)
{
    write_config("params:\n  fusion_threshold_mb: ~\n  cycle_time_ms:\n"
                 "timeline:\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_null(o.fusion_threshold_mb);
    cr_expect_null(o.cycle_time_ms);
    write_config("");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    write_config("# nothing but a comment\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.warnings.n, 0);
}

Test(config, controller_mpi)
{
    write_config("controller: MPI\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.mpi, 1);
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "--gloo", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.mpi, 0);
    cr_expect_eq(o.gloo, 1);
}

Test(config, unknown_keys_are_skipped_with_a_warning)
{
    /* Horovod's own test file has logging.hide_timestamp, which its
     * config_parser does not read. */
    write_config("logging:\n  level: ERROR\n  hide_timestamp: true\n"
                 "hosts: a,b\n");
    cr_assert_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                 HR_CLI_RUN, "%s", errbuf);
    cr_expect_str_eq(o.log_level, "ERROR");
    cr_assert_eq(o.warnings.n, 2);
    char want[256];
    snprintf(want, sizeof(want),
             "%s:3: logging.hide_timestamp is not a setting Horovod reads; "
             "ignored",
             path);
    cr_expect_str_eq(o.warnings.v[0], want);
    snprintf(want, sizeof(want),
             "%s:4: hosts is not a setting Horovod reads; ignored", path);
    cr_expect_str_eq(o.warnings.v[1], want);
}

Test(config, errors_name_the_file_line_and_key)
{
    struct {
        const char *yaml;
        const char *msg; /* after "PATH:" */
    } cases[] = {
        {"params:\n  cycle_time_ms: 1\n  fusion_threshold_mb: lots\n",
         "3: params.fusion_threshold_mb: --fusion-threshold-mb must be a "
         "number of at least 0, got 'lots'"},
        {"params:\n  hierarchical_allreduce: maybe\n",
         "2: params.hierarchical_allreduce: must be true or false, got "
         "'maybe'"},
        {"autotune:\n  enabled: true\n  gaussian_process_noise: 2\n",
         "3: autotune.gaussian_process_noise: "
         "--autotune-gaussian-process-noise must be a number from 0 to 1, "
         "got '2'"},
        {"logging:\n  level: loud\n",
         "2: logging.level: --log-level must be trace, debug, info, "
         "warning, error or fatal (in any case), got 'loud'"},
        {"library_options:\n  num_nccl_streams: [1, 2]\n",
         "2: library_options.num_nccl_streams: must be a single value"},
        {"params: 5\n", "1: params: must be a mapping of settings to values"},
        {"- params\n",
         "1: the top level must map section names (params, autotune, ...) "
         "to their settings"},
        {"controller: jsrun\n", "1: controller: must be gloo or mpi, got "
                                "'jsrun'"},
        {"params:\n  cycle_time_ms: 1\n bad: indent\n",
         "3: not valid YAML: did not find expected key while parsing a "
         "block mapping"},
        {"timeline:\n  filename: 'unclosed\n",
         "3: not valid YAML: found unexpected end of stream while scanning "
         "a quoted scalar"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[512];
        write_config(cases[i].yaml);
        cr_expect_eq(parse(ARGS("-np", "1", "--config-file", "CFG", "x")),
                     HR_CLI_USAGE, "case %zu", i);
        snprintf(want, sizeof(want), "%s:%s", path, cases[i].msg);
        cr_expect_str_eq(errbuf, want, "case %zu", i);
    }
}

Test(config, missing_file)
{
    cr_expect_eq(
        parse(ARGS("-np", "1", "--config-file", "/nonexistent/h.yaml", "x")),
        HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "cannot read --config-file "
                             "'/nonexistent/h.yaml': No such file or "
                             "directory");
}

/* Bad options on the command line are reported before the file is read,
 * and the file's values outlive its document. */
Test(config, load_directly)
{
    write_config("timeline:\n  filename: /tmp/tl.json\n");
    memset(&o, 0, sizeof(o));
    cr_assert_eq(hr_config_load(&o, path, errbuf, sizeof(errbuf)), 0, "%s",
                 errbuf);
    cr_expect_str_eq(o.timeline, "/tmp/tl.json");
    cr_expect_eq(parse(ARGS("-np", "0", "--config-file", "CFG", "x")),
                 HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "-np must be a positive integer, got '0'");
}
