/* Unit tests for launcher/lib/slurm.c: node lists and tasks per node. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/slurm.h"
#include "launcher/lib/strvec.h"

static struct hvd_strvec sv;
static struct hvd_slurm_tasks tasks;
static struct hvd_hostlist hl;
static char err[512];

static void setup(void)
{
    hvd_strvec_init(&sv);
    hvd_slurm_tasks_init(&tasks);
    hvd_hostlist_init(&hl);
    memset(err, 'Z', sizeof(err));
}

static void teardown(void)
{
    hvd_strvec_close(&sv);
    hvd_slurm_tasks_close(&tasks);
    hvd_hostlist_close(&hl);
}

TestSuite(slurm, .init = setup, .fini = teardown);

static int expand(const char *s)
{
    return hvd_slurm_expand(&sv, s, err, sizeof(err));
}

/* Expands s, which must succeed, and checks the names against want. */
static void expect_names(const char *s, const char *const *want, size_t n)
{
    size_t i;
    int rc;

    hvd_strvec_close(&sv);
    rc = expand(s);
    cr_assert_eq(rc, 0, "'%s' gave %d: %s", s, rc, err);
    cr_assert_str_eq(err, "");
    cr_assert_eq(sv.n, n, "'%s' gave %zu names, not %zu", s, sv.n, n);
    for (i = 0; i < n; i++)
        cr_assert_str_eq(sv.v[i], want[i], "'%s' name %zu", s, i);
    cr_assert_null(sv.v[n]);
}

#define EXPECT_NAMES(s, ...)                                                   \
    do {                                                                       \
        static const char *const want_[] = {__VA_ARGS__};                      \
        expect_names(s, want_, sizeof(want_) / sizeof(want_[0]));              \
    } while (0)

/* Expands s, which must fail with rc and exactly the message want. */
static void expect_error(const char *s, int rc, const char *want)
{
    int got;

    hvd_strvec_close(&sv);
    got = expand(s);
    cr_assert_eq(got, rc, "'%s' gave %d, not %d: %s", s, got, rc, err);
    cr_assert_str_eq(err, want, "'%s'", s);
    cr_assert_eq(sv.n, 0, "'%s' left %zu names", s, sv.n);
}

static int parse_tasks(const char *s)
{
    hvd_slurm_tasks_close(&tasks);
    return hvd_slurm_tasks_parse(&tasks, s, err, sizeof(err));
}

/* Parses tasks per node s, which must succeed, into want. */
static void expect_tasks(const char *s, const int *want, size_t n)
{
    size_t i;
    int rc;

    rc = parse_tasks(s);
    cr_assert_eq(rc, 0, "'%s' gave %d: %s", s, rc, err);
    cr_assert_str_eq(err, "");
    cr_assert_eq(tasks.n, n, "'%s' gave %zu counts, not %zu", s, tasks.n, n);
    for (i = 0; i < n; i++)
        cr_assert_eq(tasks.counts[i], want[i], "'%s' count %zu is %d, not %d",
                     s, i, tasks.counts[i], want[i]);
}

#define EXPECT_TASKS(s, ...)                                                   \
    do {                                                                       \
        static const int want_[] = {__VA_ARGS__};                              \
        expect_tasks(s, want_, sizeof(want_) / sizeof(want_[0]));              \
    } while (0)

/* Parses tasks per node s, which must fail with rc and message want. */
static void expect_tasks_error(const char *s, int rc, const char *want)
{
    int got = parse_tasks(s);

    cr_assert_eq(got, rc, "'%s' gave %d, not %d: %s", s, got, rc, err);
    cr_assert_str_eq(err, want, "'%s'", s);
    cr_assert_eq(tasks.n, 0);
    cr_assert_null(tasks.counts);
}

static int hostlist(const char *nodes, const char *tpn)
{
    return hvd_slurm_hostlist(&hl, nodes, tpn, err, sizeof(err));
}

static void expect_host(size_t i, const char *name, int slots)
{
    cr_assert_lt(i, hl.n, "host %zu missing (only %zu)", i, hl.n);
    cr_assert_str_eq(hl.hosts[i].name, name);
    cr_assert_eq(hl.hosts[i].slots, slots, "host %s has %d slots, not %d", name,
                 hl.hosts[i].slots, slots);
}

