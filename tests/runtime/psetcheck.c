/* Checks process sets, join and Adasum under horovodrun (any -np from
 * 2): every collective on a set against a serial reference, sets running
 * side by side under the same names, the ids every rank agrees on, the
 * errors, join with uneven numbers of steps, and Adasum against the tree
 * computed here. Exits 1 on a wrong result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"

static int rank, size, failures, checks;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        printf("psetcheck: rank %d: FAILED %s (%s)\n", rank, what,
               hvd_last_error());
    }
}

/* The ranks of r's parity, and how many. */
static int parity(int r, int *v)
{
    int n = 0;
    for (int i = r % 2; i < size; i += 2)
        v[n++] = i;
    return n;
}

/* The same id on every rank: its minimum and maximum agree. */
static void check_same(int id, const char *what)
{
    int lo = id, hi = id;
    check(hvd_allreduce(&lo, &lo, 1, HVD_INT32, HVD_MIN, NULL) == 0 &&
              hvd_allreduce(&hi, &hi, 1, HVD_INT32, HVD_MAX, NULL) == 0 &&
              lo == hi,
          what);
}

/* Every collective on set id of the n ranks v, of which this rank is
 * member me. Both parity sets run this at once, under the same names. */
static void collectives(int id, const int *v, int n, int me)
{
    enum { N = 1000 };
    int32_t ia[N], isum = 0;
    float fa[N];
    int prev = hvd_use_process_set(id);
    check(prev == 0, "hvd_use_process_set returns the set before");
    check(hvd_process_set_size(id) == n && hvd_process_set_rank(id) == me,
          "size and rank in the set");

    /* Sum and average of integers, min, max and product of floats. */
    for (int i = 0; i < N; i++)
        ia[i] = (rank + 1) * (i % 7 + 1);
    for (int k = 0; k < n; k++)
        isum += v[k] + 1;
    check(hvd_allreduce(ia, ia, N, HVD_INT32, HVD_SUM, "x") == 0, "sum");
    int ok = 1;
    for (int i = 0; i < N; i++)
        ok &= ia[i] == isum * (i % 7 + 1);
    check(ok, "sum over the set's ranks only");
    for (int i = 0; i < N; i++)
        ia[i] = (rank + 1) * (i % 7 + 1);
    check(hvd_allreduce(ia, ia, N, HVD_INT32, HVD_AVERAGE, "x") == 0, "avg");
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= ia[i] == isum * (i % 7 + 1) / n;
    check(ok, "integer average divides by the set's size");
    for (int i = 0; i < N; i++)
        fa[i] = (float)((rank + 1) * (i % 5 + 1));
    check(hvd_allreduce(fa, fa, N, HVD_FLOAT32, HVD_AVERAGE, "y") == 0, "f");
    ok = 1;
    for (int i = 0; i < N; i++)
        ok &= fa[i] == (float)(isum * (i % 5 + 1)) * (float)(1.0 / n);
    check(ok, "float average is the sum times 1/size, as Horovod's");
    hvd_op ops[] = {HVD_MIN, HVD_MAX, HVD_PRODUCT};
    for (int o = 0; o < 3; o++) {
        for (int i = 0; i < N; i++)
            fa[i] = (float)(rank + 2) * (i % 2 ? -1.0f : 1.0f);
        check(hvd_allreduce(fa, fa, N, HVD_FLOAT32, ops[o], "z") == 0, "mm");
        ok = 1;
        for (int i = 0; i < N; i++) {
            float want = (float)(v[0] + 2) * (i % 2 ? -1.0f : 1.0f);
            for (int k = 1; k < n; k++) {
                float x = (float)(v[k] + 2) * (i % 2 ? -1.0f : 1.0f);
                want = ops[o] == HVD_MIN   ? (x < want ? x : want)
                       : ops[o] == HVD_MAX ? (x > want ? x : want)
                                           : want * x;
            }
            ok &= fa[i] == want;
        }
        check(ok, "min, max and product over the set only");
    }

    /* Allgather: rank r gives r + 1 elements; counts are in set order. */
    int32_t mine[64];
    size_t counts[64];
    void *all = NULL;
    for (int i = 0; i <= rank; i++)
        mine[i] = rank * 100 + i;
    check(hvd_allgather(mine, (size_t)rank + 1, HVD_INT32, &all, counts, "g") ==
              0,
          "allgather");
    ok = all != NULL;
    for (int k = 0, at = 0; ok && k < n; k++) {
        ok &= counts[k] == (size_t)v[k] + 1;
        for (int i = 0; ok && i <= v[k]; i++)
            ok &= ((int32_t *)all)[at++] == v[k] * 100 + i;
    }
    check(ok, "allgather of the set's ranks, in set order");
    free(all);

    /* Broadcast from the set's last rank, named by its global rank. */
    int32_t b[3] = {rank, rank, rank};
    check(hvd_broadcast(b, 3, HVD_INT32, v[n - 1], "b") == 0 &&
              b[0] == v[n - 1] && b[2] == v[n - 1],
          "broadcast from a global root in the set");
    int other = v[0] == 0 ? 1 : 0;
    check(hvd_broadcast(b, 3, HVD_INT32, other, "b2") == HVD_EINVAL,
          "a root outside the set is refused");

    /* Alltoall: member k sends k + j + 1 elements to member j. */
    size_t sc[64], rc[64], total = 0;
    int32_t send[4096];
    for (int j = 0; j < n; j++) {
        sc[j] = (size_t)(me + j + 1);
        for (size_t e = 0; e < sc[j]; e++)
            send[total++] = rank * 1000 + v[j];
    }
    all = NULL;
    check(hvd_alltoall(send, sc, HVD_INT32, &all, rc, "a") == 0, "alltoall");
    ok = all != NULL;
    for (int k = 0, at = 0; ok && k < n; k++) {
        ok &= rc[k] == (size_t)(k + me + 1);
        for (size_t e = 0; ok && e < rc[k]; e++)
            ok &= ((int32_t *)all)[at++] == v[k] * 1000 + rank;
    }
    check(ok, "alltoall among the set's ranks");
    free(all);

    /* Reducescatter of 2n + 1 rows of 3: the set's split, averaged. */
    size_t rows = 2 * (size_t)n + 1,
           mrows = rows / (size_t)n + ((size_t)me < rows % (size_t)n);
    size_t first =
        (size_t)me * (rows / (size_t)n) +
        ((size_t)me < rows % (size_t)n ? (size_t)me : rows % (size_t)n);
    for (size_t i = 0; i < rows * 3; i++)
        fa[i] = (float)((rank + 1) * (int)(i + 1));
    float out[64];
    check(hvd_reducescatter(fa, out, rows * 3, 3, HVD_FLOAT32, HVD_SUM, "r",
                            NULL) == 0,
          "reducescatter");
    ok = 1;
    for (size_t i = 0; i < mrows * 3; i++)
        ok &= out[i] == (float)(isum * (int)(first * 3 + i + 1));
    check(ok, "reducescatter's rows of the set's split");

    check(hvd_barrier() == 0, "barrier on the set");
    check(hvd_use_process_set(0) == id, "back to every rank");
}

