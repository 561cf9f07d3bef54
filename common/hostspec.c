/* Host lists from -H specs and hostfiles. */
#include "hostspec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hvd_err.h"

/* Largest hostfile we read; anything bigger is not a list of machines. */
#define HOSTFILE_MAX ((size_t)16 << 20)
/* Longest piece of a bad hostfile line quoted back in a message. */
#define QUOTE_MAX 80

/*
 * A hash index from host name to position in the list, so that duplicate
 * checks stay O(1) per host even for hostfiles with many thousands of
 * lines. It lives only for the duration of one parse call.
 */
struct name_entry {
    size_t host;        /* index into hl->hosts plus one; 0 when free */
    unsigned long line; /* hostfile line that listed it; 0 if none */
};

struct name_index {
    struct name_entry *e;
    size_t mask; /* number of entries minus one; a power of two minus one */
    size_t used;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    if (vsnprintf(err, errlen, fmt, ap) < 0)
        err[0] = '\0';
    va_end(ap);
}

void hvd_hostlist_init(struct hvd_hostlist *hl)
{
    if (hl == NULL)
        return;
    hl->hosts = NULL;
    hl->n = 0;
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

/*
 * Appends a host whose name the list takes over on success. The struct has
 * no capacity field, so the capacity is implied by n: the array is sized to
 * the next power of two, and grows (doubling) only when n is zero or a
 * power of two. That keeps appends amortized O(1).
 */
static int append_host(struct hvd_hostlist *hl, char *name, int slots)
{
    size_t n = hl->n;
    size_t ncap;
    struct hvd_host *nh;

    if (n == 0 || (n & (n - 1)) == 0) {
        ncap = n ? n * 2 : 1;
        if (ncap < n || ncap > SIZE_MAX / sizeof(*nh))
            return HVD_ENOMEM;
        nh = realloc(hl->hosts, ncap * sizeof(*nh));
        if (nh == NULL)
            return HVD_ENOMEM;
        hl->hosts = nh;
    }
    hl->hosts[n].name = name;
    hl->hosts[n].slots = slots;
    hl->n = n + 1;
    return 0;
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
    rc = append_host(hl, copy, slots);
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
    for (i = 0; i < hl->n; i++) {
        if (hl->hosts[i].slots > 0)
            sum += hl->hosts[i].slots;
    }
    return sum;
}

/* FNV-1a: short, and good enough for host names. */
static size_t hash_name(const char *s)
{
    uint64_t h = 14695981039346656037u;

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211u;
    }
    return (size_t)h;
}

/* The entry that holds name, or the free entry where it would go. */
static struct name_entry *index_slot(const struct name_index *ix,
                                     const struct hvd_hostlist *hl,
                                     const char *name)
{
    size_t j = hash_name(name) & ix->mask;

    while (ix->e[j].host != 0 &&
           strcmp(hl->hosts[ix->e[j].host - 1].name, name) != 0)
        j = (j + 1) & ix->mask;
    return &ix->e[j];
}

/* Rehashes into count entries (a power of two larger than used). */
static int index_resize(struct name_index *ix, const struct hvd_hostlist *hl,
                        size_t count)
{
    struct name_entry *ne;
    size_t i;
    size_t j;

    ne = calloc(count, sizeof(*ne));
    if (ne == NULL)
        return HVD_ENOMEM;
    for (i = 0; ix->e != NULL && i <= ix->mask; i++) {
        if (ix->e[i].host == 0)
            continue;
        j = hash_name(hl->hosts[ix->e[i].host - 1].name) & (count - 1);
        while (ne[j].host != 0)
            j = (j + 1) & (count - 1);
        ne[j] = ix->e[i];
    }
    free(ix->e);
    ix->e = ne;
    ix->mask = count - 1;
    return 0;
}

/* Keeps the load factor at most one half after one more insertion. */
static int index_reserve(struct name_index *ix, const struct hvd_hostlist *hl)
{
    size_t count = ix->mask + 1;

    if ((ix->used + 1) <= count / 2)
        return 0;
    if (count > SIZE_MAX / 2 / sizeof(struct name_entry))
        return HVD_ENOMEM;
    return index_resize(ix, hl, count * 2);
}