/* Node lists: the accepted forms. */

Test(slurm, plain_names)
{
    EXPECT_NAMES("host1", "host1");
    EXPECT_NAMES("host1,host2", "host1", "host2");
    EXPECT_NAMES("a.example.com,b_c,d-e", "a.example.com", "b_c", "d-e");
}

Test(slurm, single_range)
{
    EXPECT_NAMES("node[1-3]", "node1", "node2", "node3");
    EXPECT_NAMES("node[5-5]", "node5");
    EXPECT_NAMES("node[7]", "node7");
}

Test(slurm, ranges_and_singles_mixed)
{
    EXPECT_NAMES("node[01-04,07]", "node01", "node02", "node03", "node04",
                 "node07");
    EXPECT_NAMES("n[1,3-4,9,11-12]", "n1", "n3", "n4", "n9", "n11", "n12");
    /* The order is the one written, not sorted. */
    EXPECT_NAMES("n[9,2-3,1]", "n9", "n2", "n3", "n1");
}

Test(slurm, several_entries)
{
    EXPECT_NAMES("node[01-04,07],gpu-a[1-2]", "node01", "node02", "node03",
                 "node04", "node07", "gpu-a1", "gpu-a2");
    EXPECT_NAMES("login,c[1-2],x", "login", "c1", "c2", "x");
}

Test(slurm, zero_padding_kept)
{
    EXPECT_NAMES("n[08-11]", "n08", "n09", "n10", "n11");
    EXPECT_NAMES("n[001-003]", "n001", "n002", "n003");
    EXPECT_NAMES("n[0]", "n0");
    EXPECT_NAMES("n[00]", "n00");
    /* Each range keeps its own width. */
    EXPECT_NAMES("n[1,02,003]", "n1", "n02", "n003");
}

Test(slurm, no_padding_without_leading_zeros)
{
    EXPECT_NAMES("n[1-10]", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8",
                 "n9", "n10");
    EXPECT_NAMES("n[9-11]", "n9", "n10", "n11");
}

Test(slurm, padding_follows_the_lower_bound)
{
    /* Numbers wider than the padding are written in full. */
    EXPECT_NAMES("n[098-101]", "n098", "n099", "n100", "n101");
    EXPECT_NAMES("n[98-0101]", "n98", "n99", "n100", "n101");
    EXPECT_NAMES("n[01-100]", "n01", "n02", "n03", "n04", "n05", "n06", "n07",
                 "n08", "n09", "n10", "n11", "n12", "n13", "n14", "n15", "n16",
                 "n17", "n18", "n19", "n20", "n21", "n22", "n23", "n24", "n25",
                 "n26", "n27", "n28", "n29", "n30", "n31", "n32", "n33", "n34",
                 "n35", "n36", "n37", "n38", "n39", "n40", "n41", "n42", "n43",
                 "n44", "n45", "n46", "n47", "n48", "n49", "n50", "n51", "n52",
                 "n53", "n54", "n55", "n56", "n57", "n58", "n59", "n60", "n61",
                 "n62", "n63", "n64", "n65", "n66", "n67", "n68", "n69", "n70",
                 "n71", "n72", "n73", "n74", "n75", "n76", "n77", "n78", "n79",
                 "n80", "n81", "n82", "n83", "n84", "n85", "n86", "n87", "n88",
                 "n89", "n90", "n91", "n92", "n93", "n94", "n95", "n96", "n97",
                 "n98", "n99", "n100");
}

Test(slurm, suffix_after_brackets)
{
    EXPECT_NAMES("n[1-3]-ib", "n1-ib", "n2-ib", "n3-ib");
    EXPECT_NAMES("n[1-2].cluster.org,login.cluster.org", "n1.cluster.org",
                 "n2.cluster.org", "login.cluster.org");
}

Test(slurm, brackets_without_prefix)
{
    EXPECT_NAMES("[1-2]", "1", "2");
    EXPECT_NAMES("[1-2]x", "1x", "2x");
}

