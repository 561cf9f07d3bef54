/* Host lists that batch systems leave in the environment. */
#include "launcher/lib/clusterhosts.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/errmsg.h"

/* In the order they are tried: a job under PBS that also runs LSF tools
 * gets PBS's list, as the first found wins. */
static const char *const vars[] = {
    "PBS_NODEFILE",
    "LSB_MCPU_HOSTS",
    "LSB_HOSTS",
    "OMPI_MCA_orte_default_hostfile",
};

const char *hvd_cluster_hosts_var(void)
{
    size_t i;

    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);

        if (v != NULL && v[0] != '\0')
            return vars[i];
    }
    return NULL;
}

int hvd_cluster_var_is_file(const char *var)
{
    return var != NULL && (strcmp(var, "PBS_NODEFILE") == 0 ||
                           strcmp(var, "OMPI_MCA_orte_default_hostfile") == 0);
}

static const char *const blanks = " \t\r\n";

/* The next word of *p, moving *p past it; its length in *len, 0 at end. */
static const char *word(const char **p, size_t *len)
{
    const char *w = *p + strspn(*p, blanks);

    *len = strcspn(w, blanks);
    *p = w + *len;
    return w;
}

/* A slot count: 1 to HVD_MAX_SLOTS in decimal digits, or -1. */
static int slot_count(const char *s, size_t len)
{
    long v = 0;
    size_t i;

    for (i = 0; i < len && i < 7; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return len == 0 || len > 6 || v < 1 || v > HVD_MAX_SLOTS ? -1 : (int)v;
}

/*
 * Parses both LSF forms: with counts, name and count pairs; without, one
 * name per slot.
 */
static int parse_lsf(struct hvd_hostlist *hl, const char *var, const char *text,
                     int counts, char *err, size_t errlen)
{
    char q[HVD_QUOTE_MAX + 1];
    char qn[HVD_QUOTE_MAX + 1];
    char qc[HVD_QUOTE_MAX + 1];
    const char *p = text;
    const char *name;
    const char *cnt;
    size_t nlen;
    size_t clen = 0;
    size_t before;
    int slots = 1;
    int rc;

    rc = hvd_errmsg_start(err, errlen, hl != NULL && text != NULL);
    if (rc < 0)
        return rc;
    before = hl->n;
    hvd_quote(q, text, strlen(text));
    while (name = word(&p, &nlen), nlen > 0) {
        hvd_quote(qn, name, nlen);
        if (counts) {
            cnt = word(&p, &clen);
            if (clen == 0) {
                hvd_seterr(err, errlen, "%s: '%s': a host without a slot count",
                           var, q);
                return HVD_EPARSE;
            }
            slots = slot_count(cnt, clen);
            if (slots < 0) {
                hvd_quote(qc, cnt, clen);
                hvd_seterr(err, errlen,
                           "%s: '%s': slot count '%s' of host '%s' is not a "
                           "positive integer up to %d",
                           var, q, qc, qn, HVD_MAX_SLOTS);
                return HVD_ERANGE;
            }
        }
        rc = hvd_hostlist_merge(hl, name, nlen, slots);
        if (rc == HVD_EPARSE)
            hvd_seterr(err, errlen, "%s: '%s': '%s' is not a host name", var, q,
                       qn);
        else if (rc == HVD_ERANGE)
            hvd_seterr(err, errlen,
                       "%s: host '%s' adds up to more than %d slots", var, qn,
                       HVD_MAX_SLOTS);
        else if (rc < 0)
            hvd_seterr(err, errlen, "out of memory");
        if (rc < 0)
            return rc;
    }
    if (hl->n == before) {
        hvd_seterr(err, errlen, "%s is set but lists no hosts", var);
        return HVD_EPARSE;
    }
    return 0;
}

int hvd_cluster_parse_lsb_mcpu(struct hvd_hostlist *hl, const char *text,
                               char *err, size_t errlen)
{
    return parse_lsf(hl, "LSB_MCPU_HOSTS", text, 1, err, errlen);
}

int hvd_cluster_parse_lsb_hosts(struct hvd_hostlist *hl, const char *text,
                                char *err, size_t errlen)
{
    return parse_lsf(hl, "LSB_HOSTS", text, 0, err, errlen);
}

int hvd_cluster_hosts(struct hvd_hostlist *hl, const char *var, char *err,
                      size_t errlen)
{
    const char *val = var != NULL ? getenv(var) : NULL;
    char msg[512];
    int rc;

    rc = hvd_errmsg_start(err, errlen, hl != NULL && val != NULL);
    if (rc < 0)
        return rc;
    if (strcmp(var, "LSB_MCPU_HOSTS") == 0)
        return hvd_cluster_parse_lsb_mcpu(hl, val, err, errlen);
    if (strcmp(var, "LSB_HOSTS") == 0)
        return hvd_cluster_parse_lsb_hosts(hl, val, err, errlen);
    /* The file's messages name it and the line; the variable tells the
     * user where the file name came from. */
    rc = hvd_hostlist_parse_file(hl, val, msg, sizeof(msg));
    if (rc < 0)
        hvd_seterr(err, errlen, "%s: %s", var, msg);
    return rc;
}
