/* The SSH link's target for a host: command line, then ssh_config. */
#include "launcher/link/ssh_target.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/link/ssh.h"

/* Read after the user's config, as ssh does. */
#define SYSTEM_CONFIG "/etc/ssh/ssh_config"

static void add_key(struct hr_ssh_target *t, const char *path)
{
    for (int i = 0; i < t->nkeys; i++)
        if (strcmp(t->keys[i], path) == 0)
            return;
    if (t->nkeys < HR_SSH_MAX_KEYS)
        snprintf(t->keys[t->nkeys++], PATH_MAX, "%s", path);
}

/* Values the user's config left unset, from the system's. */
static void merge(struct hr_sshcfg_host *u, const struct hr_sshcfg_host *sys,
                  int *strict_sys)
{
    if (!u->hostname[0])
        snprintf(u->hostname, sizeof(u->hostname), "%s", sys->hostname);
    if (!u->port)
        u->port = sys->port;
    if (!u->user[0])
        snprintf(u->user, sizeof(u->user), "%s", sys->user);
    for (int i = 0; i < sys->nidentity && u->nidentity < HR_SSHCFG_MAX_IDENTITY;
         i++)
        memcpy(u->identity[u->nidentity++], sys->identity[i],
               sizeof(u->identity[0]));
    *strict_sys = !u->strict && sys->strict;
    if (!u->strict)
        u->strict = sys->strict;
    if (!u->known_hosts[0])
        snprintf(u->known_hosts, sizeof(u->known_hosts), "%s",
                 sys->known_hosts);
    if (!u->connect_timeout)
        u->connect_timeout = sys->connect_timeout;
    if (!u->note[0])
        snprintf(u->note, sizeof(u->note), "%s", sys->note);
}

int hr_ssh_target(const char *name, const struct hr_ssh_cfg *cfg,
                  const char *home, const char *local_user,
                  struct hr_ssh_target *t, char *err, size_t errlen)
{
    static const char *defaults[] = {"id_ed25519", "id_ecdsa", "id_rsa"};
    struct hr_sshcfg_host c = {0}, sys = {0};
    char user_config[PATH_MAX], path[PATH_MAX];
    const char *at = strrchr(name, '@');
    const char *host = at ? at + 1 : name;
    int rc, strict_sys = 0;

    memset(t, 0, sizeof(*t));
    snprintf(user_config, sizeof(user_config), "%s/.ssh/config", home);
    rc = hr_sshcfg_lookup(user_config, host, home, local_user, &c, err, errlen);
    if (rc == 0)
        rc = hr_sshcfg_lookup(SYSTEM_CONFIG, host, home, local_user, &sys, err,
                              errlen);
    if (rc != 0)
        return rc;
    merge(&c, &sys, &strict_sys);

    if (at)
        snprintf(t->user, sizeof(t->user), "%.*s", (int)(at - name), name);
    else
        snprintf(t->user, sizeof(t->user), "%s",
                 c.user[0] ? c.user : local_user);
    snprintf(t->host, sizeof(t->host), "%s", c.hostname[0] ? c.hostname : host);
    t->port = cfg->port ? cfg->port : c.port ? c.port : 22;
    if (cfg->identity_file)
        add_key(t, cfg->identity_file);
    for (int i = 0; i < c.nidentity; i++)
        add_key(t, c.identity[i]);
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/.ssh/%s", home, defaults[k]);
        if (access(path, R_OK) == 0)
            add_key(t, path);
    }
    if (cfg->accept_new) {
        t->strict = HR_SSH_STRICT_ACCEPT_NEW;
    } else {
        t->strict = c.strict ? c.strict : HR_SSH_STRICT_YES;
        if (c.strict)
            snprintf(t->strict_from, sizeof(t->strict_from), "%s",
                     strict_sys ? SYSTEM_CONFIG : user_config);
    }
    if (c.known_hosts[0])
        snprintf(t->known_hosts, sizeof(t->known_hosts), "%s", c.known_hosts);
    else
        snprintf(t->known_hosts, sizeof(t->known_hosts), "%s/.ssh/known_hosts",
                 home);
    t->connect_timeout_s = c.connect_timeout;
    snprintf(t->note, sizeof(t->note), "%s", c.note);
    return 0;
}
