/* Unit tests for launcher/lib/blacklist.c: failed hosts and cooldowns. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "launcher/lib/blacklist.h"
#include "launcher/lib/errcode.h"

static struct hr_blacklist bl;
static struct hvd_hostlist found;
static struct hvd_hostlist avail;

static void setup(void)
{
    hr_blacklist_init(&bl);
    hvd_hostlist_init(&found);
    hvd_hostlist_init(&avail);
    cr_assert_eq(hvd_hostlist_add(&found, "a", 2), 0);
    cr_assert_eq(hvd_hostlist_add(&found, "b", 2), 0);
    cr_assert_eq(hvd_hostlist_add(&found, "c", 1), 0);
}

static void teardown(void)
{
    hr_blacklist_close(&bl);
    hvd_hostlist_close(&found);
    hvd_hostlist_close(&avail);
}

TestSuite(blacklist, .init = setup, .fini = teardown);

/* Filters found at now_ms and checks the names, "a,c". */
static void expect_avail(uint64_t now_ms, const char *want, int want_back)
{
    char got[64] = "";
    int back = -1;
    size_t i;

    hvd_hostlist_close(&avail);
    cr_assert_eq(hr_blacklist_filter(&bl, &found, now_ms, &avail, &back), 0);
    for (i = 0; i < avail.n; i++) {
        if (i)
            strcat(got, ",");
        strcat(got, avail.hosts[i].name);
    }
    cr_assert_str_eq(got, want);
    cr_assert_eq(back, want_back);
}

/* Without a range a failed host is out for the rest of the job. */
Test(blacklist, forever_without_range)
{
    uint64_t until = 1;

    cr_assert_eq(hr_blacklist_add(&bl, "b", 1000, 0.5, &until), 0);
    cr_assert_eq(until, 0);
    cr_assert(hr_blacklist_has(&bl, "b"));
    cr_assert_not(hr_blacklist_has(&bl, "a"));
    expect_avail(1000, "a,c", 0);
    expect_avail(UINT64_MAX, "a,c", 0);
    cr_assert_not(hr_blacklist_resurrected(&bl, "b", UINT64_MAX));
    cr_assert(hr_blacklist_has(&bl, "b"));
}

/* Horovod's test_blacklist_host: the blacklisted host leaves the list. */
Test(blacklist, horovod_blacklist_host)
{
    expect_avail(0, "a,b,c", 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 0, NULL), 0);
    expect_avail(0, "b,c", 0);
    cr_assert_eq(hvd_hostlist_slots(&avail), 3);
}

/* The n-th cooldown is MIN * 2^n + u * MIN, capped at MAX. */
Test(blacklist, cooldown_formula)
{
    uint64_t now = 5000;
    uint64_t until = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 10, 100), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "b", now, 0.0, &until), 0);
    cr_assert_eq(until, now + 20000);
    now = until;
    cr_assert_eq(hr_blacklist_add(&bl, "b", now, 0.5, &until), 0);
    cr_assert_eq(until, now + 45000);
    now = until;
    cr_assert_eq(hr_blacklist_add(&bl, "b", now, 0.25, &until), 0);
    cr_assert_eq(until, now + 82500);
    now = until;
    cr_assert_eq(hr_blacklist_add(&bl, "b", now, 0.0, &until), 0);
    cr_assert_eq(until, now + 100000);
    cr_assert_eq(bl.hosts[0].failures, 4);
}

Test(blacklist, jitter_is_a_fraction_of_min)
{
    uint64_t until = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 60, 300), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 0.75, &until), 0);
    cr_assert_eq(until, 165000);
}

/* Failures while a host cools down are part of the same failure. */
Test(blacklist, failures_during_cooldown_add_nothing)
{
    uint64_t until = 0;
    uint64_t again = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 10, 100), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 0.0, &until), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 1000, 0.9, &again), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", until - 1, 0.9, &again), 0);
    cr_assert_eq(again, until);
    cr_assert_eq(bl.n, 1);
    cr_assert_eq(bl.hosts[0].failures, 1);
}

