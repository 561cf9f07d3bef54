/* Host lists from -H specs and hostfiles. */
#include "launcher/lib/hostspec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/lib/errmsg.h"
#include "launcher/lib/errcode.h"

/* Largest hostfile we read; anything bigger is not a list of machines. */
#define HOSTFILE_MAX ((size_t)16 << 20)

/* One host of the list, as the duplicate check sees it. */
struct seen {
    const char *name;   /* owned by the host list */
    size_t pos;         /* index in the host list */
    unsigned long line; /* hostfile line; 0 for -H and for earlier hosts */
};

/*
 * The state of one parse call. Duplicates are not looked up host by host:
 * seen holds one entry per listed host, and is sorted by name once the
 * parse is over, which finds every repeated name in O(n log n).
 */
struct parser {
    struct hvd_hostlist *hl;
    size_t before; /* hosts in the list when the parse started */
    struct seen *seen;
    size_t nseen;
    const char *fname; /* hostfile name for messages; NULL for -H */
    char *err;
    size_t errlen;
};

/*
 * Returns arr (n elements of size bytes) with room for one more, or NULL.
 * The arrays keep no capacity field, so it is implied by n: they double when
 * n is zero or a power of two, which keeps appends amortized O(1).
 */
static void *grow(void *arr, size_t n, size_t size)
{
    if (n != 0 && (n & (n - 1)) != 0)
        return arr;
    if (n > SIZE_MAX / 2 / size)
        return NULL;
    return realloc(arr, (n ? n * 2 : 1) * size);
}

/* Appends a host; the list takes over name on success. */
static int append(struct hvd_hostlist *hl, char *name, int slots)
{
    struct hvd_host *h = grow(hl->hosts, hl->n, sizeof(*h));

    if (h == NULL)
        return HVD_ENOMEM;
    hl->hosts = h;
    h[hl->n].name = name;
    h[hl->n].slots = slots;
    hl->n++;
    return 0;
}

void hvd_hostlist_init(struct hvd_hostlist *hl)
{
    if (hl == NULL)
        return;
    hl->hosts = NULL;
    hl->n = 0;
    hl->max_slots_line = 0;
}

void hvd_hostlist_close(struct hvd_hostlist *hl)
{
    size_t i;

    if (hl == NULL)
        return;
    for (i = 0; i < hl->n; i++)
        free(hl->hosts[i].name);
    free(hl->hosts);
    hvd_hostlist_init(hl);
}

int hvd_hostlist_add(struct hvd_hostlist *hl, const char *name, int slots)
{
    char *copy;
    size_t i;
    int rc;

    if (hl == NULL || name == NULL || name[0] == '\0')
        return HVD_EINVAL;
    if (slots < 1 || slots > HVD_MAX_SLOTS)
        return HVD_ERANGE;
    for (i = 0; i < hl->n; i++) {
        if (strcmp(hl->hosts[i].name, name) == 0)
            return HVD_EDUP;
    }
    copy = strdup(name);
    if (copy == NULL)
        return HVD_ENOMEM;
    rc = append(hl, copy, slots);
    if (rc < 0)
        free(copy);
    return rc;
}

long hvd_hostlist_slots(const struct hvd_hostlist *hl)
{
    long sum = 0;
    size_t i;

    if (hl == NULL)
        return 0;
    for (i = 0; i < hl->n; i++)
        sum += hl->hosts[i].slots > 0 ? hl->hosts[i].slots : 0;
    return sum;
}

/* Records a listed host for the duplicate check. */
static int note(struct parser *ps, const char *name, size_t pos,
                unsigned long line)
{
    struct seen *s = grow(ps->seen, ps->nseen, sizeof(*s));

    if (s == NULL)
        return HVD_ENOMEM;
    ps->seen = s;
    s[ps->nseen++] = (struct seen){name, pos, line};
    return 0;
}

/* Starts a parse. The hosts already listed count for duplicates too. */
static int parser_init(struct parser *ps, struct hvd_hostlist *hl,
                       const char *fname, char *err, size_t errlen)
{
    size_t i;
    int rc = 0;

    *ps = (struct parser){.hl = hl,
                          .before = hl->n,
                          .fname = fname,
                          .err = err,
                          .errlen = errlen};
    for (i = 0; rc == 0 && i < hl->n; i++)
        rc = note(ps, hl->hosts[i].name, i, 0);
    return rc;
}