static void index_close(struct name_index *ix)
{
    free(ix->e);
    ix->e = NULL;
}

/* Indexes the hosts already in the list; they count for duplicates too. */
static int index_init(struct name_index *ix, const struct hvd_hostlist *hl)
{
    struct name_entry *slot;
    size_t count = 16;
    size_t i;
    int rc;

    ix->e = NULL;
    ix->mask = 0;
    ix->used = 0;
    while (count / 2 < hl->n + 1) {
        if (count > SIZE_MAX / 2 / sizeof(struct name_entry))
            return HVD_ENOMEM;
        count *= 2;
    }
    rc = index_resize(ix, hl, count);
    if (rc < 0)
        return rc;
    for (i = 0; i < hl->n; i++) {
        slot = index_slot(ix, hl, hl->hosts[i].name);
        if (slot->host != 0)
            continue;
        slot->host = i + 1;
        slot->line = 0;
        ix->used++;
    }
    return 0;
}

/*
 * Appends a host unless its name is already listed. Takes over name on
 * success; on HVD_EDUP *dup is the entry of the earlier host.
 */
static int index_add(struct name_index *ix, struct hvd_hostlist *hl, char *name,
                     int slots, unsigned long line,
                     const struct name_entry **dup)
{
    struct name_entry *slot;
    int rc;

    rc = index_reserve(ix, hl);
    if (rc < 0)
        return rc;
    slot = index_slot(ix, hl, name);
    if (slot->host != 0) {
        *dup = slot;
        return HVD_EDUP;
    }
    rc = append_host(hl, name, slots);
    if (rc < 0)
        return rc;
    slot->host = hl->n;
    slot->line = line;
    ix->used++;
    return 0;
}

/*
 * True for bytes a host name may hold. Whitespace and control bytes would
 * break the ssh command line; brackets, commas and '=' belong to the spec
 * syntax and are always a typo inside a name.
 */
static int name_byte_ok(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '[' && c != ']' && c != ',' &&
           c != '=';
}

static int bytes_ok(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (!name_byte_ok((unsigned char)s[i]))
            return 0;
    }
    return 1;
}

/* A "user@" part needs a user before the '@' and a host after the last. */
static int user_host_ok(const char *s, size_t len)
{
    return len > 0 && bytes_ok(s, len) && s[0] != '@' && s[len - 1] != '@';
}

/*
 * Checks one host name as written ("host", "user@host", "[addr]" or
 * "user@[addr]") and returns a malloc'd copy without the brackets in *out.
 * HVD_EPARSE if it is not a plausible name.
 */
