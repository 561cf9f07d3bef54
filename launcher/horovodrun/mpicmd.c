/* Builds mpirun's command line for horovodrun --mpi. */
#include "launcher/horovodrun/mpicmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/envc.h"
#include "launcher/lib/errcode.h"

extern char **environ;

/* A word being built by hr_shell_split. */
struct word {
    char *p;
    size_t len, cap;
    int started; /* quotes make a word even when it is empty */
};

static int word_put(struct word *w, char c)
{
    if (w->len + 1 >= w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        char *p = realloc(w->p, cap);
        if (p == NULL)
            return HVD_ENOMEM;
        w->p = p;
        w->cap = cap;
    }
    w->p[w->len++] = c;
    w->started = 1;
    return 0;
}

static int word_end(struct word *w, struct hvd_strvec *out)
{
    if (!w->started)
        return 0;
    int rc = hvd_strvec_pushn(out, w->p ? w->p : "", w->len);
    w->len = 0;
    w->started = 0;
    return rc;
}

/* hr_shell_split for the option what (--mpi-args, --binding-args). */
static int split_words(const char *what, const char *s, struct hvd_strvec *out,
                       char *err, size_t errlen)
{
    struct word w = {0};
    char quote = 0; /* the open quote, or 0 */
    int rc = 0;

    for (const char *c = s; *c && rc == 0; c++) {
        if (quote == '\'') {
            if (*c == '\'')
                quote = 0;
            else
                rc = word_put(&w, *c);
        } else if (quote == '"') {
            if (*c == '"')
                quote = 0;
            else if (*c == '\\' && c[1] && strchr("\"\\$`\n", c[1]))
                rc = *++c == '\n' ? 0 : word_put(&w, *c);
            else
                rc = word_put(&w, *c);
        } else if (*c == '\'' || *c == '"') {
            quote = *c;
            w.started = 1;
        } else if (*c == '\\') {
            if (c[1] == '\0') {
                snprintf(err, errlen, "%s ends with a backslash: %s", what, s);
                rc = HVD_EPARSE;
            } else if (*++c != '\n') {
                rc = word_put(&w, *c);
            }
        } else if (*c == ' ' || *c == '\t' || *c == '\n') {
            rc = word_end(&w, out);
        } else {
            rc = word_put(&w, *c);
        }
    }
    if (rc == 0 && quote) {
        snprintf(err, errlen, "%s has an unclosed %c quote: %s", what, quote,
                 s);
        rc = HVD_EPARSE;
    }
    if (rc == 0)
        rc = word_end(&w, out);
    if (rc == HVD_ENOMEM)
        snprintf(err, errlen, "out of memory");
    free(w.p);
    return rc;
}

int hr_shell_split(const char *s, struct hvd_strvec *out, char *err,
                   size_t errlen)
{
    return split_words("--mpi-args", s, out, err, errlen);
}

/* Characters a shell takes literally outside quotes. */
static int plain(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789_@%+=:,./-",
                    *s))
            return 0;
    return 1;
}

char *hr_shell_join(char *const *words)
{
    size_t cap = 1;
    for (char *const *w = words; *w; w++)
        cap += 4 * strlen(*w) + 3;
    char *out = malloc(cap), *p = out;
    if (out == NULL)
        return NULL;
    for (char *const *w = words; *w; w++) {
        if (w != words)
            *p++ = ' ';
        if (plain(*w)) {
            p += sprintf(p, "%s", *w);
            continue;
        }
        /* '...' with each ' written as '\'' */
        *p++ = '\'';
        for (const char *c = *w; *c; c++) {
            if (*c == '\'') {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *c;
            }
        }
        *p++ = '\'';
    }
    *p = '\0';
    return out;
}

