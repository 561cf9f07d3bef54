/* Host lists from the output of an elastic job's host discovery script. */
#include "launcher/lib/discovery.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/errmsg.h"

/* One host line of the output. */
struct entry {
    char *name;
    int slots; /* 0 leaves the host out */
    unsigned long line;
    int keep; /* the first line of its host, which gives the place */
};

/* The state of one parse. */
struct parse {
    struct entry *e;
    size_t n;
    size_t cap;
    int default_slots;
    char *err;
    size_t errlen;
};

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* True if len bytes from s are decimal digits, all of them '0'. */
static int all_zero(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (s[i] != '0')
            return 0;
    }
    return len > 0;
}

static int push(struct parse *ps, char *name, int slots, unsigned long line)
{
    struct entry *e;
    size_t cap;

    if (ps->n == ps->cap) {
        cap = ps->cap ? ps->cap * 2 : 16;
        if (cap > SIZE_MAX / sizeof(*e))
            return HVD_ENOMEM;
        e = realloc(ps->e, cap * sizeof(*e));
        if (e == NULL)
            return HVD_ENOMEM;
        ps->e = e;
        ps->cap = cap;
    }
    ps->e[ps->n++] = (struct entry){name, slots, line, 0};
    return 0;
}

/*
 * Parses one trimmed, non-empty line. The host name and slot count are
 * checked by the -H parser, so that a host is written the same way in -H,
 * a hostfile and a discovery script's output; this function only finds
 * the slot count and gives the messages their line number.
 */
static int parse_line(struct parse *ps, unsigned long no, const char *s,
                      size_t len)
{
    struct hvd_hostlist one;
    const char *lb = memchr(s, '[', len);
    const char *rb;
    const char *colon = NULL;
    const char *slots_txt;
    size_t namelen = len;
    size_t slen;
    char q[HVD_QUOTE_MAX + 1];
    char num[16];
    char *spec = NULL;
    int zero = 0;
    int rc = 0;

    hvd_hostlist_init(&one);
    hvd_quote(q, s, len);
    /* The -H parser reads a C string and splits at commas. */
    if (memchr(s, '\0', len) != NULL || memchr(s, ',', len) != NULL) {
        rc = HVD_EPARSE;
        goto out;
    }
    if (lb != NULL) {
        rb = memchr(lb, ']', len - (size_t)(lb - s));
        if (rb != NULL && rb + 1 < s + len && rb[1] == ':')
            colon = rb + 1;
    } else {
        colon = memchr(s, ':', len);
        if (colon != NULL &&
            memchr(colon + 1, ':', len - (size_t)(colon + 1 - s)) != NULL) {
            hvd_seterr(ps->err, ps->errlen,
                       "line %lu: '%s': write an IPv6 address in brackets, "
                       "as [address]:slots",
                       no, q);
            rc = HVD_EPARSE;
            goto out;
        }
    }
    if (colon != NULL) {
        namelen = (size_t)(colon - s);
        slots_txt = colon + 1;
        slen = len - namelen - 1;
        /* Zero slots is valid here; check the name with one slot. */
        if (all_zero(slots_txt, slen)) {
            zero = 1;
            slots_txt = "1";
            slen = 1;
        }
    } else if (ps->default_slots < 1) {
        hvd_seterr(ps->err, ps->errlen,
                   "line %lu: host '%s' has no slot count and "
                   "--slots-per-host is not set: print host:slots, or pass "
                   "--slots-per-host",
                   no, q);
        rc = HVD_EPARSE;
        goto out;
    } else {
        snprintf(num, sizeof(num), "%d", ps->default_slots);
        slots_txt = num;
        slen = strlen(num);
    }

    spec = malloc(namelen + slen + 2);
    if (spec == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    memcpy(spec, s, namelen);
    spec[namelen] = ':';
    memcpy(spec + namelen + 1, slots_txt, slen);
    spec[namelen + slen + 1] = '\0';
    rc = hvd_hostlist_parse_spec(&one, spec, NULL, 0);
    if (rc == 0) {
        rc = push(ps, one.hosts[0].name, zero ? 0 : one.hosts[0].slots, no);
        if (rc == 0)
            one.hosts[0].name = NULL;
    }
out:
    if (rc == HVD_ERANGE && colon != NULL && !zero)
        hvd_seterr(ps->err, ps->errlen,
                   "line %lu: '%s': more slots than the maximum of %d", no, q,
                   HVD_MAX_SLOTS);
    else if (rc == HVD_ERANGE)
        hvd_seterr(ps->err, ps->errlen,
                   "line %lu: '%s': --slots-per-host %d is more than the "
                   "maximum of %d",
                   no, q, ps->default_slots, HVD_MAX_SLOTS);
    else if (rc == HVD_EPARSE && (ps->err == NULL || ps->err[0] == '\0'))
        hvd_seterr(ps->err, ps->errlen,
                   "line %lu: '%s' is not a host: expected host or "
                   "host:slots, with slots a non-negative integer",
                   no, q);
    hvd_hostlist_close(&one);
    free(spec);
    return rc;
}

/* Orders entries by name, then by line, for finding repeated hosts. */
static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a;
    const struct entry *y = *(const struct entry *const *)b;
    int c = strcmp(x->name, y->name);

    return c != 0 ? c : (x->line > y->line) - (x->line < y->line);
}

/*
 * Folds repeated hosts: the first line of each host is kept and takes the
 * slots of the last. Sorting pointers keeps this O(n log n) for outputs of
 * thousands of hosts, read every second.
 */
