/* The parts of an OpenSSH client config (~/.ssh/config) that horovodrun's
 * SSH links honour, read the way ssh(1) reads them (ssh_config(5)). */
#ifndef HR_SSHCONFIG_H
#define HR_SSHCONFIG_H

#include <stddef.h>

/* Most IdentityFile values kept for one host; later ones give a note. */
#define HR_SSHCFG_MAX_IDENTITY 8
/* Deepest nesting of Include, as ssh's. */
#define HR_SSHCFG_MAX_DEPTH 16
/* Longest line, without its newline. */
#define HR_SSHCFG_LINE_MAX 1024

enum hr_ssh_strict {
    HR_SSH_STRICT_UNSET = 0,
    HR_SSH_STRICT_YES,       /* yes, true, ask */
    HR_SSH_STRICT_NO,        /* no, false, off */
    HR_SSH_STRICT_ACCEPT_NEW /* accept-new */
};

/* What the config says about one host; "" and 0 mean not set. */
struct hr_sshcfg_host {
    char hostname[256]; /* HostName, %h and %% expanded */
    int port;           /* Port, 1 to 65535 */
    char user[64];      /* User */
    /* IdentityFile, in order, duplicates dropped; ~ and %d %h %n %p %r
     * %u %% expanded (%h: the host name after HostName). */
    char identity[HR_SSHCFG_MAX_IDENTITY][512];
    int nidentity;
    int strict; /* StrictHostKeyChecking: enum hr_ssh_strict */
    /* The first path of UserKnownHostsFile, expanded as IdentityFile;
     * "/dev/null" and "none" stay as written. */
    char known_hosts[512];
    int connect_timeout; /* ConnectTimeout, seconds ("1m30s" allowed) */
    /* "" or one line the caller may log: the first thing honoured only in
     * part (a Match criterion other than all and host, which never
     * matches; an IdentityFile past the eighth). */
    char note[256];
};

/*
 * Whether name matches a pattern list: patterns separated by blanks or
 * commas, '*' and '?' wildcards, case-insensitive; a pattern "!p" that
 * matches rules name out, and some pattern without '!' must match.
 */
int hr_sshcfg_match(const char *patterns, const char *name);

/*
 * Reads the user config at path for host name, as typed by the user:
 * Host, Match (all, host), HostName, Port, User, IdentityFile,
 * StrictHostKeyChecking, UserKnownHostsFile, ConnectTimeout and Include
 * (relative paths under home/.ssh, globs); other keywords are ignored.
 * The first value obtained wins, but IdentityFile values add up. home
 * and local_user give ~, %d and %u (and %r without User). A missing file
 * sets nothing. Returns 0, or HVD_EPARSE, HVD_ERANGE, HVD_EIO or
 * HVD_EINVAL with one line in err, "file:line: ..." for a bad line (bad
 * number, unknown value, line too long, Include nested too deep); out is
 * then incomplete.
 */
int hr_sshcfg_lookup(const char *path, const char *name, const char *home,
                     const char *local_user, struct hr_sshcfg_host *out,
                     char *err, size_t errlen);

#endif
