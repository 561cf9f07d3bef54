/* Unit tests for -H specs, hostfiles and host lists (lib/hostspec.c). */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/errcode.h"
#include "tmppath.h"

#define MALFORMED_TAIL "': expected host:slots with slots a positive integer"

static struct hvd_hostlist hl;
static char err[512];

static void setup(void)
{
    hvd_hostlist_init(&hl);
    memset(err, 'Z', sizeof(err));
}

static void teardown(void)
{
    hvd_hostlist_close(&hl);
}

TestSuite(hostspec, .init = setup, .fini = teardown);

static int spec(const char *s)
{
    return hvd_hostlist_parse_spec(&hl, s, err, sizeof(err));
}

static int text(const char *s)
{
    return hvd_hostlist_parse_text(&hl, s, strlen(s), "hf", err, sizeof(err));
}

static void expect_host(size_t i, const char *name, int slots)
{
    cr_assert_lt(i, hl.n, "host %zu missing (only %zu)", i, hl.n);
    cr_assert_str_eq(hl.hosts[i].name, name);
    cr_assert_eq(hl.hosts[i].slots, slots, "host %s has %d slots, not %d", name,
                 hl.hosts[i].slots, slots);
}

/* Parses a spec that must be malformed, with the message quoting token. */
static void expect_malformed(const char *s, const char *token, int rc)
{
    char want[512];
    int got;

    hvd_hostlist_close(&hl);
    snprintf(want, sizeof(want), "malformed -H entry '%s" MALFORMED_TAIL,
             token);
    got = spec(s);
    cr_assert_eq(got, rc, "spec '%s' gave %d", s, got);
    cr_assert_str_eq(err, want, "spec '%s'", s);
}

/* -H specs. */

Test(hostspec, spec_hosts_and_slots)
{
    cr_assert_eq(spec("a:2,b,c:3"), 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 3);
    expect_host(0, "a", 2);
    expect_host(1, "b", 1);
    expect_host(2, "c", 3);
    cr_assert_eq(hvd_hostlist_slots(&hl), 6);
}

Test(hostspec, spec_single_bare_host)
{
    cr_assert_eq(spec("localhost"), 0);
    cr_assert_eq(hl.n, 1);
    expect_host(0, "localhost", 1);
}

Test(hostspec, spec_slot_numbers)
{
    cr_assert_eq(spec("a:08,b:65536,c:1"), 0);
    expect_host(0, "a", 8);
    expect_host(1, "b", HVD_MAX_SLOTS);
    expect_host(2, "c", 1);
}

Test(hostspec, spec_ipv6_forms)
{
    cr_assert_eq(spec("[::1]:2,[fe80::1],fe80::2:4,[2001:db8::7]:16"), 0);
    cr_assert_eq(hl.n, 4);
    expect_host(0, "::1", 2);
    expect_host(1, "fe80::1", 1);
    expect_host(2, "fe80::2", 4);
    expect_host(3, "2001:db8::7", 16);
}

Test(hostspec, spec_user_at_host)
{
    cr_assert_eq(spec("alice@node1:4,bob@node2,carol@[::1]:2,dan@[fe80::3]"),
                 0);
    expect_host(0, "alice@node1", 4);
    expect_host(1, "bob@node2", 1);
    expect_host(2, "carol@::1", 2);
    expect_host(3, "dan@fe80::3", 1);
}

Test(hostspec, spec_malformed_slots)
{
    expect_malformed("a:", "a:", HVD_EPARSE);
    expect_malformed("a:x", "a:x", HVD_EPARSE);
    expect_malformed("a:-1", "a:-1", HVD_EPARSE);
    expect_malformed("a:+1", "a:+1", HVD_EPARSE);
    expect_malformed("a: 1", "a: 1", HVD_EPARSE);
    expect_malformed("a:1 ", "a:1 ", HVD_EPARSE);
    expect_malformed("a:1x", "a:1x", HVD_EPARSE);
    expect_malformed("a:1.5", "a:1.5", HVD_EPARSE);
    expect_malformed("a:0x10", "a:0x10", HVD_EPARSE);
}