/*
 * The variables that travel with -x: horovodrun's settings for the ranks
 * and the user's HOROVOD_*, the ones a rank's program and its libraries
 * commonly need on every host, but not those hvd-mpi-rank sets per rank
 * nor a rendezvous's, which means nothing under mpirun. (On this host
 * mpirun's ranks see its whole environment anyway.) Whether the variable
 * NAME (len bytes) is one of them.
 */
static int exported(const char *name, size_t len)
{
    static const char *const prefixes[] = {"HOROVOD_", "HVD_", "NCCL_",
                                           "PYTHON"};
    static const char *const names[] = {
        "PATH", "LD_LIBRARY_PATH", HVD_ENV_CUDA_VISIBLE,
        HVD_ENV_TORCH_MASTER_ADDR, HVD_ENV_TORCH_MASTER_PORT};
    static const char *const never[] = {HVD_ENV_RANK,       HVD_ENV_SIZE,
                                        HVD_ENV_LOCAL_RANK, HVD_ENV_LOCAL_SIZE,
                                        HVD_ENV_CROSS_RANK, HVD_ENV_CROSS_SIZE,
                                        HVD_ENV_HOSTNAME,   HVD_ENV_RDV_ADDR,
                                        HVD_ENV_RDV_PORT,   HVD_ENV_SECRET};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (strlen(never[i]) == len && memcmp(name, never[i], len) == 0)
            return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == len && memcmp(name, names[i], len) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t n = strlen(prefixes[i]);
        if (len > n && memcmp(name, prefixes[i], n) == 0)
            return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* -x NAME for each exported variable, sorted by name. */
static int push_exports(struct hvd_strvec *argv)
{
    struct hvd_strvec names;
    int rc = 0;
    hvd_strvec_init(&names);
    for (char **e = environ; *e && rc == 0; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && exported(*e, (size_t)(eq - *e)))
            rc = hvd_strvec_pushn(&names, *e, (size_t)(eq - *e));
    }
    if (rc == 0 && names.n > 0)
        qsort(names.v, names.n, sizeof(names.v[0]), cmp_str);
    for (size_t i = 0; i < names.n && rc == 0; i++)
        if ((rc = hvd_strvec_push(argv, "-x")) == 0)
            rc = hvd_strvec_push(argv, names.v[i]);
    hvd_strvec_close(&names);
    return rc;
}

/* Whether the user's mpirun arguments set one of these options. */
static int user_sets(const struct hvd_strvec *user, const char *const *opts)
{
    for (size_t i = 0; i < user->n; i++) {
        const char *a = user->v[i];
        a += a[0] == '-' && a[1] == '-';
        for (const char *const *o = opts; *o; o++) {
            size_t n = strlen(*o);
            if (strncmp(a, *o, n) == 0 && (a[n] == '\0' || a[n] == '='))
                return 1;
        }
    }
    return 0;
}

/* Whether the user's mpirun arguments set the MCA parameter name
 * (-mca NAME value or --mca NAME value). */
static int user_sets_mca(const struct hvd_strvec *user, const char *name)
{
    for (size_t i = 0; i + 1 < user->n; i++)
        if ((strcmp(user->v[i], "-mca") == 0 ||
             strcmp(user->v[i], "--mca") == 0) &&
            strcmp(user->v[i + 1], name) == 0)
            return 1;
    return 0;
}

/* "host:n,host:n" of the hosts that get ranks, as -H writes them. */
static char *host_spec(const struct hvd_hostlist *hl, const struct hvd_plan *p)
{
    size_t cap = 1;
    for (size_t h = 0; h < hl->n; h++)
        cap += strlen(hl->hosts[h].name) + 16;
    char *s = malloc(cap), *q = s;
    if (s == NULL)
        return NULL;
    *q = '\0';
    for (size_t h = 0; h < hl->n; h++) {
        int n = hvd_plan_host_ranks(p, (int)h);
        const char *name = hl->hosts[h].name;
        if (n == 0)
            continue;
        /* An IPv6 address needs brackets before its slots. */
        int v6 = strchr(name, ':') != NULL;
        q += sprintf(q, "%s%s%s%s:%d", q == s ? "" : ",", v6 ? "[" : "", name,
                     v6 ? "]" : "", n);
    }
    return s;
}