Test(slurm, several_bracket_groups)
{
    /* The cartesian product, the leftmost group changing slowest. */
    EXPECT_NAMES("rack[1-2]-node[01-02]", "rack1-node01", "rack1-node02",
                 "rack2-node01", "rack2-node02");
    EXPECT_NAMES("r[1,3]n[1-2]s[7]x", "r1n1s7x", "r3n1s7x", "r1n2s7x",
                 "r3n2s7x");
    EXPECT_NAMES("a[1-2][3-4]", "a13", "a14", "a23", "a24");
    EXPECT_NAMES("r[2,1]-n[1-2,5],x[1-2]", "r2-n1", "r2-n2", "r2-n5", "r1-n1",
                 "r1-n2", "r1-n5", "x1", "x2");
}

Test(slurm, three_or_more_groups_in_slurms_order)
{
    /*
     * Slurm loops over the groups before the last one right to left, each
     * around the next, and expands the last one innermost: so the last
     * group changes fastest, then the first, and the one before the last
     * changes slowest. This is what "scontrol show hostnames" prints.
     */
    EXPECT_NAMES("a[1-2]b[1-2]c[1-2]", "a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2",
                 "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2");
    EXPECT_NAMES("w[1-2]x[1-2]y[1-2]z[1-2]", "w1x1y1z1", "w1x1y1z2", "w2x1y1z1",
                 "w2x1y1z2", "w1x2y1z1", "w1x2y1z2", "w2x2y1z1", "w2x2y1z2",
                 "w1x1y2z1", "w1x1y2z2", "w2x1y2z1", "w2x1y2z2", "w1x2y2z1",
                 "w1x2y2z2", "w2x2y2z1", "w2x2y2z2");
    /* Ranges lists and padding work the same in every group. */
    EXPECT_NAMES("p[1,3]q[08-09]r[1]", "p1q08r1", "p3q08r1", "p1q09r1",
                 "p3q09r1");
}

Test(slurm, repeated_names_kept)
{
    /* Expansion keeps repeats; the host list refuses them. */
    EXPECT_NAMES("a,a,n[1-2],n[2]", "a", "a", "n1", "n2", "n2");
}

Test(slurm, appends_to_the_vector)
{
    cr_assert_eq(hvd_strvec_push(&sv, "first"), 0);
    cr_assert_eq(expand("n[1-2]"), 0);
    cr_assert_eq(sv.n, 3);
    cr_assert_str_eq(sv.v[0], "first");
    cr_assert_str_eq(sv.v[2], "n2");
}

Test(slurm, failure_leaves_the_vector_as_it_was)
{
    cr_assert_eq(hvd_strvec_push(&sv, "first"), 0);
    /* The first entries expand before the bad one is reached. */
    cr_assert_eq(expand("n[1-4],m[1-3],bad]"), HVD_EPARSE);
    cr_assert_eq(sv.n, 1);
    cr_assert_str_eq(sv.v[0], "first");
    cr_assert_null(sv.v[1]);
}

Test(slurm, limits_reached_exactly)
{
    char name[HVD_SLURM_NAME_MAX + 2];
    char list[64];

    /* A name of the full length is fine. */
    memset(name, 'a', HVD_SLURM_NAME_MAX);
    name[HVD_SLURM_NAME_MAX] = '\0';
    cr_assert_eq(expand(name), 0, "%s", err);
    cr_assert_eq(strlen(sv.v[0]), HVD_SLURM_NAME_MAX);
    hvd_strvec_close(&sv);

    /* So is an expansion of exactly the most hosts, over two entries. */
    snprintf(list, sizeof(list), "n[1-%d],m[1-10]", HVD_SLURM_MAX_HOSTS - 10);
    cr_assert_eq(expand(list), 0, "%s", err);
    cr_assert_eq(sv.n, HVD_SLURM_MAX_HOSTS);
    cr_assert_str_eq(sv.v[HVD_SLURM_MAX_HOSTS - 11], "n99990");
    cr_assert_str_eq(sv.v[HVD_SLURM_MAX_HOSTS - 1], "m10");
}

Test(slurm, large_numbers)
{
    EXPECT_NAMES("n[999999999999999998-999999999999999999]",
                 "n999999999999999998", "n999999999999999999");
}

/* Node lists: malformed input. */

Test(slurm, empty_list)
{
    expect_error("", HVD_EPARSE, "Slurm node list is empty");
}

