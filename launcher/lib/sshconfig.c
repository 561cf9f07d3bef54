/* The parts of an OpenSSH client config that horovodrun's SSH links honour. */
#include "launcher/lib/sshconfig.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/errmsg.h"

#define MAX_ARGS 64
#define BLANKS " \t\r\n"

/* One lookup: the answer so far and the values still to expand. */
struct look {
    struct hr_sshcfg_host *out;
    const char *name, *home, *luser;
    char hostname[256]; /* raw HostName */
    char ident[HR_SSHCFG_MAX_IDENTITY][512];
    char known[512];
    int have_timeout;
    char *err;
    size_t errlen;
};

/* Writes "file:line: ..." into the lookup's err; returns rc. */
__attribute__((format(printf, 5, 6))) static int
fail(struct look *lk, const char *file, unsigned long line, int rc,
     const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hvd_seterr(lk->err, lk->errlen, "%s:%lu: %s", file, line, msg);
    return rc;
}

/* Whether s matches the len bytes of pattern p, ignoring case. */
static int wild(const char *p, size_t len, const char *s)
{
    const char *end = p + len, *star = NULL, *back = NULL;

    while (*s) {
        if (p < end && *p == '*') {
            star = ++p;
            back = s;
        } else if (p < end && (*p == '?' || tolower((unsigned char)*p) ==
                                                tolower((unsigned char)*s))) {
            p++;
            s++;
        } else if (star != NULL) {
            p = star;
            s = ++back;
        } else {
            return 0;
        }
    }
    while (p < end && *p == '*')
        p++;
    return p == end;
}

/* Matches the patterns of list (split at seps) against name: 0 if a
 * negated one matches, else 1, setting *pos if a plain one matches. */
static int match_into(const char *list, const char *seps, const char *name,
                      int *pos)
{
    while (*list) {
        size_t len = strcspn(list, seps);
        int neg = *list == '!';

        if (len > (size_t)neg && wild(list + neg, len - neg, name)) {
            if (neg)
                return 0;
            *pos = 1;
        }
        list += len;
        list += strspn(list, seps);
    }
    return 1;
}

int hr_sshcfg_match(const char *patterns, const char *name)
{
    int pos = 0;

    return patterns != NULL && name != NULL &&
           match_into(patterns, " \t,", name, &pos) && pos;
}

/* Splits line in place: the keyword (ended by blanks or '='), then words,
 * quoted ones whole; an unquoted '#' word ends the line. The count, or -1
 * for an unclosed quote. */
static int split(char *s, char **av)
{
    int n = 0;
    char c;

    s += strspn(s, BLANKS);
    if (*s == '\0' || *s == '#')
        return 0;
    av[n++] = s;
    s += strcspn(s, BLANKS "=");
    c = *s;
    if (c != '\0')
        *s++ = '\0';
    s += strspn(s, BLANKS);
    if (c != '=' && *s == '=')
        s++;
    while (n < MAX_ARGS) {
        char *d = s += strspn(s, BLANKS);

        if (*s == '\0' || *s == '#')
            break;
        av[n++] = d;
        while (*s != '\0' && strchr(BLANKS, *s) == NULL) {
            if (*s == '"' || *s == '\'') {
                char q = *s++;

                while (*s != '\0' && *s != q)
                    *d++ = *s++;
                if (*s++ != q)
                    return -1;
            } else {
                *d++ = *s++;
            }
        }
        if (*s != '\0')
            s++;
        *d = '\0';
    }
    return n;
}

/* The first '%' of s not followed by one of ok, or NULL. */
static const char *bad_token(const char *s, const char *ok)
{
    for (s = strchr(s, '%'); s != NULL; s = strchr(s + 2, '%'))
        if (s[1] == '\0' || strchr(ok, s[1]) == NULL)
            return s;
    return NULL;
}

/* Expands a leading ~ (when tilde) and the tokens of src into dst; %h is
 * h. -1 if it does not fit in len bytes. */
