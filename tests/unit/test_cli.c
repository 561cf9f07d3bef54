/* Unit tests for horovodrun's option table and parser (launcher/cli.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static char errbuf[512];

/* Parses a NULL-terminated argument list (argv[0] is added). */
static int parse(struct hr_opts *o, const char *const *args)
{
    static char *argv[64];
    int argc = 0;
    argv[argc++] = "horovodrun";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    int rc = hr_cli_parse(o, argc, argv, devnull, errbuf, sizeof(errbuf));
    fclose(devnull);
    return rc;
}

Test(cli, defaults_and_command)
{
    struct hr_opts o;
    unsetenv("HOROVOD_START_TIMEOUT");
    const char *a[] = {"-np", "4", "python3", "train.py", "-np", "9", NULL};
    cr_assert_eq(parse(&o, a), HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.np, 4);
    cr_expect_eq(o.start_timeout, 30);
    cr_expect_eq(o.kill_grace, 5);
    cr_expect_eq(o.gpu_pinning, 1);
    cr_expect_null(o.hosts);
    cr_assert_eq(o.cmdc, 4);
    cr_expect_str_eq(o.cmd[0], "python3");
    /* The program's own -np is left alone. */
    cr_expect_str_eq(o.cmd[2], "-np");
}

Test(cli, every_option)
{
    struct hr_opts o;
    const char *a[] = {"--num-proc",
                       "2",
                       "-H",
                       "a:1,b:1",
                       "--output-filename",
                       "logs",
                       "--start-timeout",
                       "2.5",
                       "--kill-grace",
                       "1",
                       "--no-gpu-pinning",
                       "--verbose",
                       "--",
                       "-x",
                       NULL};
    cr_assert_eq(parse(&o, a), HR_CLI_RUN, "%s", errbuf);
    cr_expect_eq(o.np, 2);
    cr_expect_str_eq(o.hosts, "a:1,b:1");
    cr_expect_str_eq(o.output_dir, "logs");
    cr_expect_eq(o.start_timeout, 2.5);
    cr_expect_eq(o.kill_grace, 1);
    cr_expect_eq(o.gpu_pinning, 0);
    cr_expect_eq(o.verbose, 1);
    cr_assert_eq(o.cmdc, 1);
    cr_expect_str_eq(o.cmd[0], "-x");
}

Test(cli, start_timeout_from_env_and_option_wins)
{
    struct hr_opts o;
    setenv("HOROVOD_START_TIMEOUT", "7", 1);
    const char *a[] = {"-np", "1", "x", NULL};
    cr_assert_eq(parse(&o, a), HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 7);
    const char *b[] = {"-np", "1", "--start-timeout", "3", "x", NULL};
    cr_assert_eq(parse(&o, b), HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 3);
    setenv("HOROVOD_START_TIMEOUT", "soon", 1);
    /* The option makes a bad variable irrelevant. */
    cr_expect_eq(parse(&o, b), HR_CLI_RUN);
    cr_expect_eq(o.start_timeout, 3);
    cr_expect_eq(parse(&o, a), HR_CLI_USAGE);
    cr_expect_str_eq(errbuf, "HOROVOD_START_TIMEOUT must be a positive "
                             "number of seconds, got 'soon'");
    unsetenv("HOROVOD_START_TIMEOUT");
}

Test(cli, errors)
{
    struct hr_opts o;
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
        {{"-np", "1", "--kill-grace", "0", "x", NULL},
         "--kill-grace must be a positive number of seconds, got '0'"},
        {{"-np", "1", "--fusion-threshold-mb", "-1", "x", NULL},
         "--fusion-threshold-mb must be a number of at least 0, got '-1'"},
        {{"-np", "1", "--ssh-port", "70000", "x", NULL},
         "--ssh-port must be a TCP port (1-65535), got '70000'"},
    };
    unsetenv("HOROVOD_START_TIMEOUT");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_eq(parse(&o, cases[i].args), HR_CLI_USAGE, "case %zu", i);
        cr_expect_str_eq(errbuf, cases[i].msg, "case %zu", i);
    }
}

Test(cli, help_and_version_stop_parsing)
{
    struct hr_opts o;
    const char *a[] = {"-h", NULL};
    cr_expect_eq(parse(&o, a), HR_CLI_DONE);
    const char *b[] = {"--version", NULL};
    cr_expect_eq(parse(&o, b), HR_CLI_DONE);
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
        cr_expect_not_null(strstr(text, name), "%s missing", name);
        cr_expect_not_null(strstr(text, hr_options[i].help));
    }
    cr_expect_not_null(strstr(text, "-np, --num-proc N"));
    free(text);
}