Test(slurm, empty_entries)
{
    expect_error("a,,b", HVD_EPARSE,
                 "Slurm node list: empty entry at offset 2");
    expect_error(",a", HVD_EPARSE, "Slurm node list: empty entry at offset 0");
    expect_error("a,", HVD_EPARSE, "Slurm node list: empty entry at offset 2");
    expect_error(",", HVD_EPARSE, "Slurm node list: empty entry at offset 0");
}

Test(slurm, unbalanced_brackets)
{
    expect_error("node[1-3", HVD_EPARSE,
                 "Slurm node list: '[' has no matching ']' at offset 4 in "
                 "'node[1-3'");
    expect_error("a,node[1-3,b", HVD_EPARSE,
                 "Slurm node list: '[' has no matching ']' at offset 6 in "
                 "'node[1-3,b'");
    expect_error("node1-3]", HVD_EPARSE,
                 "Slurm node list: ']' has no matching '[' at offset 7 in "
                 "'node1-3]'");
    expect_error("n[1]]", HVD_EPARSE,
                 "Slurm node list: ']' has no matching '[' at offset 4 in "
                 "'n[1]]'");
    expect_error("ok,]", HVD_EPARSE,
                 "Slurm node list: ']' has no matching '[' at offset 3 in "
                 "']'");
    expect_error("n[", HVD_EPARSE,
                 "Slurm node list: '[' has no matching ']' at offset 1 in "
                 "'n['");
}

Test(slurm, nested_brackets)
{
    expect_error("n[1[2]]", HVD_EPARSE,
                 "Slurm node list: '[' inside brackets at offset 3 in "
                 "'n[1[2]]'");
    expect_error("n[[1]]", HVD_EPARSE,
                 "Slurm node list: '[' inside brackets at offset 2 in "
                 "'n[[1]]'");
}

Test(slurm, empty_brackets_and_ranges)
{
    expect_error("n[]", HVD_EPARSE,
                 "Slurm node list: empty brackets at offset 1 in 'n[]'");
    expect_error("n[1,]", HVD_EPARSE,
                 "Slurm node list: empty range at offset 4 in 'n[1,]'");
    expect_error("n[,1]", HVD_EPARSE,
                 "Slurm node list: empty range at offset 2 in 'n[,1]'");
    expect_error("n[1,,2]", HVD_EPARSE,
                 "Slurm node list: empty range at offset 4 in 'n[1,,2]'");
}

Test(slurm, reversed_range)
{
    expect_error("n[5-2]", HVD_ERANGE,
                 "Slurm node list: range '5-2' goes backwards at offset 2 in "
                 "'n[5-2]'");
    expect_error("a,n[1,10-09]", HVD_ERANGE,
                 "Slurm node list: range '10-09' goes backwards at offset 6 "
                 "in 'n[1,10-09]'");
}

/* Checks that s is refused as "not a number or range", el at offset off. */
static void expect_not_range(const char *s, const char *el, size_t off)
{
    char want[512];

    snprintf(want, sizeof(want),
             "Slurm node list: '%s' is not a number or range (expected N or "
             "N-M) at offset %zu in '%s'",
             el, off, s);
    expect_error(s, HVD_EPARSE, want);
}

Test(slurm, non_digits_in_brackets)
{
    expect_not_range("n[a-3]", "a-3", 2);
    expect_not_range("n[1-b]", "1-b", 2);
    expect_not_range("n[1x]", "1x", 2);
    expect_not_range("n[1-]", "1-", 2);
    expect_not_range("n[-3]", "-3", 2);
    expect_not_range("n[-]", "-", 2);
    expect_not_range("n[1-2-3]", "1-2-3", 2);
    expect_not_range("n[1--3]", "1--3", 2);
    expect_not_range("n[+1]", "+1", 2);
    expect_not_range("n[0x10]", "0x10", 2);
    /* Slurm's 3-D boxes are not supported. */
    expect_not_range("bgl[000x133]", "000x133", 4);
    expect_not_range("n[1,2,abc]", "abc", 6);
}

Test(slurm, whitespace_refused)
{
    expect_error("a, b", HVD_EPARSE,
                 "Slurm node list: whitespace at offset 2 in ' b'; separate "
                 "entries with commas only");
    expect_error("a b", HVD_EPARSE,
                 "Slurm node list: whitespace at offset 1 in 'a b'; separate "
                 "entries with commas only");
    expect_error("n[1, 2]", HVD_EPARSE,
                 "Slurm node list: whitespace at offset 4 in 'n[1, 2]'; "
                 "separate entries with commas only");
    expect_error("a\tb", HVD_EPARSE,
                 "Slurm node list: whitespace at offset 1 in 'a?b'; separate "
                 "entries with commas only");
    expect_error("a\n", HVD_EPARSE,
                 "Slurm node list: whitespace at offset 1 in 'a?'; separate "
                 "entries with commas only");
}