static void process_sets(void)
{
    int ev[64], od[64], ne = parity(0, ev), no = parity(1, od);
    int mine[64], nm = parity(rank, mine);
    int e = hvd_add_process_set(ev, ne);
    int o = hvd_add_process_set(od, no);
    check(e > 0 && o > 0 && e != o, "two new ids");
    check_same(e, "every rank has the same id");
    check(hvd_process_set_ids(NULL, 0) == 3, "three sets exist");
    int got[64];
    check(hvd_process_set_ranks(o, got, 64) == no && got[0] == 1,
          "the set's ranks");
    check(hvd_process_set_rank(rank % 2 ? e : o) == HVD_ENOTMEMBER,
          "not a member of the other set");
    check(hvd_add_process_set(ev, ne) == HVD_EINVAL,
          "a duplicate set is refused on every rank");
    /* Disagreeing ranks: rank 0 asks for a different set of one. */
    int solo[1] = {rank == 0 ? 0 : 1};
    check(hvd_add_process_set(solo, 1) == HVD_EMISMATCH,
          "ranks that disagree fail together");

    collectives(rank % 2 ? o : e, mine, nm, rank / 2);

    hvd_use_process_set(rank % 2 ? e : o);
    float x = 1;
    check(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, NULL) ==
              HVD_ENOTMEMBER,
          "a collective on a set without this rank is refused");
    hvd_use_process_set(12345);
    check(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, NULL) == HVD_EINVAL,
          "an unknown set is refused");
    hvd_use_process_set(0);

    check(hvd_remove_process_set(e) == 0 && hvd_remove_process_set(o) == 0,
          "remove");
    check(hvd_process_set_size(e) == HVD_EINVAL &&
              hvd_remove_process_set(0) == HVD_EINVAL,
          "a removed set is gone; every rank's stays");
    int again = hvd_add_process_set(ev, ne);
    check(again > o, "ids are not reused");
    check_same(again, "the new id agrees too");
    hvd_remove_process_set(again);
}

