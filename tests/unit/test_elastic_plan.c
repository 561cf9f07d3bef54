/* Unit tests for launcher/lib/elastic_plan.c: elastic reassignment. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "launcher/lib/blacklist.h"
#include "launcher/lib/discovery.h"
#include "launcher/lib/elastic_plan.h"
#include "launcher/lib/errcode.h"

static struct hr_eplan prev;
static struct hr_eplan next;
static struct hvd_hostlist avail;
static char err[256];

static void setup(void)
{
    hr_eplan_init(&prev);
    hr_eplan_init(&next);
    hvd_hostlist_init(&avail);
    err[0] = '\0';
}

static void teardown(void)
{
    hr_eplan_close(&prev);
    hr_eplan_close(&next);
    hvd_hostlist_close(&avail);
}

TestSuite(elastic_plan, .init = setup, .fini = teardown);

/* Plans next from prev for the hosts of spec ("a:2,b:2"). */
static int step(const char *spec, int min_np, int max_np)
{
    hvd_hostlist_close(&avail);
    hr_eplan_close(&next);
    cr_assert_eq(hvd_hostlist_parse_spec(&avail, spec, NULL, 0), 0);
    return hr_eplan_next(&next, prev.plan.size ? &prev : NULL, &avail, min_np,
                         max_np, err, sizeof(err));
}

/* Makes next the previous plan. */
static void advance(void)
{
    hr_eplan_close(&prev);
    prev = next;
    hr_eplan_init(&next);
}

/*
 * Checks next's ranks against "a0 a1 b0", each host and local rank in rank
 * order, and prev_rank against "0 1 -", where '-' is a new process.
 */
static void expect(const char *ranks, const char *prevs)
{
    char got[512] = "";
    char gotp[512] = "";
    size_t used = 0;
    size_t usedp = 0;
    int r;

    for (r = 0; r < next.plan.size; r++) {
        const struct hvd_slot *s = &next.plan.ranks[r];

        cr_assert_eq(s->rank, r);
        used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%s%d",
                                 r ? " " : "", next.hosts.hosts[s->host].name,
                                 s->local_rank);
        if (next.prev_rank[r] < 0)
            usedp += (size_t)snprintf(gotp + usedp, sizeof(gotp) - usedp, "%s-",
                                      r ? " " : "");
        else
            usedp += (size_t)snprintf(gotp + usedp, sizeof(gotp) - usedp,
                                      "%s%d", r ? " " : "", next.prev_rank[r]);
    }
    cr_assert_str_eq(got, ranks);
    cr_assert_str_eq(gotp, prevs);
}

/* Checks the removed ranks against "2 3". */
static void expect_removed(const char *want)
{
    char got[256] = "";
    size_t used = 0;
    int i;

    for (i = 0; i < next.nremoved; i++)
        used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%d",
                                 i ? " " : "", next.removed[i]);
    cr_assert_str_eq(got, want);
}

/* Checks next's host order against "a,b,c". */
static void expect_order(const char *want)
{
    char got[256] = "";
    size_t i;

    for (i = 0; i < next.hosts.n; i++) {
        if (i)
            strcat(got, ",");
        strcat(got, next.hosts.hosts[i].name);
    }
    cr_assert_str_eq(got, want);
}

Test(elastic_plan, first_assignment)
{
    cr_assert_eq(step("a:2,b:2", 2, 4), 0, "%s", err);
    expect("a0 a1 b0 b1", "- - - -");
    cr_assert_eq(next.nnew, 4);
    cr_assert_eq(next.nkept, 0);
    cr_assert_eq(next.nremoved, 0);
    cr_assert_not(hr_eplan_unchanged(&next));
}

/* Horovod's test_rank_and_size_with_host_failure. */
Test(elastic_plan, host_failure)
{
    int r;

    cr_assert_eq(step("a:2,b:2", 2, 4), 0);
    advance();
    cr_assert_eq(step("a:2", 2, 4), 0, "%s", err);
    expect("a0 a1", "0 1");
    expect_removed("2 3");
    cr_assert_eq(next.nkept, 2);
    cr_assert_eq(next.nnew, 0);
    for (r = 0; r < 2; r++) {
        cr_assert_eq(next.plan.ranks[r].local_size, 2);
        cr_assert_eq(next.plan.ranks[r].cross_rank, 0);
        cr_assert_eq(next.plan.ranks[r].cross_size, 1);
    }
}

