/* Process sets: the subsets of ranks a collective may run among. Id 0 is
 * every rank; the others come and go through collective calls that every
 * rank makes in the same order, so every rank keeps the same table. */
#ifndef HVD_PSET_H
#define HVD_PSET_H

#include <pthread.h>
#include <stddef.h>

/* One set: its global ranks in increasing order. */
struct hvd_pset {
    int id;
    int n;
    int *ranks;
    int me; /* this rank's place in ranks, or -1 */
};

/* The background thread alone changes the table; other threads read it
 * under mu. */
struct hvd_psets {
    pthread_mutex_t mu;
    struct hvd_pset all; /* id 0 */
    struct hvd_pset **v; /* the others, by increasing id */
    size_t n, cap;
    int next_id;
};

/* The table of a job of size ranks, seen from rank. 0 or HVD_ENOMEM. */
int hvd__pset_init(struct hvd_psets *t, int size, int rank);
void hvd__pset_close(struct hvd_psets *t);

/* The set of this id, or NULL (unlocked: the background thread's call,
 * or the caller holds mu). */
const struct hvd_pset *hvd__pset_get(const struct hvd_psets *t, int id);
/* The place of global rank r in s, or -1. */
int hvd__pset_place(const struct hvd_pset *s, int r);

/*
 * Adds the set of the n ranks (any order, checked here) and returns its
 * id, which every rank gets the same; HVD_EINVAL with err filled when a
 * rank is out of range or given twice, or a set of these ranks exists.
 */
int hvd__pset_add(struct hvd_psets *t, const int *ranks, int n, char *err,
                  size_t errlen);
/* Removes set id (not 0); HVD_EINVAL when there is none. */
int hvd__pset_remove(struct hvd_psets *t, int id, char *err, size_t errlen);

#endif
