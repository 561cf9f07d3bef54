/* Unit tests for launcher/lib/discovery.c: host discovery script output. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "launcher/lib/discovery.h"
#include "launcher/lib/errcode.h"

static struct hvd_hostlist hl;
static char err[256];

static void setup(void)
{
    hvd_hostlist_init(&hl);
    err[0] = '\0';
}

static void teardown(void)
{
    hvd_hostlist_close(&hl);
}

TestSuite(discovery, .init = setup, .fini = teardown);

static int parse(const char *out, int default_slots)
{
    return hr_discovery_parse(&hl, out, strlen(out), default_slots, err,
                              sizeof(err));
}

/* Checks hl against "name:slots,name:slots,...". */
static void expect(const char *want)
{
    char got[512] = "";
    size_t used = 0;
    size_t i;

    for (i = 0; i < hl.n; i++)
        used +=
            (size_t)snprintf(got + used, sizeof(got) - used, "%s%s:%d",
                             i ? "," : "", hl.hosts[i].name, hl.hosts[i].slots);
    cr_assert_str_eq(got, want);
}

/* Horovod's own cases (test_elastic_discovery.py), default slots 3. */
Test(discovery, horovod_cases)
{
    static const struct {
        const char *out;
        const char *want;
    } cases[] = {
        {"", ""},
        {"host-1", "host-1:3"},
        {"host-1:2", "host-1:2"},
        {"host-1\nhost-5", "host-1:3,host-5:3"},
        {"host-1:2\nhost-4:3", "host-1:2,host-4:3"},
        {"\nhost-1:2\nhost-4:3", "host-1:2,host-4:3"},
        {"host-1:2\n\nhost-4:3", "host-1:2,host-4:3"},
        {"host-1:2\nhost-4:3\n", "host-1:2,host-4:3"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hvd_hostlist_close(&hl);
        cr_assert_eq(parse(cases[i].out, 3), 0, "case %zu: %s", i, err);
        expect(cases[i].want);
    }
}

Test(discovery, order_is_the_scripts)
{
    cr_assert_eq(parse("c:1\na:2\nb:3\n", 0), 0);
    expect("c:1,a:2,b:3");
}

Test(discovery, empty_and_blank_output_is_no_host)
{
    cr_assert_eq(hr_discovery_parse(&hl, NULL, 0, 0, err, sizeof(err)), 0);
    cr_assert_eq(hl.n, 0);
    cr_assert_eq(parse("\n\n  \n\t\r\n", 0), 0);
    cr_assert_eq(hl.n, 0);
    cr_assert_str_eq(err, "");
}

Test(discovery, whitespace_and_crlf)
{
    cr_assert_eq(parse("  a:2  \r\n\tb\t\r\n", 4), 0, "%s", err);
    expect("a:2,b:4");
}

Test(discovery, no_slots_and_no_default)
{
    cr_assert_eq(parse("a:2\nb\n", 0), HVD_EPARSE);
    cr_assert_eq(hl.n, 0);
    cr_assert_not_null(strstr(err, "line 2"), "%s", err);
    cr_assert_not_null(strstr(err, "--slots-per-host"), "%s", err);
    cr_assert_not_null(strstr(err, "'b'"), "%s", err);
}

Test(discovery, ipv6_brackets)
{
    cr_assert_eq(parse("[::1]:4\n[fe80::2]\nuser@[::3]:2\n", 1), 0, "%s", err);
    expect("::1:4,fe80::2:1,user@::3:2");
}

Test(discovery, ipv6_without_brackets)
{
    cr_assert_eq(parse("a:1\nfe80::1:4\n", 1), HVD_EPARSE);
    cr_assert_not_null(strstr(err, "line 2"), "%s", err);
    cr_assert_not_null(strstr(err, "brackets"), "%s", err);
    cr_assert_eq(hl.n, 0);
}

Test(discovery, user_at_host)
{
    cr_assert_eq(parse("alice@a:2\n", 0), 0, "%s", err);
    expect("alice@a:2");
}

/* Horovod reads lines into a set: identical repeats are one host. */
Test(discovery, identical_duplicates_fold)
{
    cr_assert_eq(parse("a:2\nb:1\na:2\n", 0), 0, "%s", err);
    expect("a:2,b:1");
}

/* A host keeps its first line's place and takes its last line's slots. */
Test(discovery, later_line_wins)
{
    cr_assert_eq(parse("a:2\nb:1\na:4\nc\nb:3\n", 5), 0, "%s", err);
    expect("a:4,b:3,c:5");
}

/* Horovod accepts a zero slot count; the host can run nothing. */
Test(discovery, zero_slots_leaves_host_out)
{
    cr_assert_eq(parse("a:0\nb:2\nc:00\n", 0), 0, "%s", err);
    expect("b:2");
    hvd_hostlist_close(&hl);
    cr_assert_eq(parse("a:2\nb:1\na:0\n", 0), 0, "%s", err);
    expect("b:1");
    hvd_hostlist_close(&hl);
    cr_assert_eq(parse("a:0\nb:1\na:2\n", 0), 0, "%s", err);
    expect("a:2,b:1");
}

Test(discovery, bad_lines_name_their_number)
{
    static const char *bad[] = {
        "a:1\nb:x\n",   "a:1\nb:-1\n", "a:1\nb:\n",   "a:1\nb c:2\n",
        "a:1\nb,c:2\n", "a:1\n:2\n",   "a:1\n[::1\n", "a:1\nb:2:\n",
        "a:1\n@b:2\n",  "a:1\nb:+2\n",
    };
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hvd_hostlist_close(&hl);
        err[0] = '\0';
        cr_assert_eq(parse(bad[i], 1), HVD_EPARSE, "case %zu", i);
        cr_assert_eq(hl.n, 0);
        cr_assert_eq(strncmp(err, "line 2: ", 8), 0, "case %zu: %s", i, err);
        cr_assert_null(strchr(err, '\n'), "case %zu: %s", i, err);
    }
}