static int expand(const struct look *lk, const char *src, const char *h,
                  int tilde, char *dst, size_t len)
{
    static const char tokens[] = "dhnpru";
    const struct hr_sshcfg_host *o = lk->out;
    const char *v[] = {lk->home, h, lk->name, NULL, NULL, lk->luser};
    char port[8], one[2] = "";
    size_t n = 0;

    snprintf(port, sizeof(port), "%d", o->port ? o->port : 22);
    v[3] = port;
    v[4] = *o->user ? o->user : lk->luser;
    dst[0] = '\0';
    if (tilde && src[0] == '~' && (src[1] == '/' || src[1] == '\0')) {
        if ((n = strlen(lk->home)) >= len)
            return -1;
        memcpy(dst, lk->home, n + 1);
        src++;
    }
    for (; *src != '\0'; src++) {
        const char *ins = one, *t;

        one[0] = *src;
        if (*src == '%' && src[1] != '\0') {
            t = strchr(tokens, *++src);
            ins = t != NULL ? v[t - tokens] : "%";
        }
        if (n + strlen(ins) >= len)
            return -1;
        memcpy(dst + n, ins, strlen(ins) + 1);
        n += strlen(ins);
    }
    return 0;
}

/* A time as ConnectTimeout takes it ("30", "1m30s"), or -1. */
static long seconds(const char *s)
{
    static const char units[] = "sSmMhHdDwW";
    static const long mult[] = {1, 60, 3600, 86400, 604800};
    long total = 0;
    char *end;

    do {
        long v;
        const char *u;

        if (!isdigit((unsigned char)*s))
            return -1;
        v = strtol(s, &end, 10);
        u = *end != '\0' ? strchr(units, *end) : NULL;
        if (v > 100000000 || (*end != '\0' && u == NULL))
            return -1;
        total += v * (u != NULL ? mult[(u - units) / 2] : 1);
        if (total > 100000000)
            return -1;
        s = end + (u != NULL);
    } while (*s != '\0');
    return total;
}

/* Copies src to dst (len bytes); -1 if it does not fit. */
static int put(char *dst, size_t len, const char *src)
{
    return snprintf(dst, len, "%s", src) < (int)len ? 0 : -1;
}

static int parse_file(struct look *lk, const char *path, int depth, int on,
                      int never);

/* Match: all, host and !host; any other criterion never matches. */
static int match_line(struct look *lk, const char *file, unsigned long line,
                      char **av, int n, int *on)
{
    char host[256], q[HVD_QUOTE_MAX + 1];
    int ok = 1;

    if (n == 0)
        return fail(lk, file, line, HVD_EPARSE, "Match needs criteria");
    if (expand(lk, lk->hostname, lk->name, 0, host, sizeof(host)) < 0 || !*host)
        snprintf(host, sizeof(host), "%s", lk->name);
    for (int i = 0; i < n; i++) {
        const char *c = av[i] + (av[i][0] == '!');
        int neg = c != av[i], pos = 0, all = strcasecmp(c, "all") == 0;

        hvd_quote(q, c, strlen(c));
        if (!all && strcasecmp(c, "canonical") != 0 &&
            strcasecmp(c, "final") != 0 && ++i == n)
            return fail(lk, file, line, HVD_EPARSE,
                        "Match %s needs an argument", q);
        if (all && n != 1)
            return fail(lk, file, line, HVD_EPARSE,
                        "Match all takes no other criteria");
        if (all) {
            ok = !neg;
        } else if (strcasecmp(c, "host") == 0) {
            ok &= (match_into(av[i], ",", host, &pos) && pos) != neg;
        } else {
            ok = 0;
            if (!*lk->out->note)
                snprintf(lk->out->note, sizeof(lk->out->note),
                         "%s:%lu: Match %s is not supported; its block is "
                         "skipped",
                         file, line, q);
        }
    }
    *on = ok;
    return 0;
}

/* Include: each path (under ~/.ssh if relative) and glob in turn. */
static int include(struct look *lk, const char *file, unsigned long line,
                   char **av, int n, int depth, int on, int never)
{
    char path[4096];
    glob_t g;
    int rc = 0;

    for (int i = 0; i < n && rc == 0; i++) {
        if (av[i][0] == '~' && av[i][1] == '/')
            snprintf(path, sizeof(path), "%s%s", lk->home, av[i] + 1);
        else if (av[i][0] == '/')
            snprintf(path, sizeof(path), "%s", av[i]);
        else
            snprintf(path, sizeof(path), "%s/.ssh/%s", lk->home, av[i]);
        if (glob(path, 0, NULL, &g) != 0)
            g.gl_pathc = 0; /* no match: nothing to read */
        for (size_t k = 0; k < g.gl_pathc && rc == 0; k++)
            rc = depth >= HR_SSHCFG_MAX_DEPTH
                     ? fail(lk, file, line, HVD_ERANGE,
                            "Include nested more than %d deep",
                            HR_SSHCFG_MAX_DEPTH)
                     : parse_file(lk, g.gl_pathv[k], depth + 1, on, never);
        globfree(&g);
    }
    return rc;
}