/* Appends a parsed host, taking over name on success. */
static int add_host(struct parser *ps, char *name, int slots,
                    unsigned long line)
{
    int rc = note(ps, name, ps->hl->n, line);

    if (rc < 0)
        return rc;
    rc = append(ps->hl, name, slots);
    /* The caller frees name, so seen must not keep pointing at it. */
    if (rc < 0)
        ps->nseen--;
    return rc;
}

static int cmp_seen(const void *a, const void *b)
{
    const struct seen *x = a;
    const struct seen *y = b;
    int c = strcmp(x->name, y->name);

    return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * Ends a parse that stopped with rc. In -H, and for a host listed before
 * the parse, a repeated host is an error at its second listing; in a
 * hostfile a repeat adds its slots to the first listing, as Open MPI does
 * and as PBS_NODEFILE needs (one line per slot), unless the sum passes
 * HVD_MAX_SLOTS. Any other error stopped the parse after every listed
 * host, so the error whose listing comes first wins over rc, and the list
 * is cut back to the hosts before it, just as if the parse had stopped
 * there; only the repeats before that cut are then merged.
 */
static int parser_finish(struct parser *ps, int rc)
{
    struct hvd_hostlist *hl = ps->hl;
    struct seen *s = ps->seen;
    const struct seen *first = NULL;
    const struct seen *bad = NULL; /* the earliest error listing */
    int over = 0;                  /* bad passes the slot maximum */
    size_t cut = hl->n;
    size_t run = 0;
    size_t i;
    size_t j;
    long sum = 0;

    if (ps->nseen > 1)
        qsort(ps->seen, ps->nseen, sizeof(*s), cmp_seen);
    for (i = 0; i < ps->nseen; i++) {
        if (i == 0 || strcmp(s[i].name, s[run].name) != 0) {
            run = i;
            sum = hl->hosts[s[i].pos].slots;
            continue;
        }
        if (s[i].pos < ps->before || (bad != NULL && s[i].pos >= bad->pos))
            continue;
        sum += hl->hosts[s[i].pos].slots;
        if (ps->fname == NULL || s[run].pos < ps->before ||
            (sum > HVD_MAX_SLOTS &&
             sum - hl->hosts[s[i].pos].slots <= HVD_MAX_SLOTS)) {
            bad = &s[i];
            first = &s[run];
            over = ps->fname != NULL && s[run].pos >= ps->before;
        }
    }
    if (bad != NULL) {
        cut = bad->pos;
        if (ps->fname == NULL)
            hvd_seterr(ps->err, ps->errlen,
                       "host '%s' appears more than once in -H; list each host "
                       "once with all its slots",
                       bad->name);
        else if (over)
            hvd_seterr(ps->err, ps->errlen,
                       "%s:%lu: host '%s' adds up to more than %d slots "
                       "(first on line %lu)",
                       ps->fname, bad->line, bad->name, HVD_MAX_SLOTS,
                       first->line);
        else
            hvd_seterr(ps->err, ps->errlen,
                       "%s:%lu: host '%s' is already in the host list",
                       ps->fname, bad->line, bad->name);
        rc = over ? HVD_ERANGE : HVD_EDUP;
    }
    /* Merge the repeats before the cut into their first listing; a merged
     * listing is marked by 0 slots, then dropped. */
    for (i = 1, run = 0; ps->fname != NULL && i < ps->nseen; i++) {
        if (strcmp(s[i].name, s[run].name) != 0) {
            run = i;
        } else if (s[i].pos < cut) {
            hl->hosts[s[run].pos].slots += hl->hosts[s[i].pos].slots;
            hl->hosts[s[i].pos].slots = 0;
        }
    }
    while (hl->n > cut)
        free(hl->hosts[--hl->n].name);
    for (i = j = ps->before; i < hl->n; i++) {
        if (hl->hosts[i].slots == 0)
            free(hl->hosts[i].name);
        else
            hl->hosts[j++] = hl->hosts[i];
    }
    hl->n = j;
    if (rc == HVD_ENOMEM)
        hvd_seterr(ps->err, ps->errlen, "out of memory");
    free(ps->seen);
    return rc;
}

/*
 * True for bytes a host name may hold. Whitespace and control bytes would
 * break the ssh command line; brackets, commas and '=' belong to the spec
 * syntax and are always a typo inside a name.
 */
static int bytes_ok(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c == 0x7f || c == '[' || c == ']' || c == ',' ||
            c == '=')
            return 0;
    }
    return 1;
}

/*
 * Checks one host name as written ("host", "user@host", "[addr]" or
 * "user@[addr]") and returns a malloc'd copy without the brackets in *out.
 * HVD_EPARSE if it is not a plausible name.
 */