Test(slurm, control_characters_refused)
{
    expect_error("a\x1b[31m", HVD_EPARSE,
                 "Slurm node list: control character at offset 1 in "
                 "'a?[31m'");
    expect_error("n[1\x7f]", HVD_EPARSE,
                 "Slurm node list: control character at offset 3 in "
                 "'n[1?]'");
}

Test(slurm, range_too_large)
{
    expect_error("n[1-100001]", HVD_ERANGE,
                 "Slurm node list: range '1-100001' spans more than 100000 "
                 "hosts at offset 2 in 'n[1-100001]'");
    expect_error("n[0-999999999]", HVD_ERANGE,
                 "Slurm node list: range '0-999999999' spans more than 100000 "
                 "hosts at offset 2 in 'n[0-999999999]'");
}

Test(slurm, expansion_too_large)
{
    /* Each group is small; their product is not. */
    expect_error("a[1-1000]b[1-1000]", HVD_ERANGE,
                 "Slurm node list: the list grows past 100000 hosts at offset "
                 "0 in 'a[1-1000]b[1-1000]'");
    /* Many ranges in one group add up. */
    expect_error("x,n[1-60000,1-40000,7]", HVD_ERANGE,
                 "Slurm node list: the list grows past 100000 hosts at offset "
                 "2 in 'n[1-60000,1-40000,7]'");
    /* So do the entries of the list. */
    expect_error("n[1-99999],m[1-2]", HVD_ERANGE,
                 "Slurm node list: the list grows past 100000 hosts at offset "
                 "11 in 'm[1-2]'");
}

Test(slurm, number_too_large)
{
    expect_error("n[1000000000000000000]", HVD_ERANGE,
                 "Slurm node list: '1000000000000000000' holds a number "
                 "larger than 999999999999999999 at offset 2 in "
                 "'n[1000000000000000000]'");
    expect_error("n[1-99999999999999999999999]", HVD_ERANGE,
                 "Slurm node list: '1-99999999999999999999999' holds a number "
                 "larger than 999999999999999999 at offset 2 in "
                 "'n[1-99999999999999999999999]'");
}

Test(slurm, name_too_long)
{
    char list[HVD_SLURM_NAME_MAX + 64];
    char want[1024];
    char q[81];

    memset(list, 'a', HVD_SLURM_NAME_MAX + 1);
    list[HVD_SLURM_NAME_MAX + 1] = '\0';
    memcpy(q, list, 80);
    q[80] = '\0';
    /* The quote stops after 80 bytes. */
    snprintf(want, sizeof(want),
             "Slurm node list: a host name is longer than 255 bytes at "
             "offset 0 in '%s'",
             q);
    expect_error(list, HVD_ERANGE, want);

    /* A range can push names over the limit: 252 + "[9-10]" gives 254. */
    memset(list, 'b', 252);
    strcpy(list + 252, "[9-10]x");
    cr_assert_eq(expand(list), 0, "%s", err);
    cr_assert_eq(strlen(sv.v[1]), 255);
    hvd_strvec_close(&sv);
    strcpy(list + 252, "[9-10]xy");
    cr_assert_eq(expand(list), HVD_ERANGE);
    cr_assert(strstr(err, "a host name is longer than 255 bytes") != NULL, "%s",
              err);

    /* So can padding. */
    memset(list, '0', 300);
    strcpy(list + 300, "1");
    snprintf(want, sizeof(want), "n[%s]", list);
    cr_assert_eq(expand(want), HVD_ERANGE);
    cr_assert(strstr(err, "is longer than a host name may be at offset 2") !=
                  NULL,
              "%s", err);
}

Test(slurm, first_error_wins)
{
    /* Errors are reported left to right. */
    expect_error("n[5-2],m[", HVD_ERANGE,
                 "Slurm node list: range '5-2' goes backwards at offset 2 in "
                 "'n[5-2]'");
    expect_error("n[a],m[5-2]", HVD_EPARSE,
                 "Slurm node list: 'a' is not a number or range (expected N "
                 "or N-M) at offset 2 in 'n[a]'");
}