Test(hostspec, spec_zero_slots_reads_as_malformed)
{
    /* Zero is out of range, but the message is the malformed one. */
    expect_malformed("a:0", "a:0", HVD_ERANGE);
    expect_malformed("ok:1,a:000", "a:000", HVD_ERANGE);
}

Test(hostspec, spec_too_many_slots)
{
    cr_assert_eq(spec("a:65537"), HVD_ERANGE);
    cr_assert_str_eq(err, "-H entry 'a:65537': 65537 slots is more than the "
                          "maximum of 65536");
    hvd_hostlist_close(&hl);
    cr_assert_eq(spec("b:1,a:99999999999999999999999"), HVD_ERANGE);
    cr_assert_str_eq(err, "-H entry 'a:99999999999999999999999': "
                          "99999999999999999999999 slots is more than the "
                          "maximum of 65536");
    hvd_hostlist_close(&hl);
    /* Leading zeros do not make a large number small. */
    cr_assert_eq(spec("[::1]:0070000"), HVD_ERANGE);
    cr_assert_str_eq(err, "-H entry '[::1]:0070000': 0070000 slots is more "
                          "than the maximum of 65536");
}

Test(hostspec, spec_empty_tokens)
{
    expect_malformed("a,,b", "", HVD_EPARSE);
    expect_malformed(",a", "", HVD_EPARSE);
    expect_malformed("a,", "", HVD_EPARSE);
    expect_malformed(",", "", HVD_EPARSE);
}

Test(hostspec, spec_empty)
{
    cr_assert_eq(spec(""), HVD_EPARSE);
    cr_assert_str_eq(err, "-H lists no hosts");
    cr_assert_eq(hl.n, 0);
}

Test(hostspec, spec_malformed_names)
{
    expect_malformed(":2", ":2", HVD_EPARSE);
    expect_malformed("a b:2", "a b:2", HVD_EPARSE);
    expect_malformed(" a", " a", HVD_EPARSE);
    expect_malformed("@host:2", "@host:2", HVD_EPARSE);
    expect_malformed("user@:2", "user@:2", HVD_EPARSE);
    expect_malformed("a=b:2", "a=b:2", HVD_EPARSE);
    expect_malformed("a::2", "a::2", HVD_EPARSE);
    /* Unbracketed IPv6 without slots would be host "fe80:" otherwise. */
    expect_malformed("fe80::1", "fe80::1", HVD_EPARSE);
    expect_malformed("::1", "::1", HVD_EPARSE);
}

Test(hostspec, spec_malformed_brackets)
{
    expect_malformed("[::1", "[::1", HVD_EPARSE);
    expect_malformed("[::1:2", "[::1:2", HVD_EPARSE);
    expect_malformed("[]:2", "[]:2", HVD_EPARSE);
    expect_malformed("[]", "[]", HVD_EPARSE);
    expect_malformed("[::1]x", "[::1]x", HVD_EPARSE);
    expect_malformed("[::1]:", "[::1]:", HVD_EPARSE);
    expect_malformed("[::1]:2]", "[::1]:2]", HVD_EPARSE);
    expect_malformed("[[::1]]:2", "[[::1]]:2", HVD_EPARSE);
    expect_malformed("x[::1]:2", "x[::1]:2", HVD_EPARSE);
    expect_malformed("@[::1]:2", "@[::1]:2", HVD_EPARSE);
    expect_malformed("::1]:2", "::1]:2", HVD_EPARSE);
    expect_malformed("[::1]:0", "[::1]:0", HVD_ERANGE);
}

Test(hostspec, spec_duplicates)
{
    cr_assert_eq(spec("a:1,b:1,a:2"), HVD_EDUP);
    cr_assert_str_eq(err, "host 'a' appears more than once in -H; list each "
                          "host once with all its slots");
    hvd_hostlist_close(&hl);
    /* Brackets and slots do not make the same address a different host. */
    cr_assert_eq(spec("[::1]:2,::1:3"), HVD_EDUP);
    cr_assert_str_eq(err, "host '::1' appears more than once in -H; list "
                          "each host once with all its slots");
    hvd_hostlist_close(&hl);
    /* Names compare exactly: another user is another entry. */
    cr_assert_eq(spec("a,u@a,A"), 0);
    cr_assert_eq(hl.n, 3);
}