static int make_name(const char *s, size_t len, char **out)
{
    const char *lb = memchr(s, '[', len);
    size_t ulen = 0; /* the "user@" in front of a bracket */
    const char *host = s;
    size_t hlen = len;
    char *name;

    *out = NULL;
    if (lb != NULL) {
        ulen = (size_t)(lb - s);
        if ((ulen > 0 && (s[0] == '@' || s[ulen - 1] != '@')) ||
            len - ulen < 3 || s[len - 1] != ']')
            return HVD_EPARSE;
        host = lb + 1;
        hlen = len - ulen - 2;
    } else if (len == 0 || s[0] == '@' || s[len - 1] == '@') {
        /* Both a user and a host are needed around the '@'. */
        return HVD_EPARSE;
    }
    if (!bytes_ok(s, ulen) || !bytes_ok(host, hlen))
        return HVD_EPARSE;
    name = malloc(ulen + hlen + 1);
    if (name == NULL)
        return HVD_ENOMEM;
    memcpy(name, s, ulen);
    memcpy(name + ulen, host, hlen);
    name[ulen + hlen] = '\0';
    *out = name;
    return 0;
}

int hvd_hostlist_merge(struct hvd_hostlist *hl, const char *name, size_t len,
                       int slots)
{
    char *copy;
    size_t i;
    int rc;

    if (hl == NULL || name == NULL)
        return HVD_EINVAL;
    if (slots < 1 || slots > HVD_MAX_SLOTS)
        return HVD_ERANGE;
    rc = make_name(name, len, &copy);
    if (rc < 0)
        return rc;
    for (i = 0; i < hl->n && strcmp(hl->hosts[i].name, copy) != 0; i++)
        ;
    if (i < hl->n) {
        free(copy);
        if (hl->hosts[i].slots > HVD_MAX_SLOTS - slots)
            return HVD_ERANGE;
        hl->hosts[i].slots += slots;
        return 0;
    }
    rc = append(hl, copy, slots);
    if (rc < 0)
        free(copy);
    return rc;
}

/*
 * Parses a slot count: decimal digits only. HVD_EPARSE if empty or not a
 * number, HVD_ERANGE if 0 or above HVD_MAX_SLOTS. *slots gets the value,
 * saturated just above the maximum, whenever the text is a number.
 */
static int parse_slots(const char *s, size_t len, int *slots)
{
    long v = 0;
    size_t i;

    if (len == 0)
        return HVD_EPARSE;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return HVD_EPARSE;
        /* Saturate: the exact size of an absurd number does not matter. */
        if (v <= HVD_MAX_SLOTS)
            v = v * 10 + (s[i] - '0');
    }
    if (v > HVD_MAX_SLOTS)
        v = HVD_MAX_SLOTS + 1L;
    *slots = (int)v;
    return v < 1 || v > HVD_MAX_SLOTS ? HVD_ERANGE : 0;
}

/* Parses and appends one -H token, "name[:slots]". */
static int parse_token(struct parser *ps, const char *t, size_t len)
{
    const char *lb = memchr(t, '[', len);
    const char *rb = lb ? memchr(lb, ']', len - (size_t)(lb - t)) : NULL;
    const char *colon; /* in front of the slot count, if there is one */
    size_t namelen;
    char *name = NULL;
    int slots = 1;
    int rc = HVD_EPARSE;

    if (len > INT_MAX) {
        hvd_seterr(ps->err, ps->errlen, "-H entry is too long");
        return HVD_EPARSE;
    }
    if (lb != NULL) {
        /* The bracket ends the name, and only ":slots" may follow it. */
        namelen = rb ? (size_t)(rb + 1 - t) : len;
        colon = namelen < len ? t + namelen : NULL;
        if (rb != NULL && (colon == NULL || *colon == ':'))
            rc = make_name(t, namelen, &name);
    } else {
        /* Unbracketed IPv6 has colons too: the slots follow the last one. */
        colon = memrchr(t, ':', len);
        namelen = colon ? (size_t)(colon - t) : len;
        /* "fe80::1" would become host "fe80:" with 1 slot: refuse it. */
        if (namelen == 0 || t[namelen - 1] != ':')
            rc = make_name(t, namelen, &name);
    }
    if (rc == 0 && colon != NULL)
        rc = parse_slots(colon + 1, len - namelen - 1, &slots);
    if (rc == 0)
        rc = add_host(ps, name, slots, 0);
    if (rc == 0)
        name = NULL;
    /* Zero slots reads as a typo; only a huge count gets its own text. */
    if (rc == HVD_ERANGE && slots > 0)
        hvd_seterr(ps->err, ps->errlen,
                   "-H entry '%.*s': %.*s slots is more than the maximum of %d",
                   (int)len, t, (int)(len - namelen - 1), colon + 1,
                   HVD_MAX_SLOTS);
    else if (rc == HVD_EPARSE || rc == HVD_ERANGE)
        hvd_seterr(
            ps->err, ps->errlen,
            "malformed -H entry '%.*s': expected host:slots with slots a "
            "positive integer",
            (int)len, t);
    free(name);
    return rc;
}

