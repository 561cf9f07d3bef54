/* Unit tests for mpirun's command line (launcher/horovodrun/mpicmd.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/lib/errcode.h"
#include "launcher/horovodrun/mpicmd.h"

static char err[512];

/* ---- hr_shell_split ------------------------------------------------- */

/* Splits s and expects exactly the words of want (NULL-terminated). */
static void expect_split(const char *s, const char *const *want)
{
    struct hvd_strvec v;
    size_t n = 0;

    hvd_strvec_init(&v);
    err[0] = '\0';
    cr_assert_eq(hr_shell_split(s, &v, err, sizeof(err)), 0, "'%s': %s", s,
                 err);
    while (want[n])
        n++;
    cr_assert_eq(v.n, n, "'%s': %zu words, not %zu", s, v.n, n);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(v.v[i], want[i], "'%s': word %zu", s, i);
    /* NULL-terminated once anything was pushed. */
    cr_expect(n == 0 || v.v[n] == NULL);
    hvd_strvec_close(&v);
}

/* Expects s to be refused with a message that names the problem. */
static void expect_bad(const char *s, const char *why)
{
    struct hvd_strvec v;

    hvd_strvec_init(&v);
    err[0] = '\0';
    cr_expect_eq(hr_shell_split(s, &v, err, sizeof(err)), HVD_EPARSE, "'%s'",
                 s);
    cr_expect_not_null(strstr(err, why), "'%s': %s", s, err);
    cr_expect_not_null(strstr(err, "--mpi-args"), "'%s': %s", s, err);
    hvd_strvec_close(&v);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

Test(shell_split, blanks_separate_words)
{
    expect_split("a b  c", W("a", "b", "c"));
    expect_split("  \t-x\tFOO \n --mca  btl tcp  ",
                 W("-x", "FOO", "--mca", "btl", "tcp"));
    expect_split("", NONE);
    expect_split(" \t\n ", NONE);
}

Test(shell_split, empty_words_from_quotes)
{
    expect_split("''", W(""));
    expect_split("\"\"", W(""));
    expect_split("'' \"\" ''", W("", "", ""));
    expect_split("a '' b", W("a", "", "b"));
    /* Quotes inside a word add nothing. */
    expect_split("a'' b\"\"", W("a", "b"));
}

Test(shell_split, single_quotes_are_literal)
{
    expect_split("'a b' c", W("a b", "c"));
    expect_split("'a\\b'", W("a\\b"));
    expect_split("'\\'", W("\\"));
    expect_split("'\"$x`'", W("\"$x`"));
    expect_split("'a\nb'", W("a\nb"));
    expect_split("x'y z'w", W("xy zw"));
}

Test(shell_split, double_quotes)
{
    expect_split("\"a b\" c", W("a b", "c"));
    expect_split("\"a'b\"", W("a'b"));
    /* Only \" \\ \$ \` lose their backslash. */
    expect_split("\"a\\\"b\"", W("a\"b"));
    expect_split("\"\\\\\"", W("\\"));
    expect_split("\"\\$HOME\"", W("$HOME"));
    expect_split("\"\\`\"", W("`"));
    expect_split("\"a\\xb\"", W("a\\xb"));
    expect_split("\"\\'\"", W("\\'"));
    /* A backslash-newline inside is a line continuation. */
    expect_split("\"a\\\nb\"", W("ab"));
}

Test(shell_split, backslashes_outside_quotes)
{
    expect_split("a\\ b", W("a b"));
    expect_split("\\'", W("'"));
    expect_split("\\\"", W("\""));
    expect_split("\\\\", W("\\"));
    expect_split("\\a", W("a"));
    /* A backslash-newline joins the lines. */
    expect_split("a\\\nb", W("ab"));
    expect_split("a \\\n b", W("a", "b"));
}

Test(shell_split, nothing_is_expanded)
{
    expect_split("$HOME ~ * ${X} `id` #c",
                 W("$HOME", "~", "*", "${X}", "`id`", "#c"));
}

Test(shell_split, unterminated_quotes_and_trailing_backslash)
{
    expect_bad("'a", "unclosed ' quote");
    expect_bad("a \"b c", "unclosed \" quote");
    expect_bad("\"a\\\"", "unclosed \" quote");
    expect_bad("'", "unclosed ' quote");
    expect_bad("a\\", "backslash");
    expect_bad("'a'\\", "backslash");
}

Test(shell_split, appends_to_the_vector)
{
    struct hvd_strvec v;

    hvd_strvec_init(&v);
    cr_assert_eq(hvd_strvec_push(&v, "first"), 0);
    cr_assert_eq(hr_shell_split("a b", &v, err, sizeof(err)), 0);
    cr_assert_eq(v.n, 3);
    cr_expect_str_eq(v.v[0], "first");
    cr_expect_str_eq(v.v[2], "b");
    hvd_strvec_close(&v);
}

Test(shell_split, long_words)
{
    size_t n = 100000;
    char *s = malloc(n + 3);
    cr_assert_not_null(s);
    s[0] = '\'';
    memset(s + 1, 'q', n);
    s[n + 1] = '\'';
    s[n + 2] = '\0';
    struct hvd_strvec v;
    hvd_strvec_init(&v);
    cr_assert_eq(hr_shell_split(s, &v, err, sizeof(err)), 0);
    cr_assert_eq(v.n, 1);
    cr_expect_eq(strlen(v.v[0]), n);
    hvd_strvec_close(&v);
    free(s);
}

/* ---- hr_shell_join -------------------------------------------------- */

/* join then split gives the words back. */
static void expect_round_trip(const char *const *words)
{
    char *s = hr_shell_join((char *const *)words);
    cr_assert_not_null(s);
    expect_split(s, words);
    free(s);
}

Test(shell_join, plain_words_stay_plain)
{
    char *s = hr_shell_join((char *const *)W("mpirun", "-np", "4", "-H",
                                             "a:2,b:2", "x=1", "/p/q.py",
                                             "user@h", "50%", "+1"));
    cr_assert_not_null(s);
    cr_expect_str_eq(s, "mpirun -np 4 -H a:2,b:2 x=1 /p/q.py user@h 50% +1");
    free(s);
    s = hr_shell_join((char *const *)NONE);
    cr_assert_not_null(s);
    cr_expect_str_eq(s, "");
    free(s);
}

Test(shell_join, quotes_what_a_shell_would_read)
{
    char *s = hr_shell_join(
        (char *const *)W("", "a b", "it's", "$HOME", "~", "#c", "*"));
    cr_assert_not_null(s);
    cr_expect_str_eq(s, "'' 'a b' 'it'\\''s' '$HOME' '~' '#c' '*'");
    free(s);
}

Test(shell_join, round_trips)
{
    expect_round_trip(W("a"));
    expect_round_trip(W(""));
    expect_round_trip(W("", ""));
    expect_round_trip(W("a b", "c\td", "e\nf"));
    expect_round_trip(W("'", "''", "'''", "a'b'c"));
    expect_round_trip(W("\"", "\\", "\\\\", "\\'", "\"\\\"", "`$x`"));
    expect_round_trip(W("-x", "LD_PRELOAD=/a b/c.so", "--", "python3", "-c",
                        "print('hi there')"));
}

/* Every printable byte and a few control bytes, alone and in pairs. */
Test(shell_join, round_trips_every_byte)
{
    char words[256][3];
    const char *list[2] = {NULL, NULL};

    for (int c = 1; c < 256; c++) {
        words[c][0] = (char)c;
        words[c][1] = '\0';
        list[0] = words[c];
        expect_round_trip(list);
        words[c][1] = (char)(c % 2 ? '\'' : '\\');
        words[c][2] = '\0';
        expect_round_trip(list);
    }
}

/* ---- hr_mpicmd_build ------------------------------------------------ */

static struct hr_opts o;
static struct hvd_hostlist hl;
static struct hvd_plan plan;
static struct hr_mpicmd cmd;
static char *argv_[64];

static void setup(void)
{
    memset(&o, 0, sizeof(o));
    hvd_hostlist_init(&hl);
    memset(&plan, 0, sizeof(plan));
    memset(&cmd, 0, sizeof(cmd));
    hvd_strvec_init(&cmd.argv);
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_NODELIST");
}

static void teardown(void)
{
    hr_mpicmd_close(&cmd);
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
    hr_opts_close(&o);
}

TestSuite(mpicmd, .init = setup, .fini = teardown);

/* Parses horovodrun's options (NULL-terminated), plans hosts and builds
 * the command; returns hr_mpicmd_build's result. */
static int build(const char *hosts, int np, const char *const *args)
{
    int argc = 0;
    argv_[argc++] = "horovodrun";
    argv_[argc++] = "--mpi";
    for (; *args; args++)
        argv_[argc++] = (char *)*args;
    argv_[argc] = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    cr_assert_not_null(devnull);
    int rc = hr_cli_parse(&o, argc, argv_, devnull, err, sizeof(err));
    fclose(devnull);
    cr_assert_eq(rc, HR_CLI_RUN, "%s", err);
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, hosts, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(hvd_plan_build(&plan, &hl, np), 0);
    hvd_strvec_close(&cmd.argv);
    err[0] = '\0';
    return hr_mpicmd_build(&cmd, "/usr/bin/mpirun", "/x/hvd-mpi-rank", &o, &hl,
                           &plan, err, sizeof(err));
}

/* The index of word w in the command, or -1. */
static int find(const char *w)
{
    for (size_t i = 0; i < cmd.argv.n; i++)
        if (strcmp(cmd.argv.v[i], w) == 0)
            return (int)i;
    return -1;
}

/* Whether the words a, b follow each other in the command. */
static int has_pair(const char *a, const char *b)
{
    for (size_t i = 0; i + 1 < cmd.argv.n; i++)
        if (strcmp(cmd.argv.v[i], a) == 0 && strcmp(cmd.argv.v[i + 1], b) == 0)
            return 1;
    return 0;
}

/* Whether the MCA parameter name is set to value. */
static int has_mca(const char *name, const char *value)
{
    for (size_t i = 0; i + 2 < cmd.argv.n; i++)
        if (strcmp(cmd.argv.v[i], "--mca") == 0 &&
            strcmp(cmd.argv.v[i + 1], name) == 0 &&
            strcmp(cmd.argv.v[i + 2], value) == 0)
            return 1;
    return 0;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(mpicmd, defaults)
{
    cr_assert_eq(build("a:2,b:2", 3,
                       ARGS("-np", "3", "-H", "a:2,b:2", "python3", "train.py",
                            "--lr", "1")),
                 0, "%s", err);
    cr_expect_str_eq(cmd.argv.v[0], "/usr/bin/mpirun");
    cr_expect_null(cmd.argv.v[cmd.argv.n]);
    cr_expect_geq(find("--tag-output"), 0);
    cr_expect(has_pair("-np", "3"));
    /* Only the slots that get ranks: b gets one. */
    cr_expect(has_pair("-H", "a:2,b:1"));
    cr_expect(has_pair("--bind-to", "none"));
    cr_expect(has_pair("--map-by", "slot"));
    cr_expect(!has_mca("pml", "ob1"));
    cr_expect_eq(find("--no-gpu-pinning"), -1);
    /* The wrapper, its plan, then the command untouched. */
    int w = find("/x/hvd-mpi-rank");
    cr_assert_geq(w, 0);
    cr_expect_str_eq(cmd.argv.v[w + 1], "--plan");
    cr_expect_str_eq(cmd.argv.v[w + 2], "a:2,b:1");
    cr_expect_str_eq(cmd.argv.v[w + 3], "--");
    cr_assert_eq(cmd.argv.n, (size_t)w + 8);
    cr_expect_str_eq(cmd.argv.v[w + 4], "python3");
    cr_expect_str_eq(cmd.argv.v[w + 7], "1");
    cr_expect_str_eq(cmd.hostfile, "");
    cr_expect_eq(geteuid() == 0, find("--allow-run-as-root") >= 0);
}

Test(mpicmd, user_mpi_args_come_before_the_wrapper)
{
    cr_assert_eq(build("localhost:2", 2,
                       ARGS("-np", "2", "--mpi-args",
                            "--mca btl_tcp_if_include 'lo' -x \"A B\"", "./t")),
                 0, "%s", err);
    int u = find("btl_tcp_if_include"), w = find("/x/hvd-mpi-rank");
    cr_assert_geq(u, 1);
    cr_expect_str_eq(cmd.argv.v[u - 1], "--mca");
    cr_expect_str_eq(cmd.argv.v[u + 1], "lo");
    cr_expect(has_pair("-x", "A B"));
    cr_expect_lt(u, w);
}

Test(mpicmd, user_binding_and_mapping_win)
{
    cr_assert_eq(build("localhost:2", 2,
                       ARGS("-np", "2", "--mpi-args",
                            "-bind-to core --map-by=node", "./t")),
                 0, "%s", err);
    cr_expect_eq(find("none"), -1);
    cr_expect(!has_pair("--map-by", "slot"));
    cr_expect(has_pair("-bind-to", "core"));
    cr_expect_geq(find("--map-by=node"), 0);
}

Test(mpicmd, binding_args_replace_placement)
{
    cr_assert_eq(build("localhost:2", 2,
                       ARGS("-np", "2", "--binding-args",
                            "--bind-to socket --map-by 'ppr:1:socket'", "./t")),
                 0, "%s", err);
    cr_expect(has_pair("--bind-to", "socket"));
    cr_expect(has_pair("--map-by", "ppr:1:socket"));
    cr_expect(!has_pair("--bind-to", "none"));
    cr_expect(!has_pair("--map-by", "slot"));
}

Test(mpicmd, tcp_unless_the_user_chose)
{
    cr_assert_eq(build("localhost:1", 1, ARGS("-np", "1", "--tcp", "./t")), 0,
                 "%s", err);
    cr_expect(has_mca("pml", "ob1"));
    cr_expect(has_mca("btl", "^openib"));
    hr_mpicmd_close(&cmd);
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
    hr_opts_close(&o);
    cr_assert_eq(
        build("localhost:1", 1,
              ARGS("-np", "1", "--tcp", "--mpi-args", "-mca pml ucx", "./t")),
        0, "%s", err);
    cr_expect(!has_mca("pml", "ob1"));
    cr_expect(has_mca("btl", "^openib"));
}

Test(mpicmd, ssh_settings)
{
    cr_assert_eq(build("a:1", 1,
                       ARGS("-np", "1", "-p", "2222", "-i", "/k/id",
                            "--ssh-accept-new", "./t")),
                 0, "%s", err);
    cr_expect(has_mca("plm_rsh_args",
                      "-p 2222 -i /k/id -o StrictHostKeyChecking=accept-new"));
}

Test(mpicmd, identity_file_with_a_blank_is_refused)
{
    cr_expect_eq(build("a:1", 1, ARGS("-np", "1", "-i", "/k/my id", "./t")),
                 HVD_EPARSE);
    cr_expect_not_null(strstr(err, "--ssh-identity-file"), "%s", err);
}

Test(mpicmd, bad_mpi_args_are_refused)
{
    cr_expect_eq(
        build("a:1", 1, ARGS("-np", "1", "--mpi-args", "-x 'A", "./t")),
        HVD_EPARSE);
    cr_expect_not_null(strstr(err, "--mpi-args has an unclosed ' quote"), "%s",
                       err);
}

Test(mpicmd, bad_binding_args_name_their_option)
{
    cr_expect_eq(
        build("a:1", 1,
              ARGS("-np", "1", "--binding-args", "--bind-to \"core", "./t")),
        HVD_EPARSE);
    cr_expect_not_null(strstr(err, "--binding-args"), "%s", err);
}

Test(mpicmd, ipv6_hosts_get_brackets)
{
    cr_assert_eq(build("[fe80::1]:2,b:1", 3, ARGS("-np", "3", "./t")), 0, "%s",
                 err);
    cr_expect(has_pair("-H", "[fe80::1]:2,b:1"));
}

Test(mpicmd, exports_names_never_values)
{
    setenv("HOROVOD_TEST_MPICMD", "s3cr3t-value", 1);
    setenv("HOROVOD_RANK", "5", 1);
    setenv("HOROVOD_SECRET_KEY", "00ff", 1);
    setenv("NOT_EXPORTED_MPICMD", "1", 1);
    int rc = build("a:1", 1, ARGS("-np", "1", "./t"));
    unsetenv("HOROVOD_TEST_MPICMD");
    unsetenv("HOROVOD_RANK");
    unsetenv("HOROVOD_SECRET_KEY");
    unsetenv("NOT_EXPORTED_MPICMD");
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(has_pair("-x", "HOROVOD_TEST_MPICMD"));
    cr_expect(!has_pair("-x", "HOROVOD_RANK"));
    cr_expect(!has_pair("-x", "HOROVOD_SECRET_KEY"));
    cr_expect(!has_pair("-x", "NOT_EXPORTED_MPICMD"));
    for (size_t i = 0; i < cmd.argv.n; i++) {
        cr_expect_null(strstr(cmd.argv.v[i], "s3cr3t"), "%s", cmd.argv.v[i]);
        cr_expect_null(strstr(cmd.argv.v[i], "00ff"), "%s", cmd.argv.v[i]);
    }
    /* Sorted by name, so the command is the same in every run. */
    const char *last = "";
    for (size_t i = 0; i + 1 < cmd.argv.n; i++)
        if (strcmp(cmd.argv.v[i], "-x") == 0) {
            cr_expect_lt(strcmp(last, cmd.argv.v[i + 1]), 0);
            last = cmd.argv.v[i + 1];
        }
}

Test(mpicmd, hostfile_is_written_and_removed)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/mpicmd-test-hosts-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("a slots=2\nb slots=2\n", f);
    fclose(f);
    int rc = build("a:2,b:2", 2, ARGS("-np", "2", "--hostfile", path, "./t"));
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_neq(cmd.hostfile[0], '\0');
    cr_expect(has_pair("--hostfile", cmd.hostfile));
    cr_expect_eq(find("-H"), -1);
    char buf[256] = {0};
    f = fopen(cmd.hostfile, "r");
    cr_assert_not_null(f, "%s", cmd.hostfile);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    /* Only the hosts that get ranks. */
    cr_expect_str_eq(buf, "a slots=2\n", "%zu bytes", n);
    char keep[PATH_MAX];
    snprintf(keep, sizeof(keep), "%s", cmd.hostfile);
    hr_mpicmd_close(&cmd);
    cr_expect_neq(access(keep, F_OK), 0);
    cr_expect_str_eq(cmd.hostfile, "");
    hr_mpicmd_close(&cmd); /* twice is safe */
    hr_mpicmd_close(NULL);
}

Test(mpicmd, kill_grace_sets_the_stop_step)
{
    cr_assert_eq(
        build("a:1", 1, ARGS("-np", "1", "--kill-grace", "2.5", "./t")), 0,
        "%s", err);
    cr_expect(has_mca("odls_base_sigkill_timeout", "3"));
    cr_expect_eq(hr_mpicmd_stop_step(&o), 3);
}

Test(mpicmd, stop_step)
{
    struct hr_opts x = {0};
    cr_expect_eq(hr_mpicmd_stop_step(&x), 1);
    x.kill_grace_set = 1;
    x.kill_grace = 0;
    cr_expect_eq(hr_mpicmd_stop_step(&x), 1);
    x.kill_grace = 0.2;
    cr_expect_eq(hr_mpicmd_stop_step(&x), 1);
    x.kill_grace = 1;
    cr_expect_eq(hr_mpicmd_stop_step(&x), 1);
    x.kill_grace = 1.01;
    cr_expect_eq(hr_mpicmd_stop_step(&x), 2);
    x.kill_grace = 7;
    cr_expect_eq(hr_mpicmd_stop_step(&x), 7);
}

Test(mpicmd, no_gpu_pinning_is_passed_on)
{
    cr_assert_eq(build("a:1", 1, ARGS("-np", "1", "--no-gpu-pinning", "./t")),
                 0, "%s", err);
    int w = find("/x/hvd-mpi-rank");
    cr_assert_geq(w, 0);
    cr_expect_str_eq(cmd.argv.v[w + 1], "--no-gpu-pinning");
}
