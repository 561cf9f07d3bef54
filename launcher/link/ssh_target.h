/* Where and how the SSH link reaches a host: the command line, then
 * ~/.ssh/config and /etc/ssh/ssh_config, then OpenSSH's defaults. */
#ifndef HR_SSH_TARGET_H
#define HR_SSH_TARGET_H

#include <limits.h>
#include <stddef.h>

#include "launcher/lib/sshconfig.h"

struct hr_ssh_cfg;

/* -i, the config's IdentityFile values, ~/.ssh/id_{ed25519,ecdsa,rsa}. */
#define HR_SSH_MAX_KEYS (1 + HR_SSHCFG_MAX_IDENTITY + 3)

struct hr_ssh_target {
    char user[128];
    char host[256]; /* connected to, and its key checked: after HostName */
    int port;
    char keys[HR_SSH_MAX_KEYS][PATH_MAX]; /* to try after ssh-agent */
    int nkeys;
    int strict;                 /* enum hr_ssh_strict, never UNSET */
    char strict_from[PATH_MAX]; /* the file that set it, "" if none did */
    char known_hosts[PATH_MAX]; /* "/dev/null" or "none": no file */
    int connect_timeout_s;      /* 0: the system's */
    char note[300];             /* "" or a line to log at info level */
};

/*
 * Fills t for the host named name ("user@host" or "host"). The command
 * line wins (user@, -p, -i first among the keys, --ssh-accept-new); then
 * the user's config, then the system's (the first value of each wins, as
 * in ssh). home is $HOME's, local_user this process's user. Returns 0,
 * or an error code with one line in err naming the config file and line.
 */
int hr_ssh_target(const char *name, const struct hr_ssh_cfg *cfg,
                  const char *home, const char *local_user,
                  struct hr_ssh_target *t, char *err, size_t errlen);

#endif