Test(hostspec, spec_keeps_earlier_hosts_on_error)
{
    cr_assert_eq(spec("a:1,b:2,c:x,d"), HVD_EPARSE);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "a", 1);
    expect_host(1, "b", 2);
}

Test(hostspec, spec_appends_and_checks_existing)
{
    cr_assert_eq(spec("a:1"), 0);
    cr_assert_eq(spec("b:2"), 0);
    cr_assert_eq(hl.n, 2);
    cr_assert_eq(spec("c,a:3"), HVD_EDUP);
    cr_assert_str_eq(err, "host 'a' appears more than once in -H; list each "
                          "host once with all its slots");
}

Test(hostspec, spec_error_buffer_sizes)
{
    char small[12];

    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:x", small, sizeof(small)),
                 HVD_EPARSE);
    cr_assert_str_eq(small, "malformed -");
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:x", NULL, 100), HVD_EPARSE);
    small[0] = 'Q';
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "a:x", small, 0), HVD_EPARSE);
    cr_assert_eq(small[0], 'Q');
    small[0] = 'Q';
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, "", small, 1), HVD_EPARSE);
    cr_assert_eq(small[0], '\0');
}

Test(hostspec, spec_bad_arguments)
{
    cr_assert_eq(hvd_hostlist_parse_spec(NULL, "a", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(spec(NULL), HVD_EINVAL);
}

Test(hostspec, spec_many_hosts)
{
    size_t n = 20000;
    size_t i;
    char *s = malloc(n * 16 + 16);
    size_t off = 0;
    char name[32];

    cr_assert_not_null(s);
    for (i = 0; i < n; i++)
        off +=
            (size_t)sprintf(s + off, "%sh%zu:%zu", i ? "," : "", i, i % 7 + 1);
    cr_assert_eq(spec(s), 0);
    cr_assert_eq(hl.n, n);
    for (i = 0; i < n; i += 997) {
        snprintf(name, sizeof(name), "h%zu", i);
        expect_host(i, name, (int)(i % 7 + 1));
    }
    hvd_hostlist_close(&hl);
    strcpy(s + off, ",h12345:2");
    cr_assert_eq(spec(s), HVD_EDUP);
    cr_assert_eq(hl.n, n);
    cr_assert_str_eq(err, "host 'h12345' appears more than once in -H; list "
                          "each host once with all its slots");
    free(s);
}

/* hvd_hostlist_add and friends. */

Test(hostspec, add_copies_and_rejects_duplicates)
{
    char name[] = "node1";

    cr_assert_eq(hvd_hostlist_add(&hl, name, 4), 0);
    name[4] = '2';
    cr_assert_eq(hvd_hostlist_add(&hl, name, 2), 0);
    cr_assert_eq(hvd_hostlist_add(&hl, "node1", 1), HVD_EDUP);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "node1", 4);
    expect_host(1, "node2", 2);
    cr_assert_eq(hvd_hostlist_slots(&hl), 6);
}

Test(hostspec, add_bad_arguments)
{
    cr_assert_eq(hvd_hostlist_add(NULL, "a", 1), HVD_EINVAL);
    cr_assert_eq(hvd_hostlist_add(&hl, NULL, 1), HVD_EINVAL);
    cr_assert_eq(hvd_hostlist_add(&hl, "", 1), HVD_EINVAL);
    cr_assert_eq(hvd_hostlist_add(&hl, "a", 0), HVD_ERANGE);
    cr_assert_eq(hvd_hostlist_add(&hl, "a", HVD_MAX_SLOTS + 1), HVD_ERANGE);
    cr_assert_eq(hl.n, 0);
}

Test(hostspec, add_many_and_close_reuse)
{
    char name[32];
    int i;

    for (i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        cr_assert_eq(hvd_hostlist_add(&hl, name, 1), 0);
    }
    cr_assert_eq(hl.n, 1000);
    cr_assert_eq(hvd_hostlist_slots(&hl), 1000);
    expect_host(999, "n999", 1);
    hvd_hostlist_close(&hl);
    cr_assert_eq(hl.n, 0);
    cr_assert_null(hl.hosts);
    hvd_hostlist_close(NULL);
    cr_assert_eq(hvd_hostlist_slots(NULL), 0);
    cr_assert_eq(hvd_hostlist_slots(&hl), 0);
    cr_assert_eq(hvd_hostlist_add(&hl, "n5", 3), 0);
    expect_host(0, "n5", 3);
}

/* Hostfile text. */

/* The start of the message for a line of no known form. */
#define EXPECTED "expected 'host', 'host:N' or 'host slots=N', got"

Test(hostspec, text_basic)
{
    cr_assert_eq(text("a slots=2\n"
                      "b\n"
                      "  c\tslots=3  # three GPUs\n"
                      "\n"
                      "# a full comment\n"
                      "\t \n"
                      "d slots=1\r\n"
                      "e#no space before the comment\n"
                      "f \t slots=4"),
                 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 6);
    expect_host(0, "a", 2);
    expect_host(1, "b", 1);
    expect_host(2, "c", 3);
    expect_host(3, "d", 1);
    expect_host(4, "e", 1);
    expect_host(5, "f", 4);
}

Test(hostspec, text_crlf_file)
{
    cr_assert_eq(text("# made on Windows\r\n\r\nx slots=2\r\ny\r\n"), 0);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "x", 2);
    expect_host(1, "y", 1);
}