/* Horovod's test_rank_and_size_with_host_added: survivors keep ranks. */
Test(elastic_plan, host_added)
{
    int r;

    cr_assert_eq(step("a:2", 2, 4), 0);
    advance();
    cr_assert_eq(step("a:2,b:2", 2, 4), 0, "%s", err);
    expect("a0 a1 b0 b1", "0 1 - -");
    expect_removed("");
    cr_assert_eq(next.nnew, 2);
    for (r = 0; r < 4; r++)
        cr_assert_eq(next.plan.ranks[r].cross_size, 2);
    cr_assert_eq(next.plan.ranks[2].cross_rank, 1);
}

/* Horovod's test_order_available_hosts: relative order is kept. */
Test(elastic_plan, order_kept)
{
    cr_assert_eq(step("a:1,b:1,c:1", 1, 0), 0);
    expect_order("a,b,c");
    advance();
    cr_assert_eq(step("d:1,c:1,b:1", 1, 0), 0, "%s", err);
    expect_order("b,c,d");
    expect("b0 c0 d0", "1 2 -");
    expect_removed("0");
}

/* Rank 0, the state's source, moves to the oldest surviving host. */
Test(elastic_plan, rank0_on_oldest_survivor)
{
    cr_assert_eq(step("a:2,b:2,c:2", 2, 0), 0);
    advance();
    cr_assert_eq(step("n:2,c:2,b:2", 2, 0), 0, "%s", err);
    expect("b0 b1 c0 c1 n0 n1", "2 3 4 5 - -");
    expect_removed("0 1");
}

/* A host that comes back, from a blacklist say, goes to the end. */
Test(elastic_plan, returning_host_is_new)
{
    cr_assert_eq(step("a:1,b:1", 1, 0), 0);
    advance();
    cr_assert_eq(step("b:1", 1, 0), 0);
    advance();
    cr_assert_eq(step("a:1,b:1", 1, 0), 0, "%s", err);
    expect("b0 a0", "0 -");
}

Test(elastic_plan, max_np_caps)
{
    cr_assert_eq(step("a:4,b:4", 2, 6), 0);
    expect("a0 a1 a2 a3 b0 b1", "- - - - - -");
    /* Hosts without ranks keep their place for later changes. */
    expect_order("a,b");
    cr_assert_eq(next.hosts.hosts[1].slots, 4);
    advance();
    cr_assert_eq(step("a:4,b:4", 2, 6), 0);
    cr_assert(hr_eplan_unchanged(&next));
    advance();
    /* A host beyond --max-np changes nothing: no reset. */
    cr_assert_eq(step("a:4,c:4,b:4", 2, 6), 0);
    cr_assert(hr_eplan_unchanged(&next));
    expect_order("a,b,c");
    advance();
    /* When a fails, b's spare slots and then c's fill in. */
    cr_assert_eq(step("c:4,b:4", 2, 6), 0, "%s", err);
    expect("b0 b1 b2 b3 c0 c1", "4 5 - - - -");
    expect_removed("0 1 2 3");
}

Test(elastic_plan, no_max_means_every_slot)
{
    cr_assert_eq(step("a:3,b:5", 1, 0), 0);
    cr_assert_eq(next.plan.size, 8);
    cr_assert_eq(step("a:3,b:5", 1, -1), 0);
    cr_assert_eq(next.plan.size, 8);
}

Test(elastic_plan, not_enough_slots)
{
    cr_assert_eq(step("a:2,b:2", 4, 8), 0);
    advance();
    cr_assert_eq(step("a:2,c:1", 4, 8), HVD_ENOSLOTS);
    cr_assert_not_null(strstr(err, "3 slots"), "%s", err);
    cr_assert_not_null(strstr(err, "4 processes"), "%s", err);
    cr_assert_eq(next.plan.size, 0);
    cr_assert_eq(next.hosts.n, 0);
    cr_assert_null(next.prev_rank);
    /* prev is untouched, so the caller retries at the next discovery. */
    cr_assert_eq(prev.plan.size, 4);
    cr_assert_eq(step("a:2,c:2", 4, 8), 0, "%s", err);
    expect("a0 a1 c0 c1", "0 1 - -");
}

Test(elastic_plan, slots_shrink)
{
    cr_assert_eq(step("a:4,b:1", 1, 0), 0);
    advance();
    cr_assert_eq(step("a:2,b:1", 1, 0), 0);
    expect("a0 a1 b0", "0 1 4");
    expect_removed("2 3");
    cr_assert_eq(next.plan.ranks[0].local_size, 2);
}