/* Rank r runs r steps, then joins: step i sums the ranks above i, the
 * others standing in with zeros (min: the identity). Rank 0 joins at
 * once, so the others' broadcast fails. */
static void join(void)
{
    if (rank > 0) {
        int32_t b = 7;
        check(hvd_broadcast(&b, 1, HVD_INT32, 1, "while.joined") == HVD_EINVAL,
              "a broadcast fails while a rank has joined");
    }
    for (int i = 0; i < rank; i++) {
        char name[32];
        float s = (float)(rank + 1), m = (float)(rank + 1);
        snprintf(name, sizeof(name), "step.%d", i);
        check(hvd_allreduce(&s, &s, 1, HVD_FLOAT32, HVD_AVERAGE, name) == 0,
              "a step");
        float want = 0;
        for (int r = i + 1; r < size; r++)
            want += (float)(r + 1);
        check(s == want / (float)size, "joined ranks add zeros to averages");
        snprintf(name, sizeof(name), "min.%d", i);
        check(hvd_allreduce(&m, &m, 1, HVD_FLOAT32, HVD_MIN, name) == 0 &&
                  m == (float)(i + 2),
              "joined ranks add nothing to a minimum");
    }
    int last = hvd_join();
    check(last == size - 1, "join returns the rank that joined last");
    /* After the join, everything works as before. */
    float one = 1;
    check(hvd_allreduce(&one, &one, 1, HVD_FLOAT32, HVD_SUM, "after") == 0 &&
              one == (float)size,
          "collectives after join");
}

/* Rank r's vector for Adasum: not parallel to the others'. */
static double adasum_in(int r, int i)
{
    return (double)((r * 7 + i * 3) % 11) - 5.0 + (i == r ? 4.0 : 0.0);
}

static void adasum(void)
{
    enum { N = 33 };
    float x[N], got[N];
    double v[64][N];
    for (int i = 0; i < N; i++)
        x[i] = (float)adasum_in(rank, i);
    int rc = hvd_allreduce(x, got, N, HVD_FLOAT32, HVD_ADASUM, "ada");
    if (size & (size - 1)) {
        check(rc == HVD_EINVAL, "Adasum needs a power-of-two size");
        return;
    }
    check(rc == 0, "Adasum");
    /* The tree: (0,1), (2,3), ... then pairs of those. */
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++)
            v[r][i] = (double)(float)adasum_in(r, i);
    for (int step = 1; step < size; step *= 2)
        for (int r = 0; r < size; r += 2 * step) {
            double *a = v[r], *b = v[r + step], ab = 0, aa = 0, bb = 0;
            for (int i = 0; i < N; i++) {
                ab += a[i] * b[i];
                aa += a[i] * a[i];
                bb += b[i] * b[i];
            }
            double ca = aa > 0 ? 1 - ab / (2 * aa) : 1;
            double cb = bb > 0 ? 1 - ab / (2 * bb) : 1;
            for (int i = 0; i < N; i++)
                a[i] = ca * a[i] + cb * b[i];
        }
    int ok = 1;
    for (int i = 0; i < N; i++)
        ok &= fabs((double)got[i] - v[0][i]) <= 1e-5 * (1 + fabs(v[0][i]));
    check(ok, "Adasum gives the tree's result");
    int32_t ix[1] = {1};
    check(hvd_allreduce(ix, ix, 1, HVD_INT32, HVD_ADASUM, NULL) == HVD_EINVAL,
          "Adasum refuses integers");
}

int main(void)
{
    if (hvd_init() != 0) {
        fprintf(stderr, "psetcheck: %s\n", hvd_last_error());
        return 1;
    }
    rank = hvd_rank();
    size = hvd_size();
    process_sets();
    join();
    adasum();
    printf("psetcheck: rank %d of %d: %d checks, %d failures\n", rank, size,
           checks, failures);
    hvd_shutdown();
    return failures ? 1 : 0;
}