/* Open MPI's hostfile has our syntax: "host slots=N" per line. */
static int write_hostfile(struct hr_mpicmd *c, const struct hvd_hostlist *hl,
                          const struct hvd_plan *p, char *err, size_t errlen)
{
    const char *dir = getenv("TMPDIR");
    snprintf(c->hostfile, sizeof(c->hostfile), "%s/horovodrun-hosts-XXXXXX",
             dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(c->hostfile);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        snprintf(err, errlen, "cannot create a hostfile for mpirun in %s: %s",
                 dir && dir[0] ? dir : "/tmp", strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(c->hostfile);
        }
        c->hostfile[0] = '\0';
        return HVD_EIO;
    }
    for (size_t h = 0; h < hl->n; h++) {
        int n = hvd_plan_host_ranks(p, (int)h);
        if (n > 0)
            fprintf(f, "%s slots=%d\n", hl->hosts[h].name, n);
    }
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write the hostfile %s: %s", c->hostfile,
                 strerror(errno));
        return HVD_EIO;
    }
    return 0;
}

/* -p, -i and host key checking for the ssh that starts Open MPI's
 * daemons, which splits plm_rsh_args at blanks. */
static int rsh_args(const struct hr_opts *o, char *out, size_t len, char *err,
                    size_t errlen)
{
    size_t n = 0;
    out[0] = '\0';
    if (o->ssh_port)
        n += (size_t)snprintf(out + n, len - n, " -p %d", o->ssh_port);
    if (o->identity_file) {
        if (strpbrk(o->identity_file, " \t\n")) {
            snprintf(err, errlen,
                     "--ssh-identity-file '%s' holds a blank, which mpirun's "
                     "plm_rsh_args cannot carry; use a path without blanks",
                     o->identity_file);
            return HVD_EPARSE;
        }
        n += (size_t)snprintf(out + n, len - n, " -i %s", o->identity_file);
    }
    if (o->ssh_accept_new)
        n += (size_t)snprintf(out + n, len - n,
                              " -o StrictHostKeyChecking=accept-new");
    if (n >= len) {
        snprintf(err, errlen, "--ssh-identity-file is too long");
        return HVD_EPARSE;
    }
    return 0;
}

int hr_mpicmd_stop_step(const struct hr_opts *o)
{
    if (!o->kill_grace_set)
        return 1;
    int s = (int)o->kill_grace;
    return s + (s < o->kill_grace || s < 1);
}

#define PUSH(s)                                                                \
    do {                                                                       \
        if ((rc = hvd_strvec_push(&c->argv, (s))) != 0)                        \
            goto out;                                                          \
    } while (0)

