/* Fuzz target: -H host specs and hostfile contents (lib/hostspec.h). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/errcode.h"

/*
 * Input layout: byte 0 picks what is parsed (low two bits: a -H spec, a
 * hostfile, or both into one list, in either order, split at the first NUL
 * byte), byte 1 the size of the message buffer (0: a roomy one), and the
 * rest is the text. A spec is a C string, so it ends at its first NUL.
 */
#define ROOMY 512

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every host of a list is one the parsers could have accepted, once. */
static void check_list(const struct hvd_hostlist *hl)
{
    char **names = malloc((hl->n + 1) * sizeof(*names));
    long sum = 0;

    FUZZ_CHECK(names != NULL);
    for (size_t i = 0; i < hl->n; i++) {
        const struct hvd_host *h = &hl->hosts[i];
        FUZZ_CHECK(h->name != NULL && h->name[0] != '\0');
        FUZZ_CHECK(h->slots >= 1 && h->slots <= HVD_MAX_SLOTS);
        for (const char *c = h->name; *c; c++)
            FUZZ_CHECK((unsigned char)*c > 0x20 && *c != 0x7f &&
                       strchr("[],=", *c) == NULL);
        names[i] = h->name;
        sum += h->slots;
    }
    FUZZ_CHECK(hvd_hostlist_slots(hl) == sum);
    qsort(names, hl->n, sizeof(*names), cmp_name);
    for (size_t i = 1; i < hl->n; i++)
        FUZZ_CHECK(strcmp(names[i - 1], names[i]) != 0);
    free(names);
}

/*
 * Writes hosts [from, n) of hl back as a spec or a hostfile, brackets
 * around every name, and checks that parsing it gives the same hosts.
 */
static void check_round_trip(const struct hvd_hostlist *hl, size_t from,
                             int spec)
{
    struct hvd_hostlist again;
    char err[ROOMY];
    size_t cap = 1, len = 0;
    char *text;
    int rc;

    for (size_t i = from; i < hl->n; i++)
        cap += strlen(hl->hosts[i].name) + 32;
    text = malloc(cap);
    FUZZ_CHECK(text != NULL);
    text[0] = '\0';
    for (size_t i = from; i < hl->n; i++) {
        const struct hvd_host *h = &hl->hosts[i];
        if (spec)
            len += (size_t)snprintf(text + len, cap - len, "%s[%s]:%d",
                                    i > from ? "," : "", h->name, h->slots);
        else
            len += (size_t)snprintf(text + len, cap - len, "[%s] slots=%d\n",
                                    h->name, h->slots);
        FUZZ_CHECK(len < cap);
    }
    hvd_hostlist_init(&again);
    if (spec)
        rc = hvd_hostlist_parse_spec(&again, text, err, sizeof(err));
    else
        rc = hvd_hostlist_parse_text(&again, text, len, "rt", err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "round trip of '%s' failed: %s\n", text, err);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(again.n == hl->n - from);
    for (size_t i = 0; i < again.n; i++) {
        FUZZ_CHECK(strcmp(again.hosts[i].name, hl->hosts[from + i].name) == 0);
        FUZZ_CHECK(again.hosts[i].slots == hl->hosts[from + i].slots);
    }
    hvd_hostlist_close(&again);
    free(text);
}

/* Parses one piece into hl and checks what came out. */
static void parse(struct hvd_hostlist *hl, int spec, const char *text,
                  size_t len, char *err, size_t errlen)
{
    size_t before = hl->n;
    char *first = before ? hl->hosts[0].name : NULL;
    int rc;

    memset(err, 0x55, errlen);
    if (spec)
        rc = hvd_hostlist_parse_spec(hl, text, err, errlen);
    else
        rc = hvd_hostlist_parse_text(hl, text, len, "fuzz", err, errlen);
    FUZZ_CHECK(rc == 0 || rc == HVD_EPARSE || rc == HVD_ERANGE ||
               rc == HVD_EDUP);
    /* The message always ends inside its buffer, and says something on
     * failure and nothing on success. */
    FUZZ_CHECK(strnlen(err, errlen) < errlen);
    FUZZ_CHECK(rc == 0 ? err[0] == '\0' : errlen == 1 || err[0] != '\0');
    /* Hosts listed before the parse stay, whatever it found. */
    FUZZ_CHECK(hl->n >= before);
    FUZZ_CHECK(before == 0 || hl->hosts[0].name == first);
    check_list(hl);
    if (rc == 0) {
        FUZZ_CHECK(hl->n > before);
        /* No name holds a comma: a spec lists one host per entry. */
        if (spec) {
            size_t entries = 1;
            for (const char *c = text; *c; c++)
                entries += *c == ',';
            FUZZ_CHECK(hl->n - before == entries);
        }
        check_round_trip(hl, before, spec);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hvd_hostlist hl;
    char err[ROOMY];

    if (size < 2)
        return 0;
    int mode = data[0] & 3;
    size_t errlen = data[1] ? data[1] : sizeof(err);
    size_t len = size - 2;
    /* A NUL-terminated copy, so the spec parser has its C string. */
    char *text = malloc(len + 1);
    FUZZ_CHECK(text != NULL);
    if (len > 0)
        memcpy(text, data + 2, len);
    text[len] = '\0';
    size_t cut = strlen(text);
    const char *second = cut < len ? text + cut + 1 : text + len;
    size_t second_len = cut < len ? len - cut - 1 : 0;

    hvd_hostlist_init(&hl);
    switch (mode) {
    case 0:
        parse(&hl, 1, text, len, err, errlen);
        break;
    case 1:
        parse(&hl, 0, text, len, err, errlen);
        break;
    case 2:
        parse(&hl, 1, text, cut, err, errlen);
        parse(&hl, 0, second, second_len, err, errlen);
        break;
    default:
        parse(&hl, 0, text, cut, err, errlen);
        parse(&hl, 1, second, second_len, err, errlen);
        break;
    }
    hvd_hostlist_close(&hl);
    hvd_hostlist_close(&hl);
    free(text);
    return 0;
}