/* The keywords with one value (UserKnownHostsFile: a list). */
enum { K_HOSTNAME, K_PORT, K_USER, K_IDENTITY, K_STRICT, K_TIMEOUT, K_KNOWN };
static const char *const keywords[] = {"HostName",
                                       "Port",
                                       "User",
                                       "IdentityFile",
                                       "StrictHostKeyChecking",
                                       "ConnectTimeout",
                                       "UserKnownHostsFile"};
#define NKEYWORDS (sizeof(keywords) / sizeof(keywords[0]))

/* StrictHostKeyChecking's values: three yes, three no, accept-new. */
static const char *const stricts[] = {"yes",   "true", "ask",       "no",
                                      "false", "off",  "accept-new"};

/* One keyword line; on: whether the current block applies. Values are
 * checked in every block, as ssh does; only the first one is kept. */
static int keyword(struct look *lk, const char *file, unsigned long line,
                   char **av, int n, int on)
{
    struct hr_sshcfg_host *o = lk->out;
    const char *v = av[1], *bad = NULL;
    char q[HVD_QUOTE_MAX + 1];
    long num = 0;
    int k = 0, rc = 0;

    while (k < (int)NKEYWORDS && strcasecmp(av[0], keywords[k]) != 0)
        k++;
    if (k == (int)NKEYWORDS)
        return 0;
    if (n < 2 || (n > 2 && k != K_KNOWN))
        return fail(lk, file, line, HVD_EPARSE, "%s takes one value",
                    keywords[k]);
    hvd_quote(q, v, strlen(v));
    if (k == K_HOSTNAME || k == K_IDENTITY || k == K_KNOWN)
        bad = bad_token(v, k == K_HOSTNAME ? "h%" : "dhnpru%");
    if (bad != NULL) {
        /* The token quoted too: it may be '%' and a control byte. */
        char tok[HVD_QUOTE_MAX + 1];

        hvd_quote(tok, bad, bad[1] != '\0' ? 2 : 1);
        return fail(lk, file, line, HVD_EPARSE, "%s '%s': unknown token '%s'",
                    keywords[k], q, tok);
    }
    if (k == K_PORT) {
        num = *v && !v[strspn(v, "0123456789")] ? strtol(v, NULL, 10) : -1;
        if (num < 1 || num > 65535)
            return fail(lk, file, line, num < 0 ? HVD_EPARSE : HVD_ERANGE,
                        "bad Port '%s' (want 1 to 65535)", q);
    } else if (k == K_STRICT) {
        while (num < 7 && strcasecmp(v, stricts[num]) != 0)
            num++;
        if (num == 7)
            return fail(lk, file, line, HVD_EPARSE,
                        "bad StrictHostKeyChecking '%s' (want yes, no, "
                        "accept-new or ask)",
                        q);
    } else if (k == K_TIMEOUT && (num = seconds(v)) < 0) {
        return fail(lk, file, line, HVD_EPARSE,
                    "bad ConnectTimeout '%s' (want seconds)", q);
    }
    if (!on)
        return 0;
    if (k == K_PORT && !o->port) {
        o->port = (int)num;
    } else if (k == K_STRICT && !o->strict) {
        o->strict = num < 3   ? HR_SSH_STRICT_YES
                    : num < 6 ? HR_SSH_STRICT_NO
                              : HR_SSH_STRICT_ACCEPT_NEW;
    } else if (k == K_TIMEOUT && !lk->have_timeout) {
        o->connect_timeout = (int)num;
        lk->have_timeout = 1;
    } else if (k == K_HOSTNAME && !*lk->hostname) {
        rc = put(lk->hostname, sizeof(lk->hostname), v);
    } else if (k == K_USER && !*o->user) {
        rc = put(o->user, sizeof(o->user), v);
    } else if (k == K_KNOWN && !*lk->known) {
        rc = put(lk->known, sizeof(lk->known), v);
    } else if (k == K_IDENTITY) {
        for (int i = 0; i < o->nidentity; i++)
            if (strcmp(lk->ident[i], v) == 0)
                return 0;
        if (o->nidentity == HR_SSHCFG_MAX_IDENTITY) {
            if (!*o->note)
                snprintf(o->note, sizeof(o->note),
                         "%s:%lu: more than %d IdentityFile; '%s' is ignored",
                         file, line, HR_SSHCFG_MAX_IDENTITY, q);
            return 0;
        }
        rc = put(lk->ident[o->nidentity++], sizeof(lk->ident[0]), v);
    }
    return rc < 0 ? fail(lk, file, line, HVD_ERANGE, "%s '%s' is too long",
                         keywords[k], q)
                  : 0;
}