Test(slurm, expand_bad_arguments)
{
    cr_assert_eq(hvd_slurm_expand(NULL, "a", err, sizeof(err)), HVD_EINVAL);
    cr_assert_str_eq(err, "invalid argument");
    cr_assert_eq(hvd_slurm_expand(&sv, NULL, err, sizeof(err)), HVD_EINVAL);
    /* No message buffer is fine. */
    cr_assert_eq(hvd_slurm_expand(&sv, "n[", NULL, 0), HVD_EPARSE);
    cr_assert_eq(hvd_slurm_expand(&sv, "n[1-2]", NULL, 0), 0);
    cr_assert_eq(sv.n, 2);
}

Test(slurm, short_message_buffer)
{
    char small[16];

    cr_assert_eq(hvd_slurm_expand(&sv, "n[", small, sizeof(small)), HVD_EPARSE);
    cr_assert_str_eq(small, "Slurm node list");
}

/* Tasks per node. */

Test(slurm, tasks_forms)
{
    EXPECT_TASKS("4", 4);
    EXPECT_TASKS("2(x3),1", 2, 2, 2, 1);
    EXPECT_TASKS("1,2(x2)", 1, 2, 2);
    EXPECT_TASKS("8(x1)", 8);
    EXPECT_TASKS("3,1,4,1,5", 3, 1, 4, 1, 5);
    EXPECT_TASKS("04(x02)", 4, 4);
    EXPECT_TASKS("65536", HVD_MAX_SLOTS);
}

Test(slurm, tasks_most_nodes)
{
    char s[64];

    snprintf(s, sizeof(s), "1(x%d)", HVD_SLURM_MAX_HOSTS - 1);
    cr_assert_eq(parse_tasks(strcat(s, ",2")), 0, "%s", err);
    cr_assert_eq(tasks.n, HVD_SLURM_MAX_HOSTS);
    cr_assert_eq(tasks.counts[HVD_SLURM_MAX_HOSTS - 1], 2);
}

Test(slurm, tasks_empty)
{
    expect_tasks_error("", HVD_EPARSE, "Slurm tasks per node is empty");
    expect_tasks_error("1,,2", HVD_EPARSE,
                       "Slurm tasks per node: empty entry at offset 2");
    expect_tasks_error(",1", HVD_EPARSE,
                       "Slurm tasks per node: empty entry at offset 0");
    expect_tasks_error("1,", HVD_EPARSE,
                       "Slurm tasks per node: empty entry at offset 2");
}

/* Checks that s is a malformed tasks list, entry el at offset off. */
static void expect_tasks_malformed(const char *s, const char *el, size_t off)
{
    char want[512];

    snprintf(want, sizeof(want),
             "Slurm tasks per node: malformed entry, expected N or N(xR) in "
             "'%s' at offset %zu",
             el, off);
    expect_tasks_error(s, HVD_EPARSE, want);
}

Test(slurm, tasks_malformed)
{
    expect_tasks_malformed("x", "x", 0);
    expect_tasks_malformed("2x", "2x", 0);
    expect_tasks_malformed("2(3)", "2(3)", 0);
    expect_tasks_malformed("2(x3", "2(x3", 0);
    expect_tasks_malformed("2(x)", "2(x)", 0);
    expect_tasks_malformed("2(x3))", "2(x3))", 0);
    expect_tasks_malformed("2(x3)1", "2(x3)1", 0);
    expect_tasks_malformed("2(X3)", "2(X3)", 0);
    expect_tasks_malformed("(x3)", "(x3)", 0);
    expect_tasks_malformed("-1", "-1", 0);
    expect_tasks_malformed("+1", "+1", 0);
    expect_tasks_malformed("2(x-3)", "2(x-3)", 0);
    expect_tasks_malformed("1,2(x3)(x2)", "2(x3)(x2)", 2);
    expect_tasks_malformed("1,1.5", "1.5", 2);
    expect_tasks_malformed("2(x3,1)", "2(x3", 0);
}

