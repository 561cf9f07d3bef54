/* Growable NULL-terminated vectors of owned strings (argv, envp). */
#include "launcher/lib/strvec.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"

void hvd_strvec_init(struct hvd_strvec *sv)
{
    if (sv == NULL)
        return;
    sv->v = NULL;
    sv->n = 0;
    sv->cap = 0;
}

void hvd_strvec_close(struct hvd_strvec *sv)
{
    size_t i;

    if (sv == NULL)
        return;
    for (i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    hvd_strvec_init(sv);
}

/*
 * Makes room for one more string plus the terminating NULL. Capacity doubles
 * so that n pushes cost O(n) in total.
 */
static int reserve_one(struct hvd_strvec *sv)
{
    size_t ncap;
    char **nv;

    if (sv->n + 2 <= sv->cap)
        return 0;
    ncap = sv->cap ? sv->cap : 8;
    while (ncap < sv->n + 2) {
        if (ncap > SIZE_MAX / 2 / sizeof(*nv))
            return HVD_ENOMEM;
        ncap *= 2;
    }
    nv = realloc(sv->v, ncap * sizeof(*nv));
    if (nv == NULL)
        return HVD_ENOMEM;
    sv->v = nv;
    sv->cap = ncap;
    return 0;
}

/* Appends a string the vector takes ownership of; frees it on failure. */
static int push_owned(struct hvd_strvec *sv, char *s)
{
    int rc;

    rc = reserve_one(sv);
    if (rc < 0) {
        free(s);
        return rc;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
    return 0;
}

int hvd_strvec_push(struct hvd_strvec *sv, const char *s)
{
    if (sv == NULL || s == NULL)
        return HVD_EINVAL;
    return hvd_strvec_pushn(sv, s, strlen(s));
}

int hvd_strvec_pushn(struct hvd_strvec *sv, const char *s, size_t len)
{
    char *copy;

    if (sv == NULL || (s == NULL && len > 0))
        return HVD_EINVAL;
    /* Like strndup: never read past a NUL inside the first len bytes. */
    if (len > 0)
        len = strnlen(s, len);
    if (len == SIZE_MAX)
        return HVD_ENOMEM;
    copy = malloc(len + 1);
    if (copy == NULL)
        return HVD_ENOMEM;
    if (len > 0)
        memcpy(copy, s, len);
    copy[len] = '\0';
    return push_owned(sv, copy);
}

int hvd_strvec_pushf(struct hvd_strvec *sv, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    int len;
    int rc;

    if (sv == NULL || fmt == NULL)
        return HVD_EINVAL;

    va_start(ap, fmt);
    len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) {
        rc = HVD_EINVAL;
        goto out;
    }
    s = malloc((size_t)len + 1);
    if (s == NULL) {
        rc = HVD_ENOMEM;
        goto out;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);

    rc = push_owned(sv, s);
    s = NULL; /* push_owned owns it now, whatever it returned. */
out:
    free(s);
    return rc;
}

/* True if entry is "name=...", with name given as the first namelen bytes. */
static int entry_has_name(const char *entry, const char *name, size_t namelen)
{
    return strncmp(entry, name, namelen) == 0 && entry[namelen] == '=';
}

int hvd_strvec_setenv(struct hvd_strvec *sv, const char *entry)
{
    const char *eq;
    size_t namelen;
    size_t i;
    char *copy;

    if (sv == NULL || entry == NULL)
        return HVD_EINVAL;
    eq = strchr(entry, '=');
    if (eq == NULL || eq == entry)
        return HVD_EINVAL;
    namelen = (size_t)(eq - entry);

    for (i = 0; i < sv->n; i++) {
        if (!entry_has_name(sv->v[i], entry, namelen))
            continue;
        copy = strdup(entry);
        if (copy == NULL)
            return HVD_ENOMEM;
        free(sv->v[i]);
        sv->v[i] = copy;
        return 0;
    }
    return hvd_strvec_push(sv, entry);
}

const char *hvd_strvec_getenv(const struct hvd_strvec *sv, const char *name)
{
    size_t namelen;
    size_t i;

    if (sv == NULL || name == NULL || name[0] == '\0' ||
        strchr(name, '=') != NULL)
        return NULL;
    namelen = strlen(name);
    for (i = 0; i < sv->n; i++) {
        if (entry_has_name(sv->v[i], name, namelen))
            return sv->v[i] + namelen + 1;
    }
    return NULL;
}
