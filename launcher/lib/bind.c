/* Sharing a host's CPUs among its ranks: whole cores to each rank, so that
 * a rank's threads and the data loaders it starts stay on its share and
 * two ranks never share a core's hardware threads. */
#include "launcher/lib/bind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* An integer from a sysfs topology file of cpu, or fallback. */
static int topo(int cpu, const char *what, int fallback)
{
    char path[96];
    int v = fallback;
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/%s",
             cpu, what);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return fallback;
    if (fscanf(f, "%d", &v) != 1)
        v = fallback;
    fclose(f);
    return v;
}

static int by_place(const void *pa, const void *pb)
{
    const struct hr_cpu *a = pa, *b = pb;
    if (a->package != b->package)
        return a->package < b->package ? -1 : 1;
    if (a->core != b->core)
        return a->core < b->core ? -1 : 1;
    return (a->cpu > b->cpu) - (a->cpu < b->cpu);
}

int hr_bind_cpus(struct hr_cpu **out, int *n)
{
    cpu_set_t mine;
    *out = NULL;
    *n = 0;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
        return errno;
    int count = CPU_COUNT(&mine);
    struct hr_cpu *c = calloc((size_t)count + 1, sizeof(*c));
    if (c == NULL)
        return ENOMEM;
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < count; cpu++) {
        if (!CPU_ISSET(cpu, &mine))
            continue;
        c[k].cpu = cpu;
        c[k].package = topo(cpu, "physical_package_id", -1);
        c[k].core = topo(cpu, "core_id", cpu);
        k++;
    }
    qsort(c, (size_t)count, sizeof(*c), by_place);
    *out = c;
    *n = count;
    return 0;
}

/* Whether cpus[i] starts a new core (the list is sorted by place). */
static int new_core(const struct hr_cpu *cpus, int i)
{
    return i == 0 || cpus[i - 1].package != cpus[i].package ||
           cpus[i - 1].core != cpus[i].core;
}

/* Index of the first CPU of unit u (a core when whole, else a CPU), or n
 * when u is past the last. */
static int unit_start(const struct hr_cpu *cpus, int n, int whole, int u)
{
    for (int i = 0, seen = 0; i < n; i++)
        if ((!whole || new_core(cpus, i)) && seen++ == u)
            return i;
    return n;
}

int hr_bind_share(const struct hr_cpu *cpus, int n, int local, int local_size,
                  cpu_set_t *set)
{
    CPU_ZERO(set);
    if (local_size < 1 || local < 0 || local >= local_size || n < local_size)
        return 0;
    int cores = 0;
    for (int i = 0; i < n; i++)
        cores += new_core(cpus, i);
    int whole = cores >= local_size;
    int units = whole ? cores : n;
    /* Rank r gets units [r * units / size, (r + 1) * units / size). */
    int lo = (int)((long)local * units / local_size);
    int hi = (int)((long)(local + 1) * units / local_size);
    int from = unit_start(cpus, n, whole, lo);
    int to = unit_start(cpus, n, whole, hi);
    for (int i = from; i < to; i++)
        CPU_SET(cpus[i].cpu, set);
    return 1;
}
