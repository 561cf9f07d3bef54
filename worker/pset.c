/* The process set table. */
#include "worker/pset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"

static int *sequence(int size)
{
    int *r = malloc((size_t)size * sizeof(*r));
    for (int i = 0; r && i < size; i++)
        r[i] = i;
    return r;
}

int hvd__pset_init(struct hvd_psets *t, int size, int rank)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->mu, NULL);
    t->all = (struct hvd_pset){.id = 0, .n = size, .me = rank};
    t->next_id = 1;
    t->all.ranks = sequence(size);
    return t->all.ranks ? 0 : HVD_ENOMEM;
}

void hvd__pset_close(struct hvd_psets *t)
{
    if (t->next_id == 0) /* never initialized */
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i]->ranks);
        free(t->v[i]);
    }
    free(t->v);
    free(t->all.ranks);
    pthread_mutex_destroy(&t->mu);
    memset(t, 0, sizeof(*t));
}

const struct hvd_pset *hvd__pset_get(const struct hvd_psets *t, int id)
{
    if (id == 0)
        return t->all.ranks ? &t->all : NULL;
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i]->id == id)
            return t->v[i];
    return NULL;
}

int hvd__pset_place(const struct hvd_pset *s, int r)
{
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->ranks[mid] == r)
            return mid;
        if (s->ranks[mid] < r)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int hvd__pset_add(struct hvd_psets *t, const int *ranks, int n, char *err,
                  size_t errlen)
{
    int size = t->all.n;
    struct hvd_pset *s = calloc(1, sizeof(*s));
    int *v = malloc(((size_t)n + 1) * sizeof(*v));
    struct hvd_pset **grown = NULL;
    if (s == NULL || v == NULL)
        goto nomem;
    if (n < 1 || n > size) {
        snprintf(err, errlen, "a process set needs 1 to %d ranks, not %d", size,
                 n);
        goto bad;
    }
    memcpy(v, ranks, (size_t)n * sizeof(*v));
    qsort(v, (size_t)n, sizeof(*v), cmp_int);
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= size || (i > 0 && v[i] == v[i - 1])) {
            snprintf(err, errlen,
                     "process set rank %d is %s (the job has ranks 0 to %d)",
                     v[i], v[i] < 0 || v[i] >= size ? "no rank" : "given twice",
                     size - 1);
            goto bad;
        }
    for (size_t i = 0; i <= t->n; i++) {
        const struct hvd_pset *o = i < t->n ? t->v[i] : &t->all;
        if (o->n == n && memcmp(o->ranks, v, (size_t)n * sizeof(*v)) == 0) {
            snprintf(err, errlen,
                     "a process set of these ranks exists already (id %d)",
                     o->id);
            goto bad;
        }
    }
    *s = (struct hvd_pset){.id = t->next_id, .n = n, .ranks = v};
    s->me = hvd__pset_place(s, t->all.me);
    /* Other threads read the table under mu: the array may move. */
    pthread_mutex_lock(&t->mu);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        if ((grown = realloc(t->v, cap * sizeof(*grown))) == NULL) {
            pthread_mutex_unlock(&t->mu);
            goto nomem;
        }
        t->v = grown;
        t->cap = cap;
    }
    t->v[t->n++] = s;
    t->next_id++;
    pthread_mutex_unlock(&t->mu);
    return s->id;
nomem:
    snprintf(err, errlen, "out of memory");
    free(s);
    free(v);
    return HVD_ENOMEM;
bad:
    free(s);
    free(v);
    return HVD_EINVAL;
}

int hvd__pset_remove(struct hvd_psets *t, int id, char *err, size_t errlen)
{
    for (size_t i = 0; id != 0 && i < t->n; i++)
        if (t->v[i]->id == id) {
            struct hvd_pset *s = t->v[i];
            pthread_mutex_lock(&t->mu);
            memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(*t->v));
            t->n--;
            pthread_mutex_unlock(&t->mu);
            free(s->ranks);
            free(s);
            return 0;
        }
    snprintf(err, errlen, "there is no process set %d%s", id,
             id == 0 ? " to remove (0 is every rank)" : "");
    return HVD_EINVAL;
}