Test(hostspec, text_ipv6_and_users)
{
    cr_assert_eq(text("fe80::1 slots=2\n[::1] slots=3\nu@h\nv@[::2]\n"), 0);
    expect_host(0, "fe80::1", 2);
    expect_host(1, "::1", 3);
    expect_host(2, "u@h", 1);
    expect_host(3, "v@::2", 1);
}

Test(hostspec, text_malformed_lines)
{
    static const struct {
        const char *in;
        const char *msg;
    } cases[] = {
        {"a slots=2 extra\n", "hf:1: " EXPECTED " 'a slots=2 extra'"},
        {"a max_slots=4 max_slots=5\n",
         "hf:1: " EXPECTED " 'a max_slots=4 max_slots=5'"},
        {"a slots=1 slots=2\n", "hf:1: " EXPECTED " 'a slots=1 slots=2'"},
        {"a:2 slots=2\n", "hf:1: " EXPECTED " 'a:2 slots=2'"},
        {"a:x\n", "hf:1: " EXPECTED " 'a:x'"},
        {"a:\n", "hf:1: " EXPECTED " 'a:'"},
        {"[::1]x\n", "hf:1: " EXPECTED " '[::1]x'"},
        {"[::1]:2:3\n", "hf:1: " EXPECTED " '[::1]:2:3'"},
        {"a SLOTS=2\n", "hf:1: " EXPECTED " 'a SLOTS=2'"},
        {"a slots = 2\n", "hf:1: " EXPECTED " 'a slots = 2'"},
        {"a slots\n", "hf:1: " EXPECTED " 'a slots'"},
        {"slots=4\n", "hf:1: " EXPECTED " 'slots=4'"},
        {"ok\n\n# c\n  a b c   # note\n", "hf:4: " EXPECTED " 'a b c'"},
        {"a,b slots=2\n", "hf:1: " EXPECTED " 'a,b slots=2'"},
        {"[::1 slots=2\n", "hf:1: " EXPECTED " '[::1 slots=2'"},
        {"a\x1b[31m\n", "hf:1: " EXPECTED " 'a?[31m'"},
        {"a\vb\n", "hf:1: " EXPECTED " 'a?b'"},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hvd_hostlist_close(&hl);
        cr_assert_eq(text(cases[i].in), HVD_EPARSE, "input %zu", i);
        cr_assert_str_eq(err, cases[i].msg, "input %zu", i);
    }
}