int hr_mpicmd_build(struct hr_mpicmd *c, const char *mpirun,
                    const char *wrapper, const struct hr_opts *o,
                    const struct hvd_hostlist *hl, const struct hvd_plan *p,
                    char *err, size_t errlen)
{
    static const char *const bind_opts[] = {"-bind-to", "-bind-to-core",
                                            "-bind-to-socket", NULL};
    static const char *const map_opts[] = {
        "-map-by", "-bynode", "-byslot",   "-npernode", "-npersocket",
        "-ppr",    "-rf",     "-rankfile", NULL};
    struct hvd_strvec user, binding;
    char num[32], rsh[PATH_MAX + 128];
    char *spec = NULL;
    int rc;

    hvd_strvec_init(&c->argv);
    hvd_strvec_init(&user);
    hvd_strvec_init(&binding);
    c->hostfile[0] = '\0';
    if (o->mpi_args &&
        (rc = hr_shell_split(o->mpi_args, &user, err, errlen)) != 0)
        goto out;
    if (o->binding_args && (rc = split_words("--binding-args", o->binding_args,
                                             &binding, err, errlen)) != 0)
        goto out;
    if ((rc = rsh_args(o, rsh, sizeof(rsh), err, errlen)) != 0)
        goto out;
    if ((spec = host_spec(hl, p)) == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    PUSH(mpirun);
    if (geteuid() == 0)
        PUSH("--allow-run-as-root");
    /* Every piece of output carries its rank: see mpiwire.h. */
    PUSH("--tag-output");
    snprintf(num, sizeof(num), "%d", p->size);
    PUSH("-np");
    PUSH(num);
    if (o->hostfile) {
        if ((rc = write_hostfile(c, hl, p, err, errlen)) != 0)
            goto out;
        PUSH("--hostfile");
        PUSH(c->hostfile);
    } else {
        PUSH("-H");
        PUSH(spec);
    }
    /* Horovod's placement: hosts in order, slots filled in turn, and no
     * pinning of the ranks to cores (the training framework's threads
     * need them all). --binding-args replaces it all, as in Horovod. */
    for (size_t i = 0; i < binding.n; i++)
        PUSH(binding.v[i]);
    if (!o->binding_args && !user_sets(&user, bind_opts)) {
        PUSH("--bind-to");
        PUSH("none");
    }
    if (!o->binding_args && !user_sets(&user, map_opts)) {
        PUSH("--map-by");
        PUSH("slot");
    }
    /*
     * --tcp: the flags Horovod gives Open MPI's mpirun, the ob1 messaging
     * layer over the byte transfer layers but openib, keep MPI off UCX
     * and InfiniBand verbs: TCP between hosts, shared memory within one.
     */
    if (o->tcp && !user_sets_mca(&user, "pml")) {
        PUSH("--mca");
        PUSH("pml");
        PUSH("ob1");
    }
    if (o->tcp && !user_sets_mca(&user, "btl")) {
        PUSH("--mca");
        PUSH("btl");
        PUSH("^openib");
    }
    /*
     * mpirun stops ranks with SIGCONT, SIGTERM and SIGKILL, sleeping this
     * many whole seconds (default 1) before each of the last two even when
     * the ranks are gone: a long --kill-grace makes every stop that slow,
     * so it is passed on only when given.
     */
    if (o->kill_grace_set) {
        snprintf(num, sizeof(num), "%d", hr_mpicmd_stop_step(o));
        PUSH("--mca");
        PUSH("odls_base_sigkill_timeout");
        PUSH(num);
    }
    if (rsh[0]) {
        PUSH("--mca");
        PUSH("plm_rsh_args");
        PUSH(rsh + 1);
    }
    if (o->network_interfaces) {
        PUSH("--mca");
        PUSH("btl_tcp_if_include");
        PUSH(o->network_interfaces);
        PUSH("--mca");
        PUSH("oob_tcp_if_include");
        PUSH(o->network_interfaces);
    }
    if ((rc = push_exports(&c->argv)) != 0)
        goto out;
    for (size_t i = 0; i < user.n; i++)
        PUSH(user.v[i]);
    PUSH(wrapper);
    if (!o->gpu_pinning)
        PUSH("--no-gpu-pinning");
    PUSH("--plan");
    PUSH(spec);
    PUSH("--");
    for (int i = 0; i < o->cmdc; i++)
        PUSH(o->cmd[i]);
out:
    if (rc == HVD_ENOMEM)
        snprintf(err, errlen, "out of memory for mpirun's command line");
    free(spec);
    hvd_strvec_close(&user);
    hvd_strvec_close(&binding);
    return rc;
}

void hr_mpicmd_close(struct hr_mpicmd *c)
{
    if (c == NULL)
        return;
    if (c->hostfile[0])
        unlink(c->hostfile);
    c->hostfile[0] = '\0';
    hvd_strvec_close(&c->argv);
}