int hvd_hostlist_parse_spec(struct hvd_hostlist *hl, const char *spec,
                            char *err, size_t errlen)
{
    struct parser ps;
    const char *comma;
    int rc;

    rc = hvd_errmsg_start(err, errlen, hl != NULL && spec != NULL);
    if (rc < 0)
        return rc;
    if (spec[0] == '\0') {
        hvd_seterr(err, errlen, "-H lists no hosts");
        return HVD_EPARSE;
    }
    rc = parser_init(&ps, hl, NULL, err, errlen);
    while (rc == 0) {
        comma = strchrnul(spec, ',');
        rc = parse_token(&ps, spec, (size_t)(comma - spec));
        if (*comma == '\0')
            break;
        spec = comma + 1;
    }
    return parser_finish(&ps, rc);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Skips blanks (blank is 1) or everything else (blank is 0) from p on. */
static const char *skip(const char *p, const char *end, int blank)
{
    while (p < end && is_blank(*p) == blank)
        p++;
    return p;
}

/*
 * If [*p, end) starts with the option key ("slots=" or "max_slots="),
 * parses its value up to the next blank, moves *p past it and returns 1
 * (0 if another word is there); a bad value is an error in *rc, with a
 * message.
 */
static int option(struct parser *ps, unsigned long no, const char **p,
                  const char *end, const char *key, int *val, int *rc)
{
    size_t klen = strlen(key);
    const char *v = *p + klen;
    const char *v_end;
    char q[HVD_QUOTE_MAX + 1];

    if ((size_t)(end - *p) < klen || memcmp(*p, key, klen) != 0)
        return 0;
    v_end = skip(v, end, 0);
    *rc = parse_slots(v, (size_t)(v_end - v), val);
    if (*rc < 0) {
        hvd_quote(q, v, (size_t)(v_end - v));
        hvd_seterr(ps->err, ps->errlen,
                   "%s:%lu: %.*s must be a positive integer up to %d, got "
                   "'%s'",
                   ps->fname, no, (int)klen - 1, key, HVD_MAX_SLOTS, q);
    }
    *p = skip(v_end, end, 1);
    return 1;
}

/*
 * Parses hostfile line no, "host", "host:N" or "host slots=N [max_slots=M]"
 * (the forms Open MPI, MPICH and PBS write), and appends its host.
 */
static int parse_line(struct parser *ps, unsigned long no, const char *s,
                      size_t len)
{
    const char *end = s + len;
    const char *hash;
    const char *word_end;
    const char *name_end;
    const char *opt;
    char q[HVD_QUOTE_MAX + 1];
    char *name = NULL;
    int slots = 1;
    int max_slots = 0;
    int n_slots = 0; /* how many ways the line gave its slots */
    int n_max = 0;
    int rc = 0;

    /* Lines end in "\n" or "\r\n"; the last one may end in neither. */
    if (end > s && end[-1] == '\n')
        end--;
    if (end > s && end[-1] == '\r')
        end--;
    /* Even inside a comment, a NUL means this is no text file. */
    if (memchr(s, '\0', (size_t)(end - s)) != NULL)
        rc = HVD_EPARSE;
    hash = memchr(s, '#', (size_t)(end - s));
    end = hash ? hash : end;
    s = skip(s, end, 1);
    while (end > s && is_blank(end[-1]))
        end--;
    if (s == end && rc == 0)
        return 0;

    word_end = skip(s, end, 0);
    /* "name:N": the bracket ends an IPv6 name; unbracketed, one colon is
     * host:N, while IPv6 has at least two and no slot count. */
    name_end = memchr(s, '[', (size_t)(word_end - s));
    if (name_end != NULL)
        name_end = memchr(name_end, ']', (size_t)(word_end - name_end));
    if (name_end != NULL)
        name_end++;
    else if ((name_end = memchr(s, ':', (size_t)(word_end - s))) == NULL ||
             memchr(name_end + 1, ':', (size_t)(word_end - name_end - 1)))
        name_end = word_end;
    if (name_end < word_end) {
        n_slots++;
        if (*name_end != ':' ||
            parse_slots(name_end + 1, (size_t)(word_end - name_end - 1),
                        &slots) == HVD_EPARSE)
            rc = HVD_EPARSE;
    }
    opt = skip(word_end, end, 1);
    while (rc == 0 && opt < end) {
        if (option(ps, no, &opt, end, "slots=", &slots, &rc))
            n_slots++;
        else if (option(ps, no, &opt, end, "max_slots=", &max_slots, &rc))
            n_max++;
        else
            rc = HVD_EPARSE;
    }
    if (rc == 0 && (n_slots > 1 || n_max > 1))
        rc = HVD_EPARSE;
    if (rc == 0 && (slots < 1 || slots > HVD_MAX_SLOTS)) {
        hvd_quote(q, name_end + 1, (size_t)(word_end - name_end - 1));
        hvd_seterr(ps->err, ps->errlen,
                   "%s:%lu: slots must be a positive integer up to %d, got "
                   "'%s'",
                   ps->fname, no, HVD_MAX_SLOTS, q);
        rc = HVD_ERANGE;
    }
    if (rc == 0)
        rc = make_name(s, (size_t)(name_end - s), &name);
    if (rc == HVD_EPARSE && ps->err != NULL && ps->errlen > 0 &&
        ps->err[0] == '\0') {
        hvd_quote(q, s, (size_t)(end - s));
        hvd_seterr(ps->err, ps->errlen,
                   "%s:%lu: expected 'host', 'host:N' or 'host slots=N', got "
                   "'%s'",
                   ps->fname, no, q);
    }
    if (rc == 0 && n_max > 0 && ps->hl->max_slots_line == 0)
        ps->hl->max_slots_line = no;
    if (rc == 0)
        rc = add_host(ps, name, slots, no);
    if (rc == 0)
        name = NULL;
    free(name);
    return rc;
}

int hvd_hostlist_parse_text(struct hvd_hostlist *hl, const char *text,
                            size_t len, const char *fname, char *err,
                            size_t errlen)
{
    struct parser ps;
    const char *nl;
    unsigned long no = 0;
    size_t n;
    int rc;

    rc =
        hvd_errmsg_start(err, errlen, hl != NULL && (text != NULL || len == 0));
    if (rc < 0)
        return rc;
    if (fname == NULL)
        fname = "hostfile";
    rc = parser_init(&ps, hl, fname, err, errlen);
    while (rc == 0 && len > 0) {
        nl = memchr(text, '\n', len);
        n = nl ? (size_t)(nl - text) + 1 : len;
        rc = parse_line(&ps, ++no, text, n);
        text += n;
        len -= n;
    }
    if (rc == 0 && hl->n == ps.before) {
        hvd_seterr(err, errlen, "%s: the hostfile lists no hosts", fname);
        rc = HVD_EPARSE;
    }
    return parser_finish(&ps, rc);
}

/*
 * Reads into one buffer a byte larger than the limit, so that pipes, which
 * report no size, need no other path: reading stops once it is full. Pages
 * never written are never backed, so a small file costs only its size. A
 * directory fails in read() with EISDIR, which gives the right message.
 */
int hvd_hostlist_parse_file(struct hvd_hostlist *hl, const char *path,
                            char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    ssize_t got = 1;
    int fd;
    int rc;

    rc = hvd_errmsg_start(err, errlen, hl != NULL && path != NULL);
    if (rc < 0)
        return rc;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    buf = fd < 0 ? NULL : malloc(HOSTFILE_MAX + 1);
    while (buf != NULL && got != 0 && len <= HOSTFILE_MAX) {
        got = read(fd, buf + len, HOSTFILE_MAX + 1 - len);
        if (got < 0 && errno != EINTR)
            break;
        len += got > 0 ? (size_t)got : 0;
    }
    if (fd < 0 || got < 0) {
        hvd_seterr(err, errlen, "cannot read hostfile '%s': %s", path,
                   strerror(errno));
        rc = HVD_EIO;
    } else if (buf == NULL) {
        hvd_seterr(err, errlen, "out of memory");
        rc = HVD_ENOMEM;
    } else if (len > HOSTFILE_MAX) {
        hvd_seterr(err, errlen, "%s: hostfile larger than 16 MiB", path);
        rc = HVD_ERANGE;
    } else {
        rc = hvd_hostlist_parse_text(hl, buf, len, path, err, errlen);
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}