Test(hostspec, text_bad_slots)
{
    static const struct {
        const char *in;
        int rc;
        const char *value;
    } cases[] = {
        {"a slots=x\n", HVD_EPARSE, "x"},
        {"a slots=\n", HVD_EPARSE, ""},
        {"a slots=-1\n", HVD_EPARSE, "-1"},
        {"a slots=+1\n", HVD_EPARSE, "+1"},
        {"a slots=2x\n", HVD_EPARSE, "2x"},
        {"a slots=0\n", HVD_ERANGE, "0"},
        {"a slots=65537\n", HVD_ERANGE, "65537"},
        {"a slots=99999999999999999999\n", HVD_ERANGE, "99999999999999999999"},
    };
    char want[256];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hvd_hostlist_close(&hl);
        snprintf(want, sizeof(want),
                 "hf:1: slots must be a positive integer up to 65536, got "
                 "'%s'",
                 cases[i].value);
        cr_assert_eq(text(cases[i].in), cases[i].rc, "input %zu", i);
        cr_assert_str_eq(err, want, "input %zu", i);
    }
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("a slots=65536\n"), 0);
    expect_host(0, "a", 65536);
}

Test(hostspec, text_line_numbers_count_every_line)
{
    cr_assert_eq(text("# header\n\na\r\n\n b slots=2 \nc slots=zero\n"),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "hf:6: slots must be a positive integer up to "
                          "65536, got 'zero'");
    cr_assert_eq(hl.n, 2);
}

Test(hostspec, text_repeats_add_up)
{
    /* PBS_NODEFILE's form: one line per slot, first appearance orders. */
    cr_assert_eq(text("n2\nn1.example.org\nn2\n# x\nn2 slots=2\n"
                      "n1.example.org:3\n"),
                 0);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "n2", 4);
    expect_host(1, "n1.example.org", 4);
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("x\n[::1] slots=2\n\n::1\n[::1]:3\n"), 0);
    cr_assert_eq(hl.n, 2);
    expect_host(1, "::1", 6);
    hvd_hostlist_close(&hl);
    /* The sum has the same limit as one line. */
    cr_assert_eq(text("a slots=65536\nb\na\n"), HVD_ERANGE);
    cr_assert_str_eq(err, "hf:3: host 'a' adds up to more than 65536 slots "
                          "(first on line 1)");
    cr_assert_eq(hl.n, 2);
    expect_host(0, "a", 65536);
    hvd_hostlist_close(&hl);
    /* The error that comes first wins, and only repeats before it count. */
    cr_assert_eq(text("a slots=65536\nb\nb\nc slots=0\na\n"), HVD_ERANGE);
    cr_assert_str_eq(err, "hf:4: slots must be a positive integer up to "
                          "65536, got '0'");
    cr_assert_eq(hl.n, 2);
    expect_host(1, "b", 2);
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("a slots=65536\nb\nb\na\nc slots=0\n"), HVD_ERANGE);
    cr_assert_str_eq(err, "hf:4: host 'a' adds up to more than 65536 slots "
                          "(first on line 1)");
    cr_assert_eq(hl.n, 2);
    expect_host(1, "b", 2);
    hvd_hostlist_close(&hl);
    /* A host that was in the list before this file has no line. */
    cr_assert_eq(hvd_hostlist_add(&hl, "pre", 1), 0);
    cr_assert_eq(text("z\npre\n"), HVD_EDUP);
    cr_assert_str_eq(err, "hf:2: host 'pre' is already in the host list");
}

