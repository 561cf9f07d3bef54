/* Unit tests of launcher/lib/bind.c: sharing a host's CPUs among its
 * ranks. */
#include <criterion/criterion.h>

#include "launcher/lib/bind.h"

/* Two packages of two cores of two hardware threads, numbered as Linux
 * does: CPUs 0-3 are the first thread of each core, 4-7 the second. */
static struct hr_cpu box[8] = {
    {0, 0, 0}, {4, 0, 0}, {1, 0, 1}, {5, 0, 1},
    {2, 1, 0}, {6, 1, 0}, {3, 1, 1}, {7, 1, 1},
};

/* The CPUs of rank local's share as a bit mask. */
static unsigned share(const struct hr_cpu *cpus, int n, int local, int size)
{
    cpu_set_t set;
    unsigned mask = 0;
    if (!hr_bind_share(cpus, n, local, size, &set))
        return 0;
    for (int c = 0; c < 32; c++)
        if (CPU_ISSET(c, &set))
            mask |= 1u << c;
    return mask;
}

Test(bind, whole_cores_never_split_between_ranks)
{
    /* Two ranks: a package each, both threads of its cores. */
    cr_expect_eq(share(box, 8, 0, 2), 0x33u); /* 0, 1, 4, 5 */
    cr_expect_eq(share(box, 8, 1, 2), 0xccu); /* 2, 3, 6, 7 */
    /* Four ranks: a core each. */
    cr_expect_eq(share(box, 8, 0, 4), 0x11u);
    cr_expect_eq(share(box, 8, 3, 4), 0x88u);
    /* Three ranks on four cores: the last takes the spare core. */
    cr_expect_eq(share(box, 8, 0, 3), 0x11u);
    cr_expect_eq(share(box, 8, 1, 3), 0x22u);
    cr_expect_eq(share(box, 8, 2, 3), 0xccu);
    /* One rank: everything. */
    cr_expect_eq(share(box, 8, 0, 1), 0xffu);
}

Test(bind, more_ranks_than_cores_take_single_cpus)
{
    /* Eight ranks on four cores: one hardware thread each. */
    unsigned all = 0;
    for (int r = 0; r < 8; r++) {
        unsigned m = share(box, 8, r, 8);
        cr_expect_eq(__builtin_popcount(m), 1, "rank %d", r);
        cr_expect_eq(all & m, 0u, "rank %d overlaps", r);
        all |= m;
    }
    cr_expect_eq(all, 0xffu);
}

Test(bind, more_ranks_than_cpus_are_not_bound)
{
    cpu_set_t set;
    cr_expect_eq(hr_bind_share(box, 8, 0, 9, &set), 0);
    cr_expect_eq(CPU_COUNT(&set), 0);
    cr_expect_eq(hr_bind_share(box, 8, 8, 8, &set), 0, "no rank 8 of 8");
}

Test(bind, this_host)
{
    struct hr_cpu *cpus;
    int n;
    cpu_set_t mine, set;
    cr_assert_eq(hr_bind_cpus(&cpus, &n), 0);
    cr_assert_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
    cr_expect_eq(n, CPU_COUNT(&mine));
    /* Sorted by place, and each a CPU this process may use. */
    for (int i = 0; i < n; i++) {
        cr_expect(CPU_ISSET(cpus[i].cpu, &mine));
        if (i > 0)
            cr_expect(cpus[i - 1].package < cpus[i].package ||
                      (cpus[i - 1].package == cpus[i].package &&
                       cpus[i - 1].core <= cpus[i].core));
    }
    /* One rank per CPU covers them all, once each. */
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int r = 0; r < n; r++) {
        cr_assert_eq(hr_bind_share(cpus, n, r, n, &set), 1);
        cr_expect_eq(CPU_COUNT(&set), 1);
        CPU_OR(&all, &all, &set);
    }
    cr_expect(CPU_EQUAL(&all, &mine));
    free(cpus);
}
