/* Unit tests for launcher/lib/plan.c: Horovod's rank assignment. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/plan.h"

static struct hvd_hostlist hl;
static struct hvd_plan plan;

static void setup(void)
{
    hvd_hostlist_init(&hl);
    plan.ranks = NULL;
    plan.size = 0;
}

static void teardown(void)
{
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
}

TestSuite(plan, .init = setup, .fini = teardown);

/* Adds hosts h0, h1, ... with the given slot counts. */
static void hosts(const int *slots, size_t n)
{
    char name[32];
    size_t i;

    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "h%zu", i);
        cr_assert_eq(hvd_hostlist_add(&hl, name, slots[i]), 0);
    }
}

/* One expected row: host, local_rank, local_size, cross_rank, cross_size. */
struct row {
    int host, lr, ls, cr, cs;
};

static void expect_rows(const struct row *want, int n)
{
    int i;

    cr_assert_eq(plan.size, n);
    cr_assert_not_null(plan.ranks);
    for (i = 0; i < n; i++) {
        const struct hvd_slot *s = &plan.ranks[i];

        cr_assert_eq(s->rank, i);
        cr_assert_eq(s->host, want[i].host, "rank %d host %d", i, s->host);
        cr_assert_eq(s->local_rank, want[i].lr, "rank %d local_rank %d", i,
                     s->local_rank);
        cr_assert_eq(s->local_size, want[i].ls, "rank %d local_size %d", i,
                     s->local_size);
        cr_assert_eq(s->cross_rank, want[i].cr, "rank %d cross_rank %d", i,
                     s->cross_rank);
        cr_assert_eq(s->cross_size, want[i].cs, "rank %d cross_size %d", i,
                     s->cross_size);
    }
}

Test(plan, uneven_two_hosts)
{
    static const int slots[] = {1, 2};
    static const struct row want[] = {
        {0, 0, 1, 0, 2},
        {1, 0, 2, 1, 2},
        {1, 1, 2, 0, 1},
    };

    hosts(slots, 2);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 3), 0);
    expect_rows(want, 3);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 0), 1);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 1), 2);
}

Test(plan, uneven_three_hosts)
{
    static const int slots[] = {2, 1, 3};
    static const struct row want[] = {
        {0, 0, 2, 0, 3}, {0, 1, 2, 0, 2}, {1, 0, 1, 1, 3},
        {2, 0, 3, 2, 3}, {2, 1, 3, 1, 2}, {2, 2, 3, 0, 1},
    };

    hosts(slots, 3);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 6), 0);
    expect_rows(want, 6);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 0), 2);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 1), 1);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 2), 3);
}

Test(plan, np_below_slots_fills_first_host_first)
{
    static const int slots[] = {4, 4};
    static const struct row want[] = {
        {0, 0, 4, 0, 2}, {0, 1, 4, 0, 1}, {0, 2, 4, 0, 1},
        {0, 3, 4, 0, 1}, {1, 0, 1, 1, 2},
    };

    hosts(slots, 2);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 5), 0);
    expect_rows(want, 5);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 0), 4);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 1), 1);
}

Test(plan, unneeded_host_gets_nothing)
{
    static const int slots[] = {2, 2, 2};
    static const struct row want[] = {
        {0, 0, 2, 0, 2},
        {0, 1, 2, 0, 1},
        {1, 0, 1, 1, 2},
    };

    hosts(slots, 3);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 3), 0);
    expect_rows(want, 3);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 2), 0);
}

Test(plan, single_rank)
{
    static const int slots[] = {8, 8};
    static const struct row want[] = {{0, 0, 1, 0, 1}};

    hosts(slots, 2);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 1), 0);
    expect_rows(want, 1);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 1), 0);
}

Test(plan, equal_hosts_full)
{
    static const int slots[] = {2, 2};
    static const struct row want[] = {
        {0, 0, 2, 0, 2},
        {0, 1, 2, 0, 2},
        {1, 0, 2, 1, 2},
        {1, 1, 2, 1, 2},
    };

    hosts(slots, 2);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 4), 0);
    expect_rows(want, 4);
}