Test(slurm, tasks_whitespace)
{
    expect_tasks_error("1, 2", HVD_EPARSE,
                       "Slurm tasks per node: whitespace at offset 2 in ' 2'; "
                       "separate entries with commas only");
    expect_tasks_error("2(x 3)", HVD_EPARSE,
                       "Slurm tasks per node: whitespace at offset 3 in "
                       "'2(x 3)'; separate entries with commas only");
    expect_tasks_error("2\x01", HVD_EPARSE,
                       "Slurm tasks per node: control character at offset 1 "
                       "in '2?'");
}

Test(slurm, tasks_out_of_range)
{
    expect_tasks_error("0", HVD_ERANGE,
                       "Slurm tasks per node: task count must be between 1 "
                       "and 65536 in '0' at offset 0");
    expect_tasks_error("1,0(x2)", HVD_ERANGE,
                       "Slurm tasks per node: task count must be between 1 "
                       "and 65536 in '0(x2)' at offset 2");
    expect_tasks_error("65537", HVD_ERANGE,
                       "Slurm tasks per node: task count must be between 1 "
                       "and 65536 in '65537' at offset 0");
    expect_tasks_error("99999999999999999999999(x2)", HVD_ERANGE,
                       "Slurm tasks per node: task count must be between 1 "
                       "and 65536 in '99999999999999999999999(x2)' at offset "
                       "0");
    expect_tasks_error("2(x0)", HVD_ERANGE,
                       "Slurm tasks per node: repeat count must be at least 1 "
                       "in '2(x0)' at offset 0");
}

Test(slurm, tasks_too_many_nodes)
{
    expect_tasks_error("1(x100001)", HVD_ERANGE,
                       "Slurm tasks per node: the list covers more than "
                       "100000 nodes in '1(x100001)' at offset 0");
    expect_tasks_error("1(x99999999999999999999999)", HVD_ERANGE,
                       "Slurm tasks per node: the list covers more than "
                       "100000 nodes in '1(x99999999999999999999999)' at "
                       "offset 0");
    expect_tasks_error("1(x60000),2(x40000),3", HVD_ERANGE,
                       "Slurm tasks per node: the list covers more than "
                       "100000 nodes in '3' at offset 20");
}