/* New slots on a surviving host start processes; later ranks shift. */
Test(elastic_plan, slots_grow)
{
    cr_assert_eq(step("a:2,b:2", 1, 0), 0);
    advance();
    cr_assert_eq(step("a:4,b:2", 1, 0), 0);
    expect("a0 a1 a2 a3 b0 b1", "0 1 - - 2 3");
    expect_removed("");
    cr_assert_eq(next.nnew, 2);
    cr_assert_eq(next.nkept, 4);
    cr_assert_not(hr_eplan_unchanged(&next));
}

/* Horovod stops when no previous host is left to broadcast the state. */
Test(elastic_plan, no_survivor)
{
    cr_assert_eq(step("a:2", 1, 0), 0);
    advance();
    cr_assert_eq(step("b:2,c:2", 1, 0), HVD_EPEER);
    cr_assert_not_null(strstr(err, "state"), "%s", err);
    cr_assert_eq(next.plan.size, 0);
}

/* A host that had no rank under --max-np holds no state either. */
Test(elastic_plan, rankless_survivor_is_no_survivor)
{
    cr_assert_eq(step("a:2,b:2", 1, 2), 0);
    advance();
    cr_assert_eq(step("b:2", 1, 2), HVD_EPEER);
}

/* Local and cross values come from the fixed plan's rules. */
Test(elastic_plan, cross_ranks)
{
    cr_assert_eq(step("a:2,b:1", 1, 0), 0);
    advance();
    cr_assert_eq(step("b:1,a:2,c:2", 1, 0), 0);
    expect("a0 a1 b0 c0 c1", "0 1 2 - -");
    cr_assert_eq(next.plan.ranks[2].cross_rank, 1);
    cr_assert_eq(next.plan.ranks[2].cross_size, 3);
    cr_assert_eq(next.plan.ranks[4].cross_rank, 1);
    cr_assert_eq(next.plan.ranks[4].cross_size, 2);
    cr_assert_eq(next.plan.ranks[2].local_size, 1);
    cr_assert_eq(next.plan.ranks[3].local_size, 2);
}

Test(elastic_plan, bad_arguments)
{
    cr_assert_eq(hvd_hostlist_add(&avail, "a", 1), 0);
    cr_assert_eq(hr_eplan_next(&next, NULL, &avail, 0, 0, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_eplan_next(NULL, NULL, &avail, 1, 0, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_eplan_next(&next, NULL, NULL, 1, 0, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_eplan_next(&next, NULL, &avail, 1, 0, err, sizeof(err)), 0);
    /* next must be empty. */
    cr_assert_eq(hr_eplan_next(&next, NULL, &avail, 1, 0, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(next.plan.size, 1);
    cr_assert_not(hr_eplan_unchanged(NULL));
    hr_eplan_close(NULL);
}

/* Discovery, blacklist and plan together, as the controller will run them. */
Test(elastic_plan, with_discovery_and_blacklist)
{
    static const char out[] = "a:2\nb:2\nc\n";
    struct hvd_hostlist found;
    struct hr_blacklist bl;

    hvd_hostlist_init(&found);
    hr_blacklist_init(&bl);
    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 10), 0);
    cr_assert_eq(
        hr_discovery_parse(&found, out, sizeof(out) - 1, 2, err, sizeof(err)),
        0);
    cr_assert_eq(hr_blacklist_filter(&bl, &found, 0, &avail, NULL), 0);
    cr_assert_eq(hr_eplan_next(&next, NULL, &avail, 4, 5, err, sizeof(err)), 0);
    expect("a0 a1 b0 b1 c0", "- - - - -");
    advance();

    /* a's rank fails: a is blacklisted and the job goes on without it. */
    cr_assert_eq(hr_blacklist_add(&bl, "a", 100, 0.0, NULL), 0);
    hvd_hostlist_close(&avail);
    cr_assert_eq(hr_blacklist_filter(&bl, &found, 200, &avail, NULL), 0);
    cr_assert_eq(hr_eplan_next(&next, &prev, &avail, 2, 5, err, sizeof(err)),
                 0);
    expect("b0 b1 c0 c1", "2 3 4 -");
    expect_removed("0 1");
    advance();

    /* After its cooldown a is back, last in the order. */
    hvd_hostlist_close(&avail);
    cr_assert_eq(hr_blacklist_filter(&bl, &found, 2100, &avail, NULL), 0);
    cr_assert_eq(hr_eplan_next(&next, &prev, &avail, 2, 5, err, sizeof(err)),
                 0);
    expect("b0 b1 c0 c1 a0", "0 1 2 3 -");

    hvd_hostlist_close(&found);
    hr_blacklist_close(&bl);
}