Test(plan, bad_np)
{
    static const int slots[] = {2};

    hosts(slots, 1);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 0), HVD_EINVAL);
    cr_assert_null(plan.ranks);
    cr_assert_eq(plan.size, 0);
    cr_assert_eq(hvd_plan_build(&plan, &hl, -3), HVD_EINVAL);
    cr_assert_null(plan.ranks);
}

Test(plan, not_enough_slots)
{
    static const int slots[] = {1, 2};

    hosts(slots, 2);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 4), HVD_ENOSLOTS);
    cr_assert_null(plan.ranks);
    cr_assert_eq(plan.size, 0);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 3), 0);
    cr_assert_eq(plan.size, 3);
}

Test(plan, empty_host_list)
{
    cr_assert_eq(hvd_plan_build(&plan, &hl, 1), HVD_ENOSLOTS);
    cr_assert_null(plan.ranks);
}

Test(plan, bad_arguments)
{
    static const int slots[] = {1};

    hosts(slots, 1);
    cr_assert_eq(hvd_plan_build(NULL, &hl, 1), HVD_EINVAL);
    cr_assert_eq(hvd_plan_build(&plan, NULL, 1), HVD_EINVAL);
    cr_assert_eq(hvd_plan_host_ranks(NULL, 0), 0);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 0), 0);
}

Test(plan, close_is_idempotent)
{
    static const int slots[] = {3};

    hosts(slots, 1);
    cr_assert_eq(hvd_plan_build(&plan, &hl, 2), 0);
    hvd_plan_close(&plan);
    cr_assert_null(plan.ranks);
    cr_assert_eq(plan.size, 0);
    hvd_plan_close(&plan);
    hvd_plan_close(NULL);
}

/*
 * Recomputes every field the slow, obvious way and compares. Only for small
 * plans: it loops over the hosts for every rank.
 */
static void check_against_reference(const int *slots, int nhosts, int np)
{
    int *placed = calloc((size_t)nhosts, sizeof(int));
    int left = np;
    int rank = 0;
    int h;
    int h2;
    int lr;
    int cr;
    int cs;

    cr_assert_not_null(placed);
    for (h = 0; h < nhosts; h++) {
        placed[h] = slots[h] < left ? slots[h] : left;
        left -= placed[h];
    }
    cr_assert_eq(plan.size, np);
    for (h = 0; h < nhosts; h++) {
        cr_assert_eq(hvd_plan_host_ranks(&plan, h), placed[h]);
        for (lr = 0; lr < placed[h]; lr++, rank++) {
            const struct hvd_slot *s = &plan.ranks[rank];

            cr = 0;
            cs = 0;
            for (h2 = 0; h2 < nhosts; h2++) {
                if (placed[h2] > lr) {
                    cr += h2 < h;
                    cs++;
                }
            }
            cr_assert_eq(s->rank, rank);
            cr_assert_eq(s->host, h);
            cr_assert_eq(s->local_rank, lr);
            cr_assert_eq(s->local_size, placed[h]);
            cr_assert_eq(s->cross_rank, cr, "rank %d", rank);
            cr_assert_eq(s->cross_size, cs, "rank %d", rank);
        }
    }
    cr_assert_eq(rank, np);
    free(placed);
}

Test(plan, random_small_lists_match_reference)
{
    int slots[12];
    int trial;
    int nhosts;
    int total;
    int np;
    int i;

    srand(12345);
    for (trial = 0; trial < 300; trial++) {
        hvd_plan_close(&plan);
        hvd_hostlist_close(&hl);
        nhosts = 1 + rand() % 12;
        total = 0;
        for (i = 0; i < nhosts; i++) {
            slots[i] = 1 + rand() % 6;
            total += slots[i];
        }
        hosts(slots, (size_t)nhosts);
        np = 1 + rand() % total;
        cr_assert_eq(hvd_plan_build(&plan, &hl, np), 0);
        check_against_reference(slots, nhosts, np);
    }
}