Test(slurm, tasks_bad_arguments)
{
    cr_assert_eq(hvd_slurm_tasks_parse(NULL, "1", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hvd_slurm_tasks_parse(&tasks, NULL, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_str_eq(err, "invalid argument");
    /* t must be empty: a second parse is refused, the first kept. */
    cr_assert_eq(hvd_slurm_tasks_parse(&tasks, "2", err, sizeof(err)), 0);
    cr_assert_eq(hvd_slurm_tasks_parse(&tasks, "3", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(tasks.n, 1);
    cr_assert_eq(tasks.counts[0], 2);
}

Test(slurm, tasks_init_close)
{
    hvd_slurm_tasks_init(NULL);
    hvd_slurm_tasks_close(NULL);
    cr_assert_eq(parse_tasks("1(x3)"), 0);
    hvd_slurm_tasks_close(&tasks);
    cr_assert_eq(tasks.n, 0);
    cr_assert_null(tasks.counts);
    /* Closing twice is fine, and the struct is reusable. */
    hvd_slurm_tasks_close(&tasks);
    cr_assert_eq(parse_tasks("5"), 0);
    cr_assert_eq(tasks.counts[0], 5);
}

/* Host lists. */

Test(slurm, hostlist_pairs_nodes_and_tasks)
{
    cr_assert_eq(hostlist("node[01-03],gpu-a1", "2(x3),1"), 0, "%s", err);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 4);
    expect_host(0, "node01", 2);
    expect_host(1, "node02", 2);
    expect_host(2, "node03", 2);
    expect_host(3, "gpu-a1", 1);
    cr_assert_eq(hvd_hostlist_slots(&hl), 7);
}

Test(slurm, hostlist_single_count)
{
    cr_assert_eq(hostlist("solo", "4"), 0, "%s", err);
    cr_assert_eq(hl.n, 1);
    expect_host(0, "solo", 4);
}

Test(slurm, hostlist_several_groups)
{
    cr_assert_eq(hostlist("rack[1-2]-n[1-2]-ib", "1,2(x2),3"), 0, "%s", err);
    expect_host(0, "rack1-n1-ib", 1);
    expect_host(1, "rack1-n2-ib", 2);
    expect_host(2, "rack2-n1-ib", 2);
    expect_host(3, "rack2-n2-ib", 3);
}

Test(slurm, hostlist_without_tasks)
{
    cr_assert_eq(hostlist("n[1-3]", NULL), 0, "%s", err);
    cr_assert_eq(hl.n, 3);
    expect_host(0, "n1", 1);
    expect_host(2, "n3", 1);
}

Test(slurm, hostlist_appends)
{
    cr_assert_eq(hvd_hostlist_add(&hl, "head", 8), 0);
    cr_assert_eq(hostlist("n[1-2]", "3(x2)"), 0, "%s", err);
    cr_assert_eq(hl.n, 3);
    expect_host(0, "head", 8);
    expect_host(2, "n2", 3);
}

Test(slurm, hostlist_many_hosts)
{
    char name[32];
    size_t i;

    cr_assert_eq(hostlist("n[0001-2000]", "4(x1999),1"), 0, "%s", err);
    cr_assert_eq(hl.n, 2000);
    for (i = 0; i < hl.n; i++) {
        snprintf(name, sizeof(name), "n%04zu", i + 1);
        expect_host(i, name, i + 1 < hl.n ? 4 : 1);
    }
    cr_assert_eq(hvd_hostlist_slots(&hl), 4 * 1999 + 1);
}

Test(slurm, hostlist_too_few_counts)
{
    cr_assert_eq(hostlist("n[1-4]", "2(x3)"), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm tasks per node '2(x3)' covers 3 nodes, but "
                          "the node list names 4");
    cr_assert_eq(hl.n, 0);
}

Test(slurm, hostlist_too_many_counts)
{
    cr_assert_eq(hostlist("n1", "1,1"), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm tasks per node '1,1' covers 2 nodes, but the "
                          "node list names 1");
    cr_assert_eq(hostlist("n[1-2]", "2"), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm tasks per node '2' covers 1 node, but the "
                          "node list names 2");
    cr_assert_eq(hl.n, 0);
}

Test(slurm, hostlist_bad_node_list)
{
    cr_assert_eq(hvd_hostlist_add(&hl, "keep", 1), 0);
    cr_assert_eq(hostlist("n[2-1]", "1"), HVD_ERANGE);
    cr_assert_str_eq(err, "Slurm node list: range '2-1' goes backwards at "
                          "offset 2 in 'n[2-1]'");
    cr_assert_eq(hl.n, 1);
    expect_host(0, "keep", 1);
}

Test(slurm, hostlist_bad_tasks)
{
    cr_assert_eq(hostlist("n[1-2]", "2(x2"), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm tasks per node: malformed entry, expected N "
                          "or N(xR) in '2(x2' at offset 0");
    cr_assert_eq(hl.n, 0);
    cr_assert_eq(hostlist("n[1-2]", "0(x2)"), HVD_ERANGE);
    cr_assert_eq(hl.n, 0);
}

Test(slurm, hostlist_repeated_node)
{
    cr_assert_eq(hostlist("n[1-3],n2", "1(x4)"), HVD_EDUP);
    cr_assert_str_eq(err, "Slurm node list names host 'n2' more than once");
    /* The hosts added before the repeat are taken back. */
    cr_assert_eq(hl.n, 0);
}

Test(slurm, hostlist_node_already_listed)
{
    cr_assert_eq(hvd_hostlist_add(&hl, "n2", 5), 0);
    cr_assert_eq(hostlist("n[1-3]", "1(x3)"), HVD_EDUP);
    cr_assert_str_eq(err, "host 'n2' of the Slurm node list is already in the "
                          "host list");
    cr_assert_eq(hl.n, 1);
    expect_host(0, "n2", 5);
}

Test(slurm, hostlist_bad_arguments)
{
    cr_assert_eq(hvd_slurm_hostlist(NULL, "a", "1", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_str_eq(err, "invalid argument");
    cr_assert_eq(hvd_slurm_hostlist(&hl, NULL, "1", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hostlist("", "1"), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm node list is empty");
    cr_assert_eq(hostlist("a", ""), HVD_EPARSE);
    cr_assert_str_eq(err, "Slurm tasks per node is empty");
    cr_assert_eq(hl.n, 0);
}