Test(hostspec, text_cluster_forms)
{
    cr_assert_eq(text("n1 slots=4 max_slots=8\nn2 max_slots=2 slots=2\n"
                      "n3:2\n[::1]:2\nn4\nn5.cluster.local\n"),
                 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 6);
    expect_host(0, "n1", 4);
    expect_host(1, "n2", 2);
    expect_host(2, "n3", 2);
    expect_host(3, "::1", 2);
    expect_host(4, "n4", 1);
    expect_host(5, "n5.cluster.local", 1);
    /* The caller warns once, naming the first line with max_slots. */
    cr_assert_eq(hl.max_slots_line, 1);
    hvd_hostlist_close(&hl);
    cr_assert_eq(hl.max_slots_line, 0);
    cr_assert_eq(text("a\nb max_slots=1\nc max_slots=3\n"), 0);
    cr_assert_eq(hl.max_slots_line, 2);
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("a max_slots=0\n"), HVD_ERANGE);
    cr_assert_str_eq(err, "hf:1: max_slots must be a positive integer up to "
                          "65536, got '0'");
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("a:0\n"), HVD_ERANGE);
    cr_assert_str_eq(err, "hf:1: slots must be a positive integer up to "
                          "65536, got '0'");
    hvd_hostlist_close(&hl);
    cr_assert_eq(text("u@h:3\n"), 0);
    expect_host(0, "u@h", 3);
}

Test(hostspec, merge)
{
    cr_assert_eq(hvd_hostlist_merge(&hl, "a b", 1, 2), 0);
    cr_assert_eq(hvd_hostlist_merge(&hl, "b", 1, 1), 0);
    cr_assert_eq(hvd_hostlist_merge(&hl, "a", 1, 3), 0);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "a", 5);
    expect_host(1, "b", 1);
    cr_assert_eq(hvd_hostlist_merge(&hl, "a", 1, 65532), HVD_ERANGE);
    expect_host(0, "a", 5);
    cr_assert_eq(hvd_hostlist_merge(&hl, "a", 1, 65531), 0);
    cr_assert_eq(hvd_hostlist_merge(&hl, "a,", 2, 1), HVD_EPARSE);
    cr_assert_eq(hvd_hostlist_merge(&hl, "", 0, 1), HVD_EPARSE);
    cr_assert_eq(hvd_hostlist_merge(&hl, "c", 1, 0), HVD_ERANGE);
    cr_assert_eq(hvd_hostlist_merge(NULL, "c", 1, 1), HVD_EINVAL);
    cr_assert_eq(hl.n, 2);
}