/*
 * Checks the invariants of a big plan in O(np): ranks grouped by host in
 * order, local ranks 0..local_size-1, and per local_rank the cross ranks
 * counting 0, 1, 2, ... in host order up to cross_size.
 */
static void check_invariants(int max_slots)
{
    int *next_cross = calloc((size_t)max_slots, sizeof(int));
    int i;

    cr_assert_not_null(next_cross);
    for (i = 0; i < plan.size; i++) {
        const struct hvd_slot *s = &plan.ranks[i];

        cr_assert_eq(s->rank, i);
        if (s->local_rank == 0) {
            cr_assert(i == 0 || s->host > plan.ranks[i - 1].host);
        } else {
            cr_assert_eq(s->host, plan.ranks[i - 1].host);
            cr_assert_eq(s->local_rank, plan.ranks[i - 1].local_rank + 1);
            cr_assert_eq(s->local_size, plan.ranks[i - 1].local_size);
        }
        cr_assert_lt(s->local_rank, s->local_size);
        cr_assert_eq(s->cross_rank, next_cross[s->local_rank]++);
    }
    for (i = 0; i < plan.size; i++) {
        const struct hvd_slot *s = &plan.ranks[i];

        cr_assert_eq(s->cross_size, next_cross[s->local_rank]);
    }
    free(next_cross);
}

Test(plan, large_np_one_slot_per_host)
{
    int n = 200000;
    char *spec = malloc((size_t)n * 10);
    size_t off = 0;
    char err[256];
    int i;

    /* hvd_hostlist_add scans the list; the spec parser indexes names. */
    cr_assert_not_null(spec);
    for (i = 0; i < n; i++)
        off += (size_t)sprintf(spec + off, "%sn%d", i ? "," : "", i);
    cr_assert_eq(hvd_hostlist_parse_spec(&hl, spec, err, sizeof(err)), 0, "%s",
                 err);
    free(spec);
    cr_assert_eq(hl.n, (size_t)n);
    cr_assert_eq(hvd_plan_build(&plan, &hl, n), 0);
    check_invariants(1);
    cr_assert_eq(plan.ranks[n - 1].host, n - 1);
    cr_assert_eq(plan.ranks[n - 1].cross_rank, n - 1);
    cr_assert_eq(plan.ranks[n - 1].cross_size, n);
    cr_assert_eq(plan.ranks[0].local_size, 1);
}

Test(plan, large_np_wide_hosts)
{
    /* 16 hosts of 8 slots, then one host of 65536: np = 128 + 60000. */
    int slots[17];
    int np = 128 + 60000;
    int i;

    for (i = 0; i < 16; i++)
        slots[i] = 8;
    slots[16] = HVD_MAX_SLOTS;
    hosts(slots, 17);
    cr_assert_eq(hvd_plan_build(&plan, &hl, np), 0);
    check_invariants(HVD_MAX_SLOTS);
    cr_assert_eq(hvd_plan_host_ranks(&plan, 16), 60000);
    cr_assert_eq(plan.ranks[np - 1].local_rank, 59999);
    cr_assert_eq(plan.ranks[np - 1].local_size, 60000);
    cr_assert_eq(plan.ranks[np - 1].cross_rank, 0);
    cr_assert_eq(plan.ranks[np - 1].cross_size, 1);
    /* local_rank 7 exists on all 17 hosts; local_rank 8 only on the last. */
    cr_assert_eq(plan.ranks[128 + 7].cross_rank, 16);
    cr_assert_eq(plan.ranks[128 + 7].cross_size, 17);
    cr_assert_eq(plan.ranks[128 + 8].cross_rank, 0);
    cr_assert_eq(plan.ranks[128 + 8].cross_size, 1);
    cr_assert_eq(plan.ranks[7].cross_size, 17);
}