/* Reads one file; on: whether its first lines apply; never: whether its
 * Host and Match blocks can never apply (an Include in a skipped block). */
static int parse_file(struct look *lk, const char *path, int depth, int on,
                      int never)
{
    char buf[HR_SSHCFG_LINE_MAX + 2], *av[MAX_ARGS];
    unsigned long line = 0;
    int rc = 0, n;
    FILE *f = fopen(path, "r");

    if (f == NULL && errno == ENOENT)
        return 0;
    if (f == NULL) {
        hvd_seterr(lk->err, lk->errlen, "cannot read '%s': %s", path,
                   strerror(errno));
        return HVD_EIO;
    }
    while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
        line++;
        if (strlen(buf) == sizeof(buf) - 1 && buf[sizeof(buf) - 2] != '\n') {
            rc = fail(lk, path, line, HVD_EPARSE, "line longer than %d bytes",
                      HR_SSHCFG_LINE_MAX);
        } else if ((n = split(buf, av)) < 0) {
            rc = fail(lk, path, line, HVD_EPARSE, "unclosed quote");
        } else if (n > 0 && strcasecmp(av[0], "Host") == 0) {
            int ok = 1, pos = 0;

            for (int i = 1; i < n; i++)
                ok &= match_into(av[i], BLANKS, lk->name, &pos);
            if (n == 1)
                rc = fail(lk, path, line, HVD_EPARSE, "Host needs a pattern");
            on = !never && ok && pos;
        } else if (n > 0 && strcasecmp(av[0], "Match") == 0) {
            rc = match_line(lk, path, line, av + 1, n - 1, &on);
            on &= !never;
        } else if (n > 0 && strcasecmp(av[0], "Include") == 0) {
            rc =
                include(lk, path, line, av + 1, n - 1, depth, on, never || !on);
        } else if (n > 0) {
            rc = keyword(lk, path, line, av, n, on);
        }
    }
    if (rc == 0 && ferror(f)) {
        hvd_seterr(lk->err, lk->errlen, "cannot read '%s'", path);
        rc = HVD_EIO;
    }
    fclose(f);
    return rc;
}

int hr_sshcfg_lookup(const char *path, const char *name, const char *home,
                     const char *local_user, struct hr_sshcfg_host *out,
                     char *err, size_t errlen)
{
    struct look lk = {.out = out,
                      .name = name,
                      .home = home,
                      .luser = local_user,
                      .err = err,
                      .errlen = errlen};
    const char *h, *what = NULL;
    int rc = hvd_errmsg_start(err, errlen,
                              path != NULL && name != NULL && home != NULL &&
                                  local_user != NULL && out != NULL);

    if (rc < 0)
        return rc;
    memset(out, 0, sizeof(*out));
    rc = parse_file(&lk, path, 0, 1, 0);
    if (rc < 0)
        return rc;
    if (expand(&lk, lk.hostname, name, 0, out->hostname,
               sizeof(out->hostname)) < 0)
        what = "HostName";
    h = *out->hostname ? out->hostname : name;
    for (int i = 0; i < out->nidentity && what == NULL; i++)
        if (expand(&lk, lk.ident[i], h, 1, out->identity[i],
                   sizeof(out->identity[i])) < 0)
            what = "an IdentityFile";
    if (what == NULL && expand(&lk, lk.known, h, 1, out->known_hosts,
                               sizeof(out->known_hosts)) < 0)
        what = "UserKnownHostsFile";
    if (what != NULL) {
        hvd_seterr(err, errlen, "%s: %s of %s expands to a value too long",
                   path, what, name);
        return HVD_ERANGE;
    }
    return 0;
}
