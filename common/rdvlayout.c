/* The job's host layout, its runs on the wire, and each rank's peers. */
#include "common/rdvlayout.h"

#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"

int hvd_rdv_ring_links(int size)
{
    int links = 1;
    while (size >= 4 && links < HVD_RDV_RING_LINKS && (1 << links) < size)
        links++;
    return links;
}

static int alloc_layout(struct hvd_rdv_layout *l, int size, int nhosts)
{
    memset(l, 0, sizeof(*l));
    l->size = size;
    l->host_of = malloc((size_t)size * sizeof(*l->host_of));
    l->first = malloc((size_t)(nhosts > 0 ? nhosts : 1) * sizeof(*l->first));
    if (l->host_of == NULL || l->first == NULL) {
        hvd_rdv_layout_close(l);
        return HVD_ENOMEM;
    }
    return 0;
}

int hvd_rdv_layout_from_hosts(struct hvd_rdv_layout *l, int size,
                              const char *const *hosts)
{
    int rc = alloc_layout(l, size, size);
    if (rc)
        return rc;
    for (int r = 0; r < size; r++) {
        /* A host's ranks are usually together: the one before first,
         * then the hosts seen so far. */
        int h = 0;
        if (r > 0 && strcmp(hosts[r], hosts[r - 1]) == 0)
            h = l->host_of[r - 1];
        else
            while (h < l->nhosts && strcmp(hosts[l->first[h]], hosts[r]) != 0)
                h++;
        if (h == l->nhosts)
            l->first[l->nhosts++] = r;
        l->host_of[r] = h;
    }
    return 0;
}

int hvd_rdv_runs_check(uint32_t size, const struct hvd_rdv_run *runs,
                       uint32_t nruns, int *nhosts)
{
    uint64_t total = 0, hosts = 0;
    if (size == 0 || size > HVD_RDV_SIZE_MAX)
        return HVD_EPROTO;
    for (uint32_t i = 0; i < nruns; i++) {
        const struct hvd_rdv_run *u = &runs[i];
        if (u->count == 0 || u->repeat == 0 ||
            (u->host >= 0 && (u->repeat != 1 || (uint64_t)u->host >= hosts)))
            return HVD_EPROTO;
        /* Both below 2^32, so the product fits; the sum is checked at
         * every step. */
        total += (uint64_t)u->count * u->repeat;
        if (total > size)
            return HVD_EPROTO;
        if (u->host < 0)
            hosts += u->repeat;
    }
    if (total != size)
        return HVD_EPROTO;
    *nhosts = (int)hosts;
    return 0;
}

int hvd_rdv_layout_from_runs(struct hvd_rdv_layout *l, uint32_t size,
                             const struct hvd_rdv_run *runs, uint32_t nruns)
{
    int nhosts;
    memset(l, 0, sizeof(*l));
    int rc = hvd_rdv_runs_check(size, runs, nruns, &nhosts);
    if (rc)
        return rc;
    if ((rc = alloc_layout(l, (int)size, nhosts)))
        return rc;
    int r = 0;
    for (uint32_t i = 0; i < nruns; i++)
        for (uint32_t k = 0; k < runs[i].repeat; k++) {
            int h = runs[i].host;
            if (h < 0) {
                h = l->nhosts++;
                l->first[h] = r;
            }
            for (uint32_t j = 0; j < runs[i].count; j++)
                l->host_of[r++] = h;
        }
    return 0;
}

int hvd_rdv_layout_runs(const struct hvd_rdv_layout *l,
                        struct hvd_rdv_run **runs, uint32_t *nruns)
{
    struct hvd_rdv_run *u = malloc((size_t)l->size * sizeof(*u));
    uint32_t n = 0;
    int seen = 0;
    if (u == NULL)
        return HVD_ENOMEM;
    for (int r = 0; r < l->size;) {
        int h = l->host_of[r], len = 1;
        while (r + len < l->size && l->host_of[r + len] == h)
            len++;
        r += len;
        if (h < seen) {
            u[n++] = (struct hvd_rdv_run){(uint32_t)len, 1, h};
            continue;
        }
        seen++;
        if (n > 0 && u[n - 1].host < 0 && u[n - 1].count == (uint32_t)len)
            u[n - 1].repeat++;
        else
            u[n++] = (struct hvd_rdv_run){(uint32_t)len, 1, -1};
    }
    *runs = u;
    *nruns = n;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Adds the members 1, 2, 4, ... ahead of and behind member i of a ring of
 * n members, as global ranks (member m is global[m], or m). */
static int add_ring(int *out, int k, int n, int i, const int *global)
{
    for (int j = 0; j < hvd_rdv_ring_links(n); j++) {
        int ahead = (i + (1 << j)) % n, behind = ((i - (1 << j)) % n + n) % n;
        out[k++] = global ? global[ahead] : ahead;
        out[k++] = global ? global[behind] : behind;
    }
    return k;
}

int hvd_rdv_layout_wanted(const struct hvd_rdv_layout *l, int rank, int *out)
{
    int h = l->host_of[rank], k = 0, n = 1;
    out[k++] = rank;
    k = add_ring(out, k, l->size, rank, NULL);
    if (l->first[h] == rank && l->nhosts > 1)
        k = add_ring(out, k, l->nhosts, h, l->first);
    qsort(out, (size_t)k, sizeof(*out), cmp_int);
    for (int i = 1; i < k; i++)
        if (out[i] != out[n - 1])
            out[n++] = out[i];
    return n;
}

void hvd_rdv_layout_close(struct hvd_rdv_layout *l)
{
    if (l == NULL)
        return;
    free(l->host_of);
    free(l->first);
    memset(l, 0, sizeof(*l));
}