static int make_name(const char *s, size_t len, char **out)
{
    const char *lb = memchr(s, '[', len);
    const char *end = s + len;
    size_t ulen = 0;
    size_t hlen = len;
    const char *host = s;
    char *name;

    *out = NULL;
    if (lb != NULL) {
        /* Bracketed: an optional "user@" prefix, then "[addr]" to the end. */
        ulen = (size_t)(lb - s);
        if (ulen > 0 && (ulen < 2 || s[0] == '@' || s[ulen - 1] != '@' ||
                         !bytes_ok(s, ulen)))
            return HVD_EPARSE;
        if (end - lb < 3 || end[-1] != ']')
            return HVD_EPARSE;
        host = lb + 1;
        hlen = (size_t)(end - 1 - host);
        if (!bytes_ok(host, hlen))
            return HVD_EPARSE;
    } else if (!user_host_ok(s, len)) {
        return HVD_EPARSE;
    }

    name = malloc(ulen + hlen + 1);
    if (name == NULL)
        return HVD_ENOMEM;
    memcpy(name, s, ulen);
    memcpy(name + ulen, host, hlen);
    name[ulen + hlen] = '\0';
    *out = name;
    return 0;
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

/*
 * Splits one -H token into its name (as written) and slot text. Returns
 * HVD_EPARSE if the shape is wrong; names are checked by make_name.
 */
static int split_token(const char *t, size_t len, size_t *namelen,
                       const char **slots, size_t *slotslen)
{
    const char *lb = memchr(t, '[', len);
    const char *rb;
    const char *colon = NULL;
    size_t i;

    if (lb != NULL) {
        /* "[addr]" or "[addr]:slots", maybe with "user@" in front. */
        rb = memchr(lb, ']', len - (size_t)(lb - t));
        if (rb == NULL)
            return HVD_EPARSE;
        *namelen = (size_t)(rb - t) + 1;
        if (*namelen < len && t[*namelen] != ':')
            return HVD_EPARSE;
        if (*namelen < len)
            colon = t + *namelen;
    } else {
        /* Several colons: an IPv6 address with slots, split at the last. */
        for (i = len; i > 0; i--) {
            if (t[i - 1] == ':') {
                colon = t + i - 1;
                break;
            }
        }
        *namelen = colon ? (size_t)(colon - t) : len;
        /* "fe80::1" would become host "fe80:" with 1 slot: refuse it. */
        if (*namelen > 0 && t[*namelen - 1] == ':')
            return HVD_EPARSE;
    }
    if (colon == NULL) {
        *slots = NULL;
        *slotslen = 0;
    } else {
        *slots = colon + 1;
        *slotslen = len - (size_t)(colon + 1 - t);
    }
    return 0;
}

static void err_malformed_token(char *err, size_t errlen, const char *t,
                                size_t len)
{
    seterr(err, errlen,
           "malformed -H entry '%.*s': expected host:slots with slots a "
           "positive integer",
           (int)len, t);
}

/* Parses and appends one -H token. */
static int parse_token(struct hvd_hostlist *hl, struct name_index *ix,
                       const char *t, size_t len, char *err, size_t errlen)
{
    const struct name_entry *dup = NULL;
    const char *stext;
    size_t namelen;
    size_t slen;
    char *name = NULL;
    int slots = 1;
    int rc;

    if (len > INT_MAX) {
        rc = HVD_EPARSE;
        seterr(err, errlen, "-H entry is too long");
        goto out;
    }
    rc = split_token(t, len, &namelen, &stext, &slen);
    if (rc < 0) {
        err_malformed_token(err, errlen, t, len);
        goto out;
    }
    rc = make_name(t, namelen, &name);
    if (rc == HVD_EPARSE)
        err_malformed_token(err, errlen, t, len);
    if (rc < 0)
        goto out;
    if (stext != NULL) {
        rc = parse_slots(stext, slen, &slots);
        /* Zero slots reads as a typo; only a huge count gets its own text. */
        if (rc == HVD_ERANGE && slots > 0)
            seterr(err, errlen,
                   "-H entry '%.*s': %.*s slots is more than the maximum "
                   "of %d",
                   (int)len, t, (int)slen, stext, HVD_MAX_SLOTS);
        else if (rc < 0)
            err_malformed_token(err, errlen, t, len);
        if (rc < 0)
            goto out;
    }
    rc = index_add(ix, hl, name, slots, 0, &dup);
    if (rc == HVD_EDUP)
        seterr(err, errlen,
               "host '%s' appears more than once in -H; list each host once "
               "with all its slots",
               name);
    if (rc == 0)
        name = NULL;
out:
    if (rc == HVD_ENOMEM)
        seterr(err, errlen, "out of memory");
    free(name);
    return rc;
}

int hvd_hostlist_parse_spec(struct hvd_hostlist *hl, const char *spec,
                            char *err, size_t errlen)
{
    struct name_index ix = {0};
    const char *p;
    const char *comma;
    size_t len;
    int rc;

    seterr(err, errlen, "%s", "");
    if (hl == NULL || spec == NULL) {
        seterr(err, errlen, "invalid argument");
        return HVD_EINVAL;
    }
    if (spec[0] == '\0') {
        seterr(err, errlen, "-H lists no hosts");
        return HVD_EPARSE;
    }
    rc = index_init(&ix, hl);
    if (rc < 0) {
        seterr(err, errlen, "out of memory");
        goto out;
    }
    p = spec;
    for (;;) {
        comma = strchr(p, ',');
        len = comma ? (size_t)(comma - p) : strlen(p);
        rc = parse_token(hl, &ix, p, len, err, errlen);
        if (rc < 0 || comma == NULL)
            break;
        p = comma + 1;
    }
out:
    index_close(&ix);
    return rc;
}

/*
 * Copies at most QUOTE_MAX bytes of s into dst (QUOTE_MAX + 1 bytes) for
 * quoting in a message. Control bytes become '?', so a NUL or escape
 * sequence in a bad file cannot cut or garble the message, and the cut
 * never falls inside a UTF-8 sequence.
 */
static void quote(char *dst, const char *s, size_t len)
{
    size_t i;

    if (len > QUOTE_MAX) {
        len = QUOTE_MAX;
        while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[len] = '\0';
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The parts of one hostfile line, for messages and the parser. */
struct hf_line {
    const char *fname;
    unsigned long no;
    const char *text; /* trimmed, without the comment */
    size_t len;
};

static int err_line(const struct hf_line *ln, char *err, size_t errlen)
{
    char q[QUOTE_MAX + 1];

    quote(q, ln->text, ln->len);
    seterr(err, errlen, "%s:%lu: expected 'host slots=N', got '%s'", ln->fname,
           ln->no, q);
    return HVD_EPARSE;
}

/* Parses one hostfile line (without its '\n') and appends its host. */
static int parse_line(struct hvd_hostlist *hl, struct name_index *ix,
                      struct hf_line *ln, const char *raw, size_t rawlen,
                      char *err, size_t errlen)
{
    const struct name_entry *dup = NULL;
    const char *tok[3];
    size_t toklen[3];
    size_t ntok = 0;
    const char *p;
    const char *end;
    const char *hash;
    char q[QUOTE_MAX + 1];
    char *name = NULL;
    int has_nul;
    int slots = 1;
    int rc = 0;

    if (rawlen > 0 && raw[rawlen - 1] == '\r')
        rawlen--;
    has_nul = memchr(raw, '\0', rawlen) != NULL;
    hash = memchr(raw, '#', rawlen);
    end = hash ? hash : raw + rawlen;
    p = raw;
    while (p < end && is_blank(*p))
        p++;
    while (end > p && is_blank(end[-1]))
        end--;
    ln->text = p;
    ln->len = (size_t)(end - p);
    if (has_nul)
        return err_line(ln, err, errlen);
    if (p == end)
        return 0;

    while (p < end && ntok < 3) {
        tok[ntok] = p;
        while (p < end && !is_blank(*p))
            p++;
        toklen[ntok] = (size_t)(p - tok[ntok]);
        ntok++;
        while (p < end && is_blank(*p))
            p++;
    }
    if (ntok > 2 ||
        (ntok == 2 && (toklen[1] < 6 || memcmp(tok[1], "slots=", 6) != 0)))
        return err_line(ln, err, errlen);
    /* One colon is host:slots written the -H way; IPv6 has at least two. */
    p = memchr(tok[0], ':', toklen[0]);
    if (p != NULL && memchr(tok[0], '[', toklen[0]) == NULL &&
        memchr(p + 1, ':', toklen[0] - (size_t)(p + 1 - tok[0])) == NULL)
        return err_line(ln, err, errlen);
    rc = make_name(tok[0], toklen[0], &name);
    if (rc == HVD_EPARSE)
        err_line(ln, err, errlen);
    if (rc < 0)
        goto out;
    if (ntok == 2) {
        rc = parse_slots(tok[1] + 6, toklen[1] - 6, &slots);
        if (rc < 0) {
            quote(q, tok[1] + 6, toklen[1] - 6);
            seterr(err, errlen,
                   "%s:%lu: slots must be a positive integer up to %d, "
                   "got '%s'",
                   ln->fname, ln->no, HVD_MAX_SLOTS, q);
            goto out;
        }
    }
    rc = index_add(ix, hl, name, slots, ln->no, &dup);
    if (rc == HVD_EDUP && dup->line != 0)
        seterr(err, errlen,
               "%s:%lu: host '%s' is listed again (first on line %lu)",
               ln->fname, ln->no, name, dup->line);
    else if (rc == HVD_EDUP)
        seterr(err, errlen, "%s:%lu: host '%s' is already in the host list",
               ln->fname, ln->no, name);
    if (rc == 0)
        name = NULL;
out:
    free(name);
    return rc;
}

int hvd_hostlist_parse_text(struct hvd_hostlist *hl, const char *text,
                            size_t len, const char *fname, char *err,
                            size_t errlen)
{
    struct name_index ix = {0};
    struct hf_line ln;
    const char *p = text;
    const char *end;
    const char *nl;
    size_t before;
    int rc;

    seterr(err, errlen, "%s", "");
    if (hl == NULL || (text == NULL && len > 0)) {
        seterr(err, errlen, "invalid argument");
        return HVD_EINVAL;
    }
    if (fname == NULL)
        fname = "hostfile";
    before = hl->n;
    rc = index_init(&ix, hl);
    if (rc < 0)
        goto out;

    ln.fname = fname;
    ln.no = 0;
    end = text + len;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        ln.no++;
        rc = parse_line(hl, &ix, &ln, p, (size_t)((nl ? nl : end) - p), err,
                        errlen);
        if (rc < 0)
            goto out;
        p = nl ? nl + 1 : end;
    }
    if (hl->n == before) {
        seterr(err, errlen, "%s: the hostfile lists no hosts", fname);
        rc = HVD_EPARSE;
    }
out:
    if (rc == HVD_ENOMEM)
        seterr(err, errlen, "out of memory");
    index_close(&ix);
    return rc;
}

static int err_io(char *err, size_t errlen, const char *path, int e)
{
    seterr(err, errlen, "cannot read hostfile '%s': %s", path, strerror(e));
    return HVD_EIO;
}

static int err_too_big(char *err, size_t errlen, const char *path)
{
    seterr(err, errlen, "%s: hostfile larger than 16 MiB", path);
    return HVD_ERANGE;
}

/*
 * Reads a whole file of at most HOSTFILE_MAX bytes into *out (*outlen
 * bytes). Pipes and /proc files report no size, so it reads until EOF and
 * stops one byte past the limit.
 */
static int read_all(int fd, const struct stat *st, const char *path, char **out,
                    size_t *outlen, char *err, size_t errlen)
{
    char *buf = NULL;
    char *nbuf;
    size_t len = 0;
    size_t cap = 4096;
    ssize_t got;
    int rc = 0;

    if (S_ISREG(st->st_mode) && (uintmax_t)st->st_size > HOSTFILE_MAX) {
        rc = err_too_big(err, errlen, path);
        goto out;
    }
    if (S_ISREG(st->st_mode) && st->st_size > 0)
        cap = (size_t)st->st_size + 1;
    buf = malloc(cap);
    if (buf == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    for (;;) {
        if (len == cap) {
            if (cap > HOSTFILE_MAX)
                break;
            cap = cap * 2 > HOSTFILE_MAX + 1 ? HOSTFILE_MAX + 1 : cap * 2;
            nbuf = realloc(buf, cap);
            if (nbuf == NULL) {
                rc = HVD_ENOMEM;
                goto out;
            }
            buf = nbuf;
        }
        got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = err_io(err, errlen, path, errno);
            goto out;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    if (len > HOSTFILE_MAX) {
        rc = err_too_big(err, errlen, path);
        goto out;
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
out:
    if (rc == HVD_ENOMEM)
        seterr(err, errlen, "out of memory");
    free(buf);
    return rc;
}

int hvd_hostlist_parse_file(struct hvd_hostlist *hl, const char *path,
                            char *err, size_t errlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    int fd = -1;
    int rc;

    seterr(err, errlen, "%s", "");
    if (hl == NULL || path == NULL) {
        seterr(err, errlen, "invalid argument");
        return HVD_EINVAL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = err_io(err, errlen, path, errno);
        goto out;
    }
    /* Linux opens directories for reading; say what read() would say. */
    if (S_ISDIR(st.st_mode)) {
        rc = err_io(err, errlen, path, EISDIR);
        goto out;
    }
    rc = read_all(fd, &st, path, &buf, &len, err, errlen);
    if (rc < 0)
        goto out;
    rc = hvd_hostlist_parse_text(hl, buf, len, path, err, errlen);
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}