Test(hostspec, text_no_hosts)
{
    static const char *const inputs[] = {
        "", "\n", "# only a comment\n", "  \t\n\r\n#x\n", "\r",
    };
    size_t i;

    for (i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        cr_assert_eq(text(inputs[i]), HVD_EPARSE, "input %zu", i);
        cr_assert_str_eq(err, "hf: the hostfile lists no hosts");
    }
    cr_assert_eq(hvd_hostlist_parse_text(&hl, NULL, 0, "hf", err, sizeof(err)),
                 HVD_EPARSE);
    cr_assert_eq(hvd_hostlist_parse_text(&hl, "\n", 1, NULL, err, sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "hostfile: the hostfile lists no hosts");
}

Test(hostspec, text_nul_byte_is_malformed)
{
    static const char in[] = "a\nb\0c slots=2\nd\n";
    static const char in2[] = "a # note \0 more\n";

    cr_assert_eq(hvd_hostlist_parse_text(&hl, in, sizeof(in) - 1, "hf", err,
                                         sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "hf:2: " EXPECTED " 'b?c slots=2'");
    cr_assert_eq(hl.n, 1);
    hvd_hostlist_close(&hl);
    /* Even inside a comment, a NUL means this is no text file. */
    cr_assert_eq(hvd_hostlist_parse_text(&hl, in2, sizeof(in2) - 1, "hf", err,
                                         sizeof(err)),
                 HVD_EPARSE);
    cr_assert_str_eq(err, "hf:1: " EXPECTED " 'a'");
}

Test(hostspec, text_long_line_is_truncated)
{
    char line[300];
    char want[300];

    memset(line, 'x', 200);
    strcpy(line + 200, " y z\n");
    cr_assert_eq(text(line), HVD_EPARSE);
    memset(want, 'x', 80);
    want[80] = '\0';
    cr_assert_eq(strlen(err), strlen("hf:1: " EXPECTED " ''") + 80);
    cr_assert(strstr(err, want) != NULL);
    cr_assert(strstr(err, "y z") == NULL);

    /* A two-byte character across the cut is left out whole. */
    hvd_hostlist_close(&hl);
    memset(line, 'x', 79);
    strcpy(line + 79, "\xc3\xa9 y z\n");
    cr_assert_eq(text(line), HVD_EPARSE);
    snprintf(want, sizeof(want), "hf:1: " EXPECTED " '%.79s'", line);
    cr_assert_str_eq(err, want);
}

Test(hostspec, text_error_without_buffer)
{
    cr_assert_eq(hvd_hostlist_parse_text(&hl, "a b c", 5, "hf", NULL, 0),
                 HVD_EPARSE);
    cr_assert_eq(hvd_hostlist_parse_text(&hl, "a b c", 5, "hf", err, 0),
                 HVD_EPARSE);
    cr_assert_eq(err[0], 'Z');
    cr_assert_eq(hvd_hostlist_parse_text(NULL, "a", 1, "hf", err, sizeof(err)),
                 HVD_EINVAL);
}

Test(hostspec, text_many_hosts)
{
    size_t n = 50000;
    char *s = malloc(n * 24 + 32);
    size_t off = 0;
    size_t i;

    cr_assert_not_null(s);
    for (i = 0; i < n; i++)
        off += (size_t)sprintf(s + off, "host%zu slots=%zu\n", i, i % 8 + 1);
    cr_assert_eq(text(s), 0);
    cr_assert_eq(hl.n, n);
    expect_host(n - 1, "host49999", 8);
    hvd_hostlist_close(&hl);
    /* Many repeats merge in one pass, not one search per line. */
    off = 0;
    for (i = 0; i < n; i++)
        off += (size_t)sprintf(s + off, "host%zu\nhost%zu:2\n", i % 100, i % 7);
    cr_assert_eq(text(s), 0);
    cr_assert_eq(hl.n, 100);
    cr_assert_eq(hvd_hostlist_slots(&hl), 3 * (long)n);
    free(s);
}

/* Hostfiles on disk. */

static char tmpdir[64];

static void file_setup(void)
{
    setup();
    tmp_template(tmpdir, sizeof(tmpdir), "hvd-hostspec");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void file_teardown(void)
{
    char cmd[128];

    teardown();
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

Test(hostspec, file_parses, .init = file_setup, .fini = file_teardown)
{
    char path[128];
    static const char body[] = "# cluster\nnode1 slots=4\nnode2 slots=4\n";

    snprintf(path, sizeof(path), "%s/hosts", tmpdir);
    write_file(path, body, sizeof(body) - 1);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)), 0);
    cr_assert_str_eq(err, "");
    cr_assert_eq(hl.n, 2);
    expect_host(0, "node1", 4);
    expect_host(1, "node2", 4);
}

Test(hostspec, file_messages_name_the_path, .init = file_setup,
     .fini = file_teardown)
{
    char path[128];
    char want[256];
    static const char body[] = "node1 slots=4\nnode1\nnode2 slots=x\n";

    snprintf(path, sizeof(path), "%s/hosts", tmpdir);
    write_file(path, body, sizeof(body) - 1);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)),
                 HVD_EPARSE);
    snprintf(want, sizeof(want),
             "%s:3: slots must be a positive integer up to 65536, got 'x'",
             path);
    cr_assert_str_eq(err, want);

    hvd_hostlist_close(&hl);
    write_file(path, "", 0);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)),
                 HVD_EPARSE);
    snprintf(want, sizeof(want), "%s: the hostfile lists no hosts", path);
    cr_assert_str_eq(err, want);
}

Test(hostspec, file_missing, .init = file_setup, .fini = file_teardown)
{
    char path[128];
    char want[256];

    snprintf(path, sizeof(path), "%s/nope", tmpdir);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)), HVD_EIO);
    snprintf(want, sizeof(want),
             "cannot read hostfile '%s': No such file or directory", path);
    cr_assert_str_eq(err, want);
}

