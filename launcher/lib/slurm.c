/* Slurm allocations: node list expressions and tasks per node. */
#include "launcher/lib/slurm.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errmsg.h"
#include "launcher/lib/errcode.h"

/* Numbers in brackets stop here; node numbers are never this large. */
#define NUM_MAX 999999999999999999ULL

/* One number or range inside brackets, "07" or "08-11". */
struct range {
    unsigned long long lo;
    unsigned long long hi;
    int width; /* digits of the lower bound: names are zero-padded to it */
};

/* One bracket group of an entry, with the text that follows it. */
struct group {
    size_t first; /* its ranges are ranges[first .. first + n) */
    size_t n;
    const char *tail; /* text between the ']' and the next '[' or the end */
    size_t tail_len;
    size_t at;            /* while expanding: the current range */
    unsigned long long v; /* while expanding: the current number */
};

/*
 * The state of one expansion. The arrays are reused from entry to entry,
 * so they hold only the entry being parsed.
 */
struct expander {
    const char *list; /* the whole node list, for offsets */
    char *err;
    size_t errlen;
    const char *entry; /* the entry being parsed, for quoting */
    size_t entry_len;
    size_t head_len; /* text in front of the first '[' */
    struct range *ranges;
    size_t nranges;
    size_t rcap;
    struct group *groups;
    size_t ngroups;
    size_t gcap;
    size_t made; /* names produced by earlier entries */
};

/*
 * Returns arr (n elements used, *cap allocated, each size bytes) with room
 * for one more, or NULL with arr untouched. Capacity doubles so that
 * appends are amortized O(1).
 */