/* Horovod bug #1926: with a range, a host (or its namesake) comes back. */
Test(blacklist, resurrection)
{
    uint64_t until = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 10), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "b", 0, 0.0, &until), 0);
    cr_assert_eq(until, 2000);
    expect_avail(1999, "a,c", 0);
    cr_assert_not(hr_blacklist_resurrected(&bl, "b", 1999));
    cr_assert(hr_blacklist_resurrected(&bl, "b", 2000));
    /* Until a discovery lists it again, it stays blacklisted. */
    cr_assert(hr_blacklist_has(&bl, "b"));
    expect_avail(2000, "a,b,c", 1);
    cr_assert_not(hr_blacklist_has(&bl, "b"));
    cr_assert_not(hr_blacklist_resurrected(&bl, "b", 2000));
    expect_avail(2001, "a,b,c", 0);
    /* The count stays: the next failure costs twice as much. */
    cr_assert_eq(hr_blacklist_add(&bl, "b", 3000, 0.0, &until), 0);
    cr_assert_eq(until, 7000);
}

Test(blacklist, resurrected_but_not_discovered)
{
    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 10), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "z", 0, 0.0, NULL), 0);
    expect_avail(5000, "a,b,c", 0);
    cr_assert(hr_blacklist_has(&bl, "z"));
    cr_assert_eq(hvd_hostlist_add(&found, "z", 1), 0);
    expect_avail(5000, "a,b,c,z", 1);
    cr_assert_not(hr_blacklist_has(&bl, "z"));
}

/* A failure after the cooldown ended, before any discovery took the host
 * back, starts the next cooldown, as in Horovod. */
Test(blacklist, failure_after_cooldown_before_discovery)
{
    uint64_t until = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 100), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 0.0, &until), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 2500, 0.0, &until), 0);
    cr_assert_eq(until, 6500);
    expect_avail(3000, "b,c", 0);
}

/* Horovod lets MIN win over a smaller MAX. */
Test(blacklist, upside_down_range)
{
    uint64_t until = 0;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 30, 10), 0);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 0.9, &until), 0);
    cr_assert_eq(until, 30000);
    cr_assert_eq(hr_blacklist_add(&bl, "a", until, 0.9, &until), 0);
    cr_assert_eq(until, 60000);
}

Test(blacklist, many_failures_stay_capped)
{
    uint64_t now = 0;
    uint64_t until = 0;
    int i;

    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 3600), 0);
    for (i = 0; i < 200; i++) {
        now = until;
        cr_assert_eq(hr_blacklist_add(&bl, "a", now, 0.5, &until), 0);
        cr_assert_leq(until - now, 3600000);
    }
    cr_assert_eq(until - now, 3600000);
    cr_assert_eq(bl.hosts[0].failures, 200);
}

Test(blacklist, range_limits)
{
    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 0, 10), HVD_ERANGE);
    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 3601), HVD_ERANGE);
    cr_assert_eq(hr_blacklist_set_cooldown(&bl, 1, 3600), 0);
    cr_assert_eq(hr_blacklist_set_cooldown(NULL, 1, 10), HVD_EINVAL);
}

Test(blacklist, bad_arguments)
{
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, -0.1, NULL), HVD_EINVAL);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, 1.0, NULL), HVD_EINVAL);
    cr_assert_eq(hr_blacklist_add(&bl, "a", 0, NAN, NULL), HVD_EINVAL);
    cr_assert_eq(hr_blacklist_add(&bl, "", 0, 0, NULL), HVD_EINVAL);
    cr_assert_eq(hr_blacklist_add(&bl, NULL, 0, 0, NULL), HVD_EINVAL);
    cr_assert_eq(hr_blacklist_add(NULL, "a", 0, 0, NULL), HVD_EINVAL);
    cr_assert_eq(bl.n, 0);
    cr_assert_not(hr_blacklist_has(NULL, "a"));
    cr_assert_not(hr_blacklist_has(&bl, NULL));
    /* avail must start empty. */
    cr_assert_eq(hvd_hostlist_add(&avail, "x", 1), 0);
    cr_assert_eq(hr_blacklist_filter(&bl, &found, 0, &avail, NULL), HVD_EINVAL);
    hr_blacklist_close(NULL);
}

Test(blacklist, many_hosts)
{
    char name[16];
    int i;

    for (i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "h%d", i);
        cr_assert_eq(hr_blacklist_add(&bl, name, 0, 0, NULL), 0);
    }
    cr_assert_eq(bl.n, 100);
    cr_assert(hr_blacklist_has(&bl, "h0"));
    cr_assert(hr_blacklist_has(&bl, "h99"));
    hr_blacklist_close(&bl);
    cr_assert_eq(bl.n, 0);
    cr_assert_not(hr_blacklist_has(&bl, "h0"));
}