Test(hostspec, file_directory, .init = file_setup, .fini = file_teardown)
{
    char want[256];

    cr_assert_eq(hvd_hostlist_parse_file(&hl, tmpdir, err, sizeof(err)),
                 HVD_EIO);
    snprintf(want, sizeof(want), "cannot read hostfile '%s': Is a directory",
             tmpdir);
    cr_assert_str_eq(err, want);
}

Test(hostspec, file_unreadable, .init = file_setup, .fini = file_teardown)
{
    char path[128];
    char want[256];
    pid_t pid;
    int status;
    int rc;

    snprintf(path, sizeof(path), "%s/secret", tmpdir);
    write_file(path, "a\n", 2);
    cr_assert_eq(chmod(path, 0), 0);
    snprintf(want, sizeof(want), "cannot read hostfile '%s': Permission denied",
             path);
    if (geteuid() != 0) {
        cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)),
                     HVD_EIO);
        cr_assert_str_eq(err, want);
        return;
    }
    /* Root reads any file: check as user nobody in a child instead. */
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        rc = hvd_hostlist_parse_file(&hl, path, err, sizeof(err));
        _exit(rc == HVD_EIO && strcmp(err, want) == 0 ? 0 : 1);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3)
        cr_skip_test("root cannot drop privileges here");
    cr_assert_eq(WEXITSTATUS(status), 0, "unreadable file not reported");
}

/* A file of exactly len bytes: "a\n" and then one long comment line. */
static void write_sized(const char *path, size_t len)
{
    char *buf = malloc(len);

    cr_assert_not_null(buf);
    memset(buf, '#', len);
    buf[0] = 'a';
    buf[1] = '\n';
    write_file(path, buf, len);
    free(buf);
}

Test(hostspec, file_size_limit, .init = file_setup, .fini = file_teardown)
{
    char path[128];
    char want[256];
    size_t limit = (size_t)16 << 20;

    snprintf(path, sizeof(path), "%s/big", tmpdir);
    write_sized(path, limit);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)), 0);
    cr_assert_eq(hl.n, 1);
    hvd_hostlist_close(&hl);

    write_sized(path, limit + 1);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, path, err, sizeof(err)),
                 HVD_ERANGE);
    snprintf(want, sizeof(want), "%s: hostfile larger than 16 MiB", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(hl.n, 0);
}

/*
 * Parses what a child writes into a pipe, through /proc/self/fd, the way
 * "--hostfile <(generate-hosts)" reaches us: no size known in advance.
 */
static int parse_pipe(const char *data, size_t len, size_t repeat)
{
    char path[64];
    int fds[2];
    pid_t pid;
    int status;
    size_t i;
    int rc;

    cr_assert_eq(pipe(fds), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        for (i = 0; i < repeat; i++) {
            if (write(fds[1], data, len) != (ssize_t)len)
                _exit(0); /* The reader stopped early: fine. */
        }
        _exit(0);
    }
    close(fds[1]);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
    rc = hvd_hostlist_parse_file(&hl, path, err, sizeof(err));
    close(fds[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return rc;
}

Test(hostspec, file_from_pipe)
{
    static const char body[] = "p1 slots=2\np2\n";

    cr_assert_eq(parse_pipe(body, sizeof(body) - 1, 1), 0);
    cr_assert_eq(hl.n, 2);
    expect_host(0, "p1", 2);
    expect_host(1, "p2", 1);
}

Test(hostspec, file_from_pipe_too_big)
{
    static char block[1 << 16];

    memset(block, '#', sizeof(block));
    block[0] = 'a';
    block[1] = '\n';
    /* 257 blocks of 64 KiB: 16 MiB and one block more. */
    cr_assert_eq(parse_pipe(block, sizeof(block), 257), HVD_ERANGE);
    cr_assert(strstr(err, ": hostfile larger than 16 MiB") != NULL, "%s", err);
}

Test(hostspec, file_bad_arguments)
{
    cr_assert_eq(hvd_hostlist_parse_file(NULL, "/x", err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hvd_hostlist_parse_file(&hl, NULL, err, sizeof(err)),
                 HVD_EINVAL);
}
