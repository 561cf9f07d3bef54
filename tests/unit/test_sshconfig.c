/* Unit tests for launcher/lib/sshconfig.c: ~/.ssh/config as ssh reads it. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/sshconfig.h"
#include "tmppath.h"

/* A home folder of the test's own, with .ssh/ in it. */
static char home[64];
static char cfg[128];
static struct hr_sshcfg_host h;
static char err[512];

static void setup(void)
{
    char dir[96];

    cr_assert_not_null(
        mkdtemp(tmp_template(home, sizeof(home), "hvdtest-sshcfg")));
    snprintf(dir, sizeof(dir), "%s/.ssh", home);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(cfg, sizeof(cfg), "%s/.ssh/config", home);
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    nftw(home, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(sshconfig, .init = setup, .fini = teardown);

/* Writes text to home/.ssh/rel (creating the folder conf.d if named). */
static void put_file(const char *rel, const char *text)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/.ssh/conf.d", home);
    if (strncmp(rel, "conf.d/", 7) == 0)
        mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/.ssh/%s", home, rel);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fputs(text, f) >= 0, 1);
    fclose(f);
}

/* Looks name up in home/.ssh/config, as local user alice. */
static int look(const char *name)
{
    memset(&h, 'Z', sizeof(h));
    memset(err, 'Z', sizeof(err));
    return hr_sshcfg_lookup(cfg, name, home, "alice", &h, err, sizeof(err));
}

/* home followed by rest, for expected paths. */
static const char *in_home(const char *rest)
{
    static char buf[256];

    snprintf(buf, sizeof(buf), "%s%s", home, rest);
    return buf;
}

/* The message expected for a bad line of the config. */
static const char *at_line(int line, const char *what)
{
    static char buf[512];

    snprintf(buf, sizeof(buf), "%s:%d: %s", cfg, line, what);
    return buf;
}

Test(sshconfig, patterns)
{
    cr_assert(hr_sshcfg_match("*", "anything"));
    cr_assert(hr_sshcfg_match("node?", "node1"));
    cr_assert_not(hr_sshcfg_match("node?", "node12"));
    cr_assert_not(hr_sshcfg_match("node?", "node"));
    cr_assert(hr_sshcfg_match("*.example.com", "a.b.example.com"));
    cr_assert_not(hr_sshcfg_match("*.example.com", "example.com"));
    cr_assert(hr_sshcfg_match("n*d*e", "nXdYYe"));
    cr_assert(hr_sshcfg_match("a*b*", "aab"));
    cr_assert(hr_sshcfg_match("NODE1", "node1"));
    cr_assert(hr_sshcfg_match("node1", "Node1"));
    cr_assert(hr_sshcfg_match("x y node1", "node1"));
    cr_assert(hr_sshcfg_match("x,node1", "node1"));
    cr_assert(hr_sshcfg_match("* !bastion", "node1"));
    cr_assert_not(hr_sshcfg_match("* !bastion", "bastion"));
    cr_assert_not(hr_sshcfg_match("!bastion *", "BASTION"));
    /* A negation alone matches nothing. */
    cr_assert_not(hr_sshcfg_match("!bastion", "node1"));
    cr_assert_not(hr_sshcfg_match("", "node1"));
    cr_assert_not(hr_sshcfg_match("!", "node1"));
    cr_assert_not(hr_sshcfg_match(NULL, "node1"));
}

Test(sshconfig, missing_file_sets_nothing)
{
    cr_assert_eq(look("node1"), 0);
    cr_assert_str_eq(err, "");
    cr_assert_str_eq(h.hostname, "");
    cr_assert_eq(h.port, 0);
    cr_assert_str_eq(h.user, "");
    cr_assert_eq(h.nidentity, 0);
    cr_assert_eq(h.strict, HR_SSH_STRICT_UNSET);
    cr_assert_str_eq(h.known_hosts, "");
    cr_assert_eq(h.connect_timeout, 0);
    cr_assert_str_eq(h.note, "");
}

Test(sshconfig, bad_arguments)
{
    cr_assert_eq(hr_sshcfg_lookup(NULL, "a", home, "u", &h, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_sshcfg_lookup(cfg, "a", home, "u", NULL, err, sizeof(err)),
                 HVD_EINVAL);
}

Test(sshconfig, first_value_wins)
{
    put_file("config", "Host web\n"
                       "  Port 2200\n"
                       "  User deploy\n"
                       "Host web*\n"
                       "  Port 2300\n"
                       "  User other\n"
                       "  HostName web.example.com\n"
                       "  HostName ignored.example.com\n");
    cr_assert_eq(look("web"), 0, "%s", err);
    cr_assert_eq(h.port, 2200);
    cr_assert_str_eq(h.user, "deploy");
    cr_assert_str_eq(h.hostname, "web.example.com");
    cr_assert_eq(look("web2"), 0, "%s", err);
    cr_assert_eq(h.port, 2300);
    cr_assert_str_eq(h.user, "other");
}

Test(sshconfig, host_star_at_end_gives_defaults)
{
    put_file("config", "# top\n"
                       "\n"
                       "Host gpu1\n"
                       "    Port 2022\n"
                       "Host *\n"
                       "    Port 22\n"
                       "    User train\n"
                       "    ConnectTimeout 5\n");
    cr_assert_eq(look("gpu1"), 0, "%s", err);
    cr_assert_eq(h.port, 2022);
    cr_assert_str_eq(h.user, "train");
    cr_assert_eq(h.connect_timeout, 5);
    cr_assert_eq(look("gpu2"), 0, "%s", err);
    cr_assert_eq(h.port, 22);
}

/* Lines before any Host apply to every host. */
Test(sshconfig, lines_before_host_apply_to_all)
{
    put_file("config", "User early\nHost a\n User late\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_str_eq(h.user, "early");
}

Test(sshconfig, negation_excludes)
{
    put_file("config", "Host * !bastion\n"
                       "  ProxyJump bastion\n"
                       "  User worker\n"
                       "Host bastion\n"
                       "  User jump\n");
    cr_assert_eq(look("node7"), 0, "%s", err);
    cr_assert_str_eq(h.user, "worker");
    cr_assert_eq(look("bastion"), 0, "%s", err);
    cr_assert_str_eq(h.user, "jump");
}

Test(sshconfig, wildcards_in_host_lines)
{
    put_file("config", "Host node? gpu-*\n  Port 1\nHost *\n  Port 2\n");
    cr_assert_eq(look("node3"), 0, "%s", err);
    cr_assert_eq(h.port, 1);
    cr_assert_eq(look("gpu-a.b"), 0, "%s", err);
    cr_assert_eq(h.port, 1);
    cr_assert_eq(look("node33"), 0, "%s", err);
    cr_assert_eq(h.port, 2);
}

Test(sshconfig, keywords_and_names_ignore_case)
{
    put_file("config", "hOsT NODE1\n  pORT 2\n  USER Bob\n"
                       "  stricthostkeychecking NO\n");
    cr_assert_eq(look("node1"), 0, "%s", err);
    cr_assert_eq(h.port, 2);
    cr_assert_str_eq(h.user, "Bob");
    cr_assert_eq(h.strict, HR_SSH_STRICT_NO);
}

Test(sshconfig, equals_quotes_and_comments)
{
    put_file("config", "Host=web\n"
                       "  Port=2201\n"
                       "  User = \"bob\"\n"
                       "  IdentityFile \"~/my keys/id\"\n"
                       "  ConnectTimeout 7 # seconds\n"
                       "\tHostName\t'web.lan'\r\n");
    cr_assert_eq(look("web"), 0, "%s", err);
    cr_assert_eq(h.port, 2201);
    cr_assert_str_eq(h.user, "bob");
    cr_assert_eq(h.nidentity, 1);
    cr_assert_str_eq(h.identity[0], in_home("/my keys/id"));
    cr_assert_eq(h.connect_timeout, 7);
    cr_assert_str_eq(h.hostname, "web.lan");
}

Test(sshconfig, other_keywords_ignored)
{
    put_file("config", "ForwardAgent yes\n"
                       "ProxyJump a,b\n"
                       "SendEnv LANG LC_*\n"
                       "Ciphers aes128-ctr\n"
                       "Port 3\n");
    cr_assert_eq(look("x"), 0, "%s", err);
    cr_assert_eq(h.port, 3);
    cr_assert_str_eq(h.note, "");
}

Test(sshconfig, identity_files_accumulate_and_expand)
{
    put_file("config", "Host node*\n"
                       "  HostName %h.cluster\n"
                       "  User bob\n"
                       "  IdentityFile ~/.ssh/id_%h\n"
                       "  IdentityFile %d/keys/%r@%u\n"
                       "  IdentityFile ~/.ssh/id_%h\n"
                       "Host *\n"
                       "  IdentityFile /k/%n-%p-%%\n"
                       "  IdentityFile ~\n");
    cr_assert_eq(look("node1"), 0, "%s", err);
    cr_assert_str_eq(h.hostname, "node1.cluster");
    cr_assert_eq(h.nidentity, 4);
    cr_assert_str_eq(h.identity[0], in_home("/.ssh/id_node1.cluster"));
    cr_assert_str_eq(h.identity[1], in_home("/keys/bob@alice"));
    cr_assert_str_eq(h.identity[2], "/k/node1-22-%");
    cr_assert_str_eq(h.identity[3], home);
}

/* Without User, %r is the local user; without HostName, %h the name. */
Test(sshconfig, identity_tokens_without_user_or_hostname)
{
    put_file("config", "Port 2222\nIdentityFile /k/%r/%h/%p\n");
    cr_assert_eq(look("gpu1"), 0, "%s", err);
    cr_assert_str_eq(h.identity[0], "/k/alice/gpu1/2222");
}

Test(sshconfig, identity_files_past_eight_give_a_note)
{
    char text[512] = "";

    for (int i = 0; i < 10; i++)
        snprintf(text + strlen(text), sizeof(text) - strlen(text),
                 "IdentityFile /k/%d\n", i);
    put_file("config", text);
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_eq(h.nidentity, HR_SSHCFG_MAX_IDENTITY);
    cr_assert_str_eq(h.identity[7], "/k/7");
    cr_assert_str_eq(h.note, at_line(9, "more than 8 IdentityFile; '/k/8' is "
                                        "ignored"));
}

Test(sshconfig, hostname_tokens)
{
    put_file("config", "Host a\n  HostName %h.internal\n"
                       "Host b\n  HostName 100%%-%h\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_str_eq(h.hostname, "a.internal");
    cr_assert_eq(look("b"), 0, "%s", err);
    cr_assert_str_eq(h.hostname, "100%-b");
}

Test(sshconfig, unknown_token_is_an_error)
{
    put_file("config", "Host zz\n  HostName %d.lan\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(2, "HostName '%d.lan': unknown token '%d'"));
    put_file("config", "IdentityFile /k/%\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(1, "IdentityFile '/k/%': unknown token '%'"));
    /* A control byte after '%' is quoted, not copied into the line. */
    put_file("config", "IdentityFile /k/%\033x\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err,
                     at_line(1, "IdentityFile '/k/%?x': unknown token '%?'"));
}

Test(sshconfig, include_relative_and_glob)
{
    put_file("config", "Include conf.d/*.conf nothing-here\n"
                       "Include extra\n"
                       "Host *\n"
                       "  Port 9\n");
    put_file("conf.d/a.conf", "Host x\n  Port 1\n");
    put_file("conf.d/b.conf", "Host y\n  Port 2\n  User from-b\n");
    put_file("conf.d/c.txt", "Port 3\n");
    put_file("extra", "User from-extra\n");
    cr_assert_eq(look("x"), 0, "%s", err);
    cr_assert_eq(h.port, 1);
    /* The Host block of an included file ends with that file. */
    cr_assert_str_eq(h.user, "from-extra");
    cr_assert_eq(look("y"), 0, "%s", err);
    cr_assert_eq(h.port, 2);
    cr_assert_str_eq(h.user, "from-b");
    cr_assert_eq(look("z"), 0, "%s", err);
    cr_assert_eq(h.port, 9);
}

Test(sshconfig, include_absolute_and_tilde)
{
    char text[256];

    snprintf(text, sizeof(text), "Include %s/.ssh/one ~/.ssh/two\n", home);
    put_file("config", text);
    put_file("one", "Port 11\n");
    put_file("two", "User two\n");
    cr_assert_eq(look("x"), 0, "%s", err);
    cr_assert_eq(h.port, 11);
    cr_assert_str_eq(h.user, "two");
}

/* An Include in a block that does not apply adds nothing, even Host *. */
Test(sshconfig, include_in_skipped_block)
{
    put_file("config",
             "Host other\n  Include extra\nHost x\n  Include extra\n");
    put_file("extra", "User e\nHost *\n  Port 5\n");
    cr_assert_eq(look("nobody"), 0, "%s", err);
    cr_assert_str_eq(h.user, "");
    cr_assert_eq(h.port, 0);
    cr_assert_eq(look("x"), 0, "%s", err);
    cr_assert_str_eq(h.user, "e");
    cr_assert_eq(h.port, 5);
}

Test(sshconfig, include_loop_rejected_by_depth)
{
    put_file("config", "Port 1\nInclude config\n");
    cr_assert_eq(look("a"), HVD_ERANGE);
    cr_assert_str_eq(err, at_line(2, "Include nested more than 16 deep"));
}

Test(sshconfig, bad_port_names_file_and_line)
{
    put_file("config", "Host a\n\n  Port abc\n");
    cr_assert_eq(look("zzz"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(3, "bad Port 'abc' (want 1 to 65535)"));
    put_file("config", "Port 70000\n");
    cr_assert_eq(look("a"), HVD_ERANGE);
    cr_assert_str_eq(err, at_line(1, "bad Port '70000' (want 1 to 65535)"));
    put_file("config", "Port 0\n");
    cr_assert_eq(look("a"), HVD_ERANGE);
    put_file("config", "Port 22 23\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(1, "Port takes one value"));
    put_file("config", "Port\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
}

Test(sshconfig, strict_host_key_checking_values)
{
    static const struct {
        const char *v;
        int want;
    } cases[] = {
        {"yes", HR_SSH_STRICT_YES},
        {"ask", HR_SSH_STRICT_YES},
        {"true", HR_SSH_STRICT_YES},
        {"no", HR_SSH_STRICT_NO},
        {"off", HR_SSH_STRICT_NO},
        {"false", HR_SSH_STRICT_NO},
        {"Accept-New", HR_SSH_STRICT_ACCEPT_NEW},
    };
    char text[64];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "StrictHostKeyChecking %s\n", cases[i].v);
        put_file("config", text);
        cr_assert_eq(look("a"), 0, "%s", err);
        cr_assert_eq(h.strict, cases[i].want, "%s", cases[i].v);
    }
    put_file("config", "\nStrictHostKeyChecking maybe\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(2, "bad StrictHostKeyChecking 'maybe' (want "
                                     "yes, no, accept-new or ask)"));
}

Test(sshconfig, known_hosts_first_of_list)
{
    put_file("config", "Host a\n  UserKnownHostsFile ~/.ssh/kh1 ~/.ssh/kh2\n"
                       "Host b\n  UserKnownHostsFile /etc/kh_%h\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_str_eq(h.known_hosts, in_home("/.ssh/kh1"));
    cr_assert_eq(look("b"), 0, "%s", err);
    cr_assert_str_eq(h.known_hosts, "/etc/kh_b");
}

Test(sshconfig, connect_timeout)
{
    put_file("config", "Host a\n  ConnectTimeout 1m30s\n"
                       "Host b\n  ConnectTimeout 0\n"
                       "Host *\n  ConnectTimeout 10\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_eq(h.connect_timeout, 90);
    /* 0 was the first value: a later one does not replace it. */
    cr_assert_eq(look("b"), 0, "%s", err);
    cr_assert_eq(h.connect_timeout, 0);
    cr_assert_eq(look("c"), 0, "%s", err);
    cr_assert_eq(h.connect_timeout, 10);
    put_file("config", "ConnectTimeout soon\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(1, "bad ConnectTimeout 'soon' (want "
                                     "seconds)"));
    put_file("config", "ConnectTimeout 5x\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
}

Test(sshconfig, match_all)
{
    put_file("config", "Host a\n  Port 1\nMatch all\n  User everyone\n");
    cr_assert_eq(look("b"), 0, "%s", err);
    cr_assert_eq(h.port, 0);
    cr_assert_str_eq(h.user, "everyone");
    put_file("config", "Match all host a\n");
    cr_assert_eq(look("b"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(1, "Match all takes no other criteria"));
}

/* Match host sees the name after HostName; patterns are a comma list. */
Test(sshconfig, match_host)
{
    put_file("config", "Host short\n  HostName long.lan\n"
                       "Match host long.lan,other\n  User u\n"
                       "Match !host *.lan\n  Port 7\n");
    cr_assert_eq(look("short"), 0, "%s", err);
    cr_assert_str_eq(h.user, "u");
    cr_assert_eq(h.port, 0);
    cr_assert_eq(look("other"), 0, "%s", err);
    cr_assert_str_eq(h.user, "u");
    cr_assert_eq(h.port, 7);
    put_file("config", "Match host\n");
    cr_assert_eq(look("b"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(1, "Match host needs an argument"));
}

Test(sshconfig, other_match_criteria_never_match)
{
    put_file("config", "Match exec \"true\"\n  User x\n"
                       "Match host a user alice\n  Port 1\n"
                       "Match host a\n  Port 3\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_str_eq(h.user, "");
    cr_assert_eq(h.port, 3);
    cr_assert_str_eq(h.note, at_line(1, "Match exec is not supported; its "
                                        "block is skipped"));
}

/* What the MPI Operator writes into its launcher's ~/.ssh/config. */
Test(sshconfig, mpi_operator_config)
{
    put_file("config", "StrictHostKeyChecking no\n"
                       "UserKnownHostsFile /dev/null\n"
                       "Port 2222\n");
    cr_assert_eq(look("pi-worker-0.pi-worker.default.svc"), 0, "%s", err);
    cr_assert_eq(h.strict, HR_SSH_STRICT_NO);
    cr_assert_str_eq(h.known_hosts, "/dev/null");
    cr_assert_eq(h.port, 2222);
    cr_assert_str_eq(h.hostname, "");
    cr_assert_str_eq(h.user, "");
}

Test(sshconfig, line_length_limit)
{
    char text[1200];

    /* 1024 bytes and a newline: fine. */
    memset(text, 'x', 1024);
    memcpy(text, "#", 1);
    strcpy(text + 1024, "\nPort 4\n");
    put_file("config", text);
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_eq(h.port, 4);
    memset(text, 'x', 7 + 1025);
    memcpy(text, "Port 1\n#", 8);
    strcpy(text + 7 + 1025, "\n");
    put_file("config", text);
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(2, "line longer than 1024 bytes"));
}

Test(sshconfig, unclosed_quote)
{
    put_file("config", "Host a\n  User \"bob\n");
    cr_assert_eq(look("a"), HVD_EPARSE);
    cr_assert_str_eq(err, at_line(2, "unclosed quote"));
}

Test(sshconfig, unreadable_config_is_an_error)
{
    snprintf(cfg, sizeof(cfg), "%s/.ssh", home); /* a folder */
    cr_assert_eq(look("a"), HVD_EIO);
    cr_assert(strstr(err, "cannot read") != NULL, "%s", err);
}

/* A value too long for its field fails where it applies, not elsewhere. */
Test(sshconfig, value_too_long)
{
    char text[256];

    memset(text, 'u', sizeof(text));
    memcpy(text, "Host a\n User ", 13);
    strcpy(text + 13 + 64, "\n");
    put_file("config", text);
    cr_assert_eq(look("b"), 0, "%s", err);
    cr_assert_eq(look("a"), HVD_ERANGE);
    cr_assert(strstr(err, ":2: User 'uuu") != NULL, "%s", err);
    cr_assert(strstr(err, "' is too long") != NULL, "%s", err);
}

Test(sshconfig, match_canonical_never_matches)
{
    put_file("config", "Match canonical host a\n  Port 1\n");
    cr_assert_eq(look("a"), 0, "%s", err);
    cr_assert_eq(h.port, 0);
    cr_assert_str_eq(h.note, at_line(1, "Match canonical is not supported; "
                                        "its block is skipped"));
}