static int fold(struct parse *ps)
{
    struct entry **by = NULL;
    size_t i;
    size_t run = 0;

    if (ps->n == 0)
        return 0;
    by = malloc(ps->n * sizeof(*by));
    if (by == NULL)
        return HVD_ENOMEM;
    for (i = 0; i < ps->n; i++)
        by[i] = &ps->e[i];
    qsort(by, ps->n, sizeof(*by), cmp_entry);
    for (i = 1; i <= ps->n; i++) {
        if (i < ps->n && strcmp(by[i]->name, by[run]->name) == 0)
            continue;
        by[run]->keep = 1;
        by[run]->slots = by[i - 1]->slots;
        run = i;
    }
    free(by);
    return 0;
}

/*
 * Moves the kept hosts into hl. The array is sized to the next power of
 * two at least the count, because hostspec.c's appends keep no capacity
 * field and assume that size: hvd_hostlist_add stays safe on the result.
 */
static int move_hosts(struct parse *ps, struct hvd_hostlist *hl)
{
    size_t k = 0;
    size_t cap = 1;
    size_t i;

    for (i = 0; i < ps->n; i++)
        k += ps->e[i].keep && ps->e[i].slots > 0;
    if (k == 0)
        return 0;
    while (cap < k)
        cap *= 2;
    if (cap > SIZE_MAX / sizeof(*hl->hosts))
        return HVD_ENOMEM;
    hl->hosts = malloc(cap * sizeof(*hl->hosts));
    if (hl->hosts == NULL)
        return HVD_ENOMEM;
    for (i = 0; i < ps->n; i++) {
        if (!ps->e[i].keep || ps->e[i].slots < 1)
            continue;
        hl->hosts[hl->n].name = ps->e[i].name;
        hl->hosts[hl->n].slots = ps->e[i].slots;
        hl->n++;
        ps->e[i].name = NULL;
    }
    return 0;
}

int hr_discovery_parse(struct hvd_hostlist *hl, const char *out, size_t len,
                       int default_slots, char *err, size_t errlen)
{
    struct parse ps = {
        .default_slots = default_slots, .err = err, .errlen = errlen};
    const char *nl;
    const char *s;
    const char *end;
    unsigned long no = 0;
    size_t n;
    size_t i;
    int rc;

    rc = hvd_errmsg_start(
        err, errlen, hl != NULL && hl->n == 0 && (out != NULL || len == 0));
    if (rc < 0)
        return rc;
    while (rc == 0 && len > 0) {
        nl = memchr(out, '\n', len);
        n = nl ? (size_t)(nl - out) + 1 : len;
        s = out;
        end = nl ? nl : out + len;
        out += n;
        len -= n;
        no++;
        while (s < end && is_space(*s))
            s++;
        while (end > s && is_space(end[-1]))
            end--;
        if (s < end)
            rc = parse_line(&ps, no, s, (size_t)(end - s));
    }
    if (rc == 0)
        rc = fold(&ps);
    if (rc == 0)
        rc = move_hosts(&ps, hl);
    if (rc == HVD_ENOMEM)
        hvd_seterr(err, errlen, "out of memory");
    if (rc < 0)
        hvd_hostlist_close(hl);
    for (i = 0; i < ps.n; i++)
        free(ps.e[i].name);
    free(ps.e);
    return rc;
}

static int cmp_host(const void *a, const void *b)
{
    const struct hvd_host *x = *(const struct hvd_host *const *)a;
    const struct hvd_host *y = *(const struct hvd_host *const *)b;

    return strcmp(x->name, y->name);
}

/* Returns the hosts of hl sorted by name in a new array, or NULL. */
static const struct hvd_host **sorted(const struct hvd_hostlist *hl)
{
    const struct hvd_host **by;
    size_t i;

    by = malloc((hl->n ? hl->n : 1) * sizeof(*by));
    if (by == NULL)
        return NULL;
    for (i = 0; i < hl->n; i++)
        by[i] = &hl->hosts[i];
    if (hl->n > 1)
        qsort(by, hl->n, sizeof(*by), cmp_host);
    return by;
}

int hr_discovery_changes(const struct hvd_hostlist *prev,
                         const struct hvd_hostlist *cur, int *changes)
{
    const struct hvd_host **p = NULL;
    const struct hvd_host **c = NULL;
    size_t i = 0;
    size_t j = 0;
    int got = 0;
    int cmp;
    int rc = 0;

    if (changes == NULL || prev == NULL || cur == NULL)
        return HVD_EINVAL;
    *changes = 0;
    p = sorted(prev);
    c = sorted(cur);
    if (p == NULL || c == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    /* A merge of the two sorted lists sees each host once. */
    while (i < prev->n || j < cur->n) {
        if (i == prev->n)
            cmp = 1;
        else if (j == cur->n)
            cmp = -1;
        else
            cmp = strcmp(p[i]->name, c[j]->name);
        if (cmp < 0) {
            got |= HR_DISCOVERY_REMOVED;
            i++;
        } else if (cmp > 0) {
            got |= HR_DISCOVERY_ADDED;
            j++;
        } else {
            if (c[j]->slots > p[i]->slots)
                got |= HR_DISCOVERY_ADDED;
            else if (c[j]->slots < p[i]->slots)
                got |= HR_DISCOVERY_REMOVED;
            i++;
            j++;
        }
    }
    *changes = got;
out:
    free(p);
    free(c);
    return rc;
}