Test(discovery, too_many_slots)
{
    cr_assert_eq(parse("a:99999999\n", 0), HVD_ERANGE);
    cr_assert_not_null(strstr(err, "line 1"), "%s", err);
    cr_assert_not_null(strstr(err, "maximum"), "%s", err);
    cr_assert_eq(parse("a\n", HVD_MAX_SLOTS + 1), HVD_ERANGE);
    cr_assert_not_null(strstr(err, "--slots-per-host"), "%s", err);
}

Test(discovery, nul_byte_is_an_error)
{
    static const char out[] = "a:1\nb\0c:1\n";

    cr_assert_eq(
        hr_discovery_parse(&hl, out, sizeof(out) - 1, 1, err, sizeof(err)),
        HVD_EPARSE);
    cr_assert_not_null(strstr(err, "line 2"), "%s", err);
}

Test(discovery, control_bytes_are_quoted)
{
    cr_assert_eq(parse("a\x1b[31m:1\n", 1), HVD_EPARSE);
    cr_assert_null(strchr(err, '\x1b'), "%s", err);
}

Test(discovery, bad_arguments)
{
    cr_assert_eq(hr_discovery_parse(NULL, "a", 1, 1, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_discovery_parse(&hl, NULL, 1, 1, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(parse("a:1", 0), 0);
    /* A list that is not empty is refused, and kept. */
    cr_assert_eq(parse("b:1", 0), HVD_EINVAL);
    expect("a:1");
}

/* The result stays a normal host list, which hvd_hostlist_add extends. */
Test(discovery, result_extends)
{
    char name[16];
    int i;

    cr_assert_eq(parse("a:1\nb:1\nc:1\n", 0), 0);
    for (i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        cr_assert_eq(hvd_hostlist_add(&hl, name, 1), 0);
    }
    cr_assert_eq(hl.n, 23);
    cr_assert_eq(hvd_hostlist_add(&hl, "b", 1), HVD_EDUP);
}

Test(discovery, many_hosts)
{
    static char out[10000 * 16];
    size_t used = 0;
    int i;

    for (i = 0; i < 10000; i++)
        used += (size_t)snprintf(out + used, sizeof(out) - used, "h%d:%d\n",
                                 9999 - i, 1 + i % 4);
    cr_assert_eq(hr_discovery_parse(&hl, out, used, 0, err, sizeof(err)), 0);
    cr_assert_eq(hl.n, 10000);
    cr_assert_str_eq(hl.hosts[0].name, "h9999");
    cr_assert_eq(hvd_hostlist_slots(&hl), 25000);
}

/* Horovod's test_update_available_hosts, step by step. */
Test(discovery, changes_as_horovod)
{
    static const char *steps[] = {"",    "a:2",      "a:2\nb:2",
                                  "b:2", "b:1\nc:1", "c:1\nb:1"};
    static const int want[] = {HR_DISCOVERY_ADDED, HR_DISCOVERY_ADDED,
                               HR_DISCOVERY_REMOVED,
                               HR_DISCOVERY_ADDED | HR_DISCOVERY_REMOVED, 0};
    struct hvd_hostlist prev;
    int changes;
    size_t i;

    hvd_hostlist_init(&prev);
    cr_assert_eq(parse(steps[0], 0), 0);
    for (i = 1; i < sizeof(steps) / sizeof(steps[0]); i++) {
        hvd_hostlist_close(&prev);
        prev = hl;
        hvd_hostlist_init(&hl);
        cr_assert_eq(parse(steps[i], 0), 0);
        cr_assert_eq(hr_discovery_changes(&prev, &hl, &changes), 0);
        cr_assert_eq(changes, want[i - 1], "step %zu: %d", i, changes);
    }
    hvd_hostlist_close(&prev);
}

Test(discovery, changes_in_slots)
{
    struct hvd_hostlist prev;
    int changes;

    hvd_hostlist_init(&prev);
    cr_assert_eq(hvd_hostlist_add(&prev, "a", 2), 0);
    cr_assert_eq(parse("a:3", 0), 0);
    cr_assert_eq(hr_discovery_changes(&prev, &hl, &changes), 0);
    cr_assert_eq(changes, HR_DISCOVERY_ADDED);
    cr_assert_eq(hr_discovery_changes(&hl, &prev, &changes), 0);
    cr_assert_eq(changes, HR_DISCOVERY_REMOVED);
    cr_assert_eq(hr_discovery_changes(&hl, &hl, &changes), 0);
    cr_assert_eq(changes, 0);
    cr_assert_eq(hr_discovery_changes(NULL, &hl, &changes), HVD_EINVAL);
    hvd_hostlist_close(&prev);
}