static void *reserve(void *arr, size_t *cap, size_t n, size_t size)
{
    size_t ncap;
    void *p;

    if (n < *cap)
        return arr;
    ncap = *cap ? *cap : 8;
    while (ncap <= n) {
        if (ncap > SIZE_MAX / 2 / size)
            return NULL;
        ncap *= 2;
    }
    p = realloc(arr, ncap * size);
    if (p != NULL)
        *cap = ncap;
    return p;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* True for the bytes no host name and no Slurm variable may hold. */
static int is_bad_byte(char c)
{
    return (unsigned char)c <= 0x20 || c == 0x7f;
}

/*
 * Reports the whitespace or control byte at p, found in the entry (or
 * element) s of len bytes; what names the input ("Slurm node list").
 */
static void bad_byte_err(char *err, size_t errlen, const char *what,
                         const char *base, const char *p, const char *s,
                         size_t len)
{
    char q[HVD_QUOTE_MAX + 1];
    int ws = *p == ' ' || (*p >= '\t' && *p <= '\r');

    hvd_quote(q, s, len);
    hvd_seterr(err, errlen, "%s: %s at offset %zu in '%s'%s", what,
               ws ? "whitespace" : "control character", (size_t)(p - base), q,
               ws ? "; separate entries with commas only" : "");
}

/*
 * Reads the decimal digits at s, at most len bytes, and returns how many
 * there were. *v gets their value, saturated just above NUM_MAX.
 */
static size_t read_num(const char *s, size_t len, unsigned long long *v)
{
    size_t i;

    *v = 0;
    for (i = 0; i < len && is_digit(s[i]); i++) {
        if (*v <= NUM_MAX)
            *v = *v * 10 + (unsigned long long)(s[i] - '0');
    }
    if (*v > NUM_MAX)
        *v = NUM_MAX + 1;
    return i;
}

/* Number of decimal digits of v. */
static int digits(unsigned long long v)
{
    int d = 1;

    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Reports a problem with the entry being parsed, at offset of p. */
static void __attribute__((format(printf, 3, 4)))
entry_err(struct expander *ex, const char *p, const char *fmt, ...)
{
    char q[HVD_QUOTE_MAX + 1];
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    if (vsnprintf(what, sizeof(what), fmt, ap) < 0)
        what[0] = '\0';
    va_end(ap);
    hvd_quote(q, ex->entry, ex->entry_len);
    hvd_seterr(ex->err, ex->errlen, "Slurm node list: %s at offset %zu in '%s'",
               what, (size_t)(p - ex->list), q);
}

/*
 * Parses one element of a bracket group, "N" or "N-M" with s at its first
 * byte and len bytes long, and appends its range.
 */
static int parse_range(struct expander *ex, const char *s, size_t len)
{
    char q[HVD_QUOTE_MAX + 1];
    struct range *ranges;
    struct range r;
    unsigned long long hi;
    size_t nlo;
    int ok;

    hvd_quote(q, s, len);
    if (len == 0) {
        entry_err(ex, s, "empty range");
        return HVD_EPARSE;
    }
    nlo = read_num(s, len, &r.lo);
    hi = r.lo;
    ok = nlo > 0;
    if (ok && nlo < len) {
        /* Only "-" and the upper bound may follow the lower bound. */
        ok = s[nlo] == '-' &&
             read_num(s + nlo + 1, len - nlo - 1, &hi) == len - nlo - 1 &&
             nlo + 1 < len;
    }
    if (!ok) {
        entry_err(ex, s, "'%s' is not a number or range (expected N or N-M)",
                  q);
        return HVD_EPARSE;
    }
    if (r.lo > NUM_MAX || hi > NUM_MAX) {
        entry_err(ex, s, "'%s' holds a number larger than %llu", q, NUM_MAX);
        return HVD_ERANGE;
    }
    if (r.lo > hi) {
        entry_err(ex, s, "range '%s' goes backwards", q);
        return HVD_ERANGE;
    }
    if (hi - r.lo >= HVD_SLURM_MAX_HOSTS) {
        entry_err(ex, s, "range '%s' spans more than %d hosts", q,
                  HVD_SLURM_MAX_HOSTS);
        return HVD_ERANGE;
    }
    if (nlo > HVD_SLURM_NAME_MAX) {
        entry_err(ex, s, "'%s' is longer than a host name may be", q);
        return HVD_ERANGE;
    }
    r.hi = hi;
    r.width = (int)nlo;
    ranges = reserve(ex->ranges, &ex->rcap, ex->nranges, sizeof(r));
    if (ranges == NULL)
        return HVD_ENOMEM;
    ex->ranges = ranges;
    ex->ranges[ex->nranges++] = r;
    return 0;
}

/*
 * Parses the bracket group that starts at *pp (on its '[') and appends it;
 * *pp ends up just past the ']'.
 */
static int parse_group(struct expander *ex, const char **pp)
{
    const char *open = *pp;
    const char *p = open + 1;
    const char *el;
    struct group g = {.first = ex->nranges};
    struct group *groups;
    int rc;

    if (*p == ']') {
        entry_err(ex, open, "empty brackets");
        return HVD_EPARSE;
    }
    for (;;) {
        el = p;
        while (*p != '\0' && *p != ',' && *p != ']' && *p != '[' &&
               !is_bad_byte(*p))
            p++;
        if (*p == '\0') {
            entry_err(ex, open, "'[' has no matching ']'");
            return HVD_EPARSE;
        }
        if (*p == '[') {
            entry_err(ex, p, "'[' inside brackets");
            return HVD_EPARSE;
        }
        if (is_bad_byte(*p)) {
            bad_byte_err(ex->err, ex->errlen, "Slurm node list", ex->list, p,
                         ex->entry, ex->entry_len);
            return HVD_EPARSE;
        }
        rc = parse_range(ex, el, (size_t)(p - el));
        if (rc < 0)
            return rc;
        if (*p++ == ']')
            break;
    }
    g.n = ex->nranges - g.first;
    g.tail = p;
    groups = reserve(ex->groups, &ex->gcap, ex->ngroups, sizeof(g));
    if (groups == NULL)
        return HVD_ENOMEM;
    ex->groups = groups;
    ex->groups[ex->ngroups++] = g;
    *pp = p;
    return 0;
}

/* Returns the end of the entry that starts at s: its ',' or the NUL. */
static const char *entry_end(const char *s)
{
    int depth = 0;

    for (; *s != '\0' && (*s != ',' || depth > 0); s++) {
        if (*s == '[')
            depth++;
        else if (*s == ']' && depth > 0)
            depth--;
    }
    return s;
}

/*
 * Checks that the parsed entry stays within the limits: the names it gives,
 * together with the earlier ones, and the length of its longest name.
 */
static int check_entry(struct expander *ex)
{
    size_t room = HVD_SLURM_MAX_HOSTS - ex->made;
    size_t names = 1;
    size_t len = ex->head_len;
    size_t count;
    size_t i;
    size_t k;
    int width;

    for (i = 0; i < ex->ngroups; i++) {
        const struct group *g = &ex->groups[i];

        count = 0;
        width = 0;
        for (k = g->first; k < g->first + g->n; k++) {
            const struct range *r = &ex->ranges[k];

            /* Each range spans at most the limit, so this cannot wrap. */
            count += (size_t)(r->hi - r->lo) + 1;
            if (count > room)
                count = room + 1;
            if (digits(r->hi) > width)
                width = digits(r->hi);
            if (r->width > width)
                width = r->width;
        }
        names = count > room / names ? room + 1 : names * count;
        len += (size_t)width + g->tail_len;
    }
    if (names > room) {
        entry_err(ex, ex->entry, "the list grows past %d hosts",
                  HVD_SLURM_MAX_HOSTS);
        return HVD_ERANGE;
    }
    if (len > HVD_SLURM_NAME_MAX) {
        entry_err(ex, ex->entry, "a host name is longer than %d bytes",
                  HVD_SLURM_NAME_MAX);
        return HVD_ERANGE;
    }
    ex->made += names;
    return 0;
}

/*
 * Moves the expansion on to the next name, in Slurm's order: the last group
 * changes fastest, then the first, the second and so on, the group before
 * the last changing slowest. That is the order "scontrol show hostnames"
 * prints, because Slurm expands the last group as a range and wraps each
 * earlier group, right to left, as a loop around it; with two groups it is
 * plain counting. Returns 0 once every combination was produced.
 */
static int next_name(struct expander *ex)
{
    size_t s;

    for (s = 0; s < ex->ngroups; s++) {
        struct group *g = &ex->groups[s == 0 ? ex->ngroups - 1 : s - 1];

        if (g->v < ex->ranges[g->at].hi) {
            g->v++;
            return 1;
        }
        if (g->at + 1 < g->first + g->n) {
            g->at++;
            g->v = ex->ranges[g->at].lo;
            return 1;
        }
        g->at = g->first;
        g->v = ex->ranges[g->at].lo;
    }
    return 0;
}

/* Appends every name of the parsed entry to out. */
static int emit_entry(struct expander *ex, struct hvd_strvec *out)
{
    char name[HVD_SLURM_NAME_MAX + 1];
    size_t len;
    size_t i;
    int rc;

    for (i = 0; i < ex->ngroups; i++) {
        ex->groups[i].at = ex->groups[i].first;
        ex->groups[i].v = ex->ranges[ex->groups[i].first].lo;
    }
    do {
        /* check_entry bounded every name, so nothing here is cut. */
        memcpy(name, ex->entry, ex->head_len);
        len = ex->head_len;
        for (i = 0; i < ex->ngroups; i++) {
            const struct group *g = &ex->groups[i];

            len += (size_t)snprintf(name + len, sizeof(name) - len, "%0*llu",
                                    ex->ranges[g->at].width, g->v);
            memcpy(name + len, g->tail, g->tail_len);
            len += g->tail_len;
        }
        rc = hvd_strvec_pushn(out, name, len);
    } while (rc == 0 && next_name(ex));
    return rc;
}

/* Parses the entry at *pp, up to its ',' or the end, and appends it. */
static int parse_entry(struct expander *ex, struct hvd_strvec *out,
                       const char **pp)
{
    const char *p = *pp;
    const char *end = entry_end(p);
    int rc = 0;

    ex->entry = p;
    ex->entry_len = (size_t)(end - p);
    ex->nranges = 0;
    ex->ngroups = 0;
    if (p == end) {
        hvd_seterr(ex->err, ex->errlen,
                   "Slurm node list: empty entry at offset %zu",
                   (size_t)(p - ex->list));
        return HVD_EPARSE;
    }
    while (rc == 0 && p < end) {
        if (is_bad_byte(*p)) {
            bad_byte_err(ex->err, ex->errlen, "Slurm node list", ex->list, p,
                         ex->entry, ex->entry_len);
            rc = HVD_EPARSE;
        } else if (*p == ']') {
            entry_err(ex, p, "']' has no matching '['");
            rc = HVD_EPARSE;
        } else if (*p == '[') {
            if (ex->ngroups == 0)
                ex->head_len = (size_t)(p - ex->entry);
            else
                ex->groups[ex->ngroups - 1].tail_len =
                    (size_t)(p - ex->groups[ex->ngroups - 1].tail);
            rc = parse_group(ex, &p);
        } else {
            p++;
        }
    }
    if (rc < 0)
        return rc;
    if (ex->ngroups == 0)
        ex->head_len = ex->entry_len;
    else
        ex->groups[ex->ngroups - 1].tail_len =
            (size_t)(end - ex->groups[ex->ngroups - 1].tail);
    rc = check_entry(ex);
    if (rc == 0)
        rc = emit_entry(ex, out);
    *pp = end;
    return rc;
}

/* Drops the strings of sv from index n on. */
static void truncate_vec(struct hvd_strvec *sv, size_t n)
{
    while (sv->n > n)
        free(sv->v[--sv->n]);
    if (sv->v != NULL)
        sv->v[sv->n] = NULL;
}

int hvd_slurm_expand(struct hvd_strvec *out, const char *nodelist, char *err,
                     size_t errlen)
{
    struct expander ex = {.list = nodelist, .err = err, .errlen = errlen};
    const char *p = nodelist;
    size_t before;
    int rc;

    rc = hvd_errmsg_start(err, errlen, out != NULL && nodelist != NULL);
    if (rc < 0)
        return rc;
    if (*p == '\0') {
        hvd_seterr(err, errlen, "Slurm node list is empty");
        return HVD_EPARSE;
    }
    before = out->n;
    for (;;) {
        rc = parse_entry(&ex, out, &p);
        if (rc < 0 || *p == '\0')
            break;
        p++; /* past the ',' */
    }
    if (rc == HVD_ENOMEM)
        hvd_seterr(err, errlen, "out of memory");
    if (rc < 0)
        truncate_vec(out, before);
    free(ex.ranges);
    free(ex.groups);
    return rc;
}

void hvd_slurm_tasks_init(struct hvd_slurm_tasks *t)
{
    if (t == NULL)
        return;
    t->counts = NULL;
    t->n = 0;
}

void hvd_slurm_tasks_close(struct hvd_slurm_tasks *t)
{
    if (t == NULL)
        return;
    free(t->counts);
    hvd_slurm_tasks_init(t);
}

/* Reports a problem with the tasks entry s (len bytes) of list at p. */
static void __attribute__((format(printf, 6, 7)))
tasks_err(char *err, size_t errlen, const char *list, const char *s, size_t len,
          const char *fmt, ...)
{
    char q[HVD_QUOTE_MAX + 1];
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    if (vsnprintf(what, sizeof(what), fmt, ap) < 0)
        what[0] = '\0';
    va_end(ap);
    hvd_quote(q, s, len);
    hvd_seterr(err, errlen, "Slurm tasks per node: %s in '%s' at offset %zu",
               what, q, (size_t)(s - list));
}

/*
 * Parses one tasks entry, "N" or "N(xR)", at s (len bytes, no ',') into
 * *count and *repeat.
 */
static int parse_tasks_entry(const char *list, const char *s, size_t len,
                             int *count, size_t *repeat, char *err,
                             size_t errlen)
{
    unsigned long long c;
    unsigned long long r = 1;
    size_t n;
    size_t i;

    for (i = 0; i < len; i++) {
        if (is_bad_byte(s[i])) {
            bad_byte_err(err, errlen, "Slurm tasks per node", list, s + i, s,
                         len);
            return HVD_EPARSE;
        }
    }
    n = read_num(s, len, &c);
    if (n > 0 && n < len) {
        /* Only "(xR)" may follow the count, and nothing after it. */
        if (len - n < 4 || s[n] != '(' || s[n + 1] != 'x' ||
            s[len - 1] != ')' ||
            read_num(s + n + 2, len - n - 3, &r) != len - n - 3)
            n = 0;
    }
    if (len == 0) {
        hvd_seterr(err, errlen,
                   "Slurm tasks per node: empty entry at offset %zu",
                   (size_t)(s - list));
        return HVD_EPARSE;
    }
    if (n == 0) {
        tasks_err(err, errlen, list, s, len,
                  "malformed entry, expected N or N(xR)");
        return HVD_EPARSE;
    }
    if (c < 1 || c > HVD_MAX_SLOTS) {
        tasks_err(err, errlen, list, s, len,
                  "task count must be between 1 and %d", HVD_MAX_SLOTS);
        return HVD_ERANGE;
    }
    if (r < 1) {
        tasks_err(err, errlen, list, s, len, "repeat count must be at least 1");
        return HVD_ERANGE;
    }
    *count = (int)c;
    *repeat = r > HVD_SLURM_MAX_HOSTS ? HVD_SLURM_MAX_HOSTS + 1 : (size_t)r;
    return 0;
}

/* Appends repeat copies of count to t. */
static int push_counts(struct hvd_slurm_tasks *t, size_t *cap, int count,
                       size_t repeat)
{
    int *counts;

    while (repeat-- > 0) {
        counts = reserve(t->counts, cap, t->n, sizeof(*counts));
        if (counts == NULL)
            return HVD_ENOMEM;
        t->counts = counts;
        t->counts[t->n++] = count;
    }
    return 0;
}

int hvd_slurm_tasks_parse(struct hvd_slurm_tasks *t, const char *tasks,
                          char *err, size_t errlen)
{
    const char *p = tasks;
    const char *comma;
    size_t cap = 0;
    size_t repeat;
    int count;
    int rc;

    rc = hvd_errmsg_start(err, errlen, t != NULL && tasks != NULL && t->n == 0);
    if (rc < 0)
        return rc;
    if (*p == '\0') {
        hvd_seterr(err, errlen, "Slurm tasks per node is empty");
        return HVD_EPARSE;
    }
    for (;;) {
        comma = strchrnul(p, ',');
        rc = parse_tasks_entry(tasks, p, (size_t)(comma - p), &count, &repeat,
                               err, errlen);
        if (rc == 0 && repeat > HVD_SLURM_MAX_HOSTS - t->n) {
            tasks_err(err, errlen, tasks, p, (size_t)(comma - p),
                      "the list covers more than %d nodes",
                      HVD_SLURM_MAX_HOSTS);
            rc = HVD_ERANGE;
        }
        if (rc == 0)
            rc = push_counts(t, &cap, count, repeat);
        if (rc < 0 || *comma == '\0')
            break;
        p = comma + 1;
    }
    if (rc == HVD_ENOMEM)
        hvd_seterr(err, errlen, "out of memory");
    if (rc < 0)
        hvd_slurm_tasks_close(t);
    return rc;
}

/* Drops the hosts of hl from index n on. */
static void truncate_hosts(struct hvd_hostlist *hl, size_t n)
{
    while (hl->n > n)
        free(hl->hosts[--hl->n].name);
}

/* Reports host name, which hvd_hostlist_add found listed already. */
static void dup_err(const struct hvd_hostlist *hl, size_t before,
                    const char *name, char *err, size_t errlen)
{
    char q[HVD_QUOTE_MAX + 1];
    size_t i;

    hvd_quote(q, name, strlen(name));
    for (i = 0; i < before; i++) {
        if (strcmp(hl->hosts[i].name, name) == 0) {
            hvd_seterr(
                err, errlen,
                "host '%s' of the Slurm node list is already in the host "
                "list",
                q);
            return;
        }
    }
    hvd_seterr(err, errlen, "Slurm node list names host '%s' more than once",
               q);
}

int hvd_slurm_hostlist_parsed(struct hvd_hostlist *hl,
                              const struct hvd_strvec *names,
                              const struct hvd_slurm_tasks *tasks,
                              const char *tasks_per_node, char *err,
                              size_t errlen)
{
    char q[HVD_QUOTE_MAX + 1];
    size_t before;
    size_t i;
    int rc;

    rc = hvd_errmsg_start(err, errlen,
                          hl != NULL && names != NULL &&
                              (tasks == NULL || tasks_per_node != NULL));
    if (rc < 0)
        return rc;
    before = hl->n;
    if (tasks != NULL && tasks->n != names->n) {
        hvd_quote(q, tasks_per_node, strlen(tasks_per_node));
        hvd_seterr(err, errlen,
                   "Slurm tasks per node '%s' covers %zu node%s, but the node "
                   "list names %zu",
                   q, tasks->n, tasks->n == 1 ? "" : "s", names->n);
        return HVD_EPARSE;
    }
    for (i = 0; rc == 0 && i < names->n; i++)
        rc = hvd_hostlist_add(hl, names->v[i],
                              tasks != NULL ? tasks->counts[i] : 1);
    if (rc == HVD_EDUP)
        dup_err(hl, before, names->v[i - 1], err, errlen);
    else if (rc == HVD_ENOMEM)
        hvd_seterr(err, errlen, "out of memory");
    if (rc < 0)
        truncate_hosts(hl, before);
    return rc;
}

int hvd_slurm_hostlist(struct hvd_hostlist *hl, const char *nodelist,
                       const char *tasks_per_node, char *err, size_t errlen)
{
    struct hvd_slurm_tasks t;
    struct hvd_strvec names;
    int rc;

    hvd_strvec_init(&names);
    hvd_slurm_tasks_init(&t);
    rc = hvd_errmsg_start(err, errlen, hl != NULL && nodelist != NULL);
    if (rc < 0)
        goto out;
    rc = hvd_slurm_expand(&names, nodelist, err, errlen);
    if (rc == 0 && tasks_per_node != NULL)
        rc = hvd_slurm_tasks_parse(&t, tasks_per_node, err, errlen);
    if (rc < 0)
        goto out;
    rc = hvd_slurm_hostlist_parsed(hl, &names,
                                   tasks_per_node != NULL ? &t : NULL,
                                   tasks_per_node, err, errlen);
out:
    hvd_strvec_close(&names);
    hvd_slurm_tasks_close(&t);
    return rc;
}
