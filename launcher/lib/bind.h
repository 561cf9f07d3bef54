/* Sharing a host's CPUs among its ranks (horovodrun --bind-to auto). */
#ifndef HR_BIND_H
#define HR_BIND_H

#include <sched.h>

/* How ranks are bound to CPUs (--bind-to). */
enum hr_bind {
    HR_BIND_NONE = 0, /* not at all, as Horovod's horovodrun */
    HR_BIND_AUTO = 1  /* an equal share of the host's cores each */
};

/* One logical CPU and where it sits. */
struct hr_cpu {
    int cpu;     /* its number */
    int package; /* physical_package_id, or -1 */
    int core;    /* core_id, or the CPU's number when unknown */
};

/*
 * The CPUs this process may run on, with their package and core from
 * sysfs, sorted by package, core, then number, so that a core's hardware
 * threads sit side by side. *out is malloc()ed (free it). Returns 0, or
 * a positive errno.
 */
int hr_bind_cpus(struct hr_cpu **out, int *n);

/*
 * The share of rank `local` among local_size ranks, consecutive in the
 * order of hr_bind_cpus: whole cores, as many to each rank as they go
 * (the remainder to the last ranks, one each), when there are at least
 * local_size cores; else single CPUs the same way. Returns 1 with set
 * filled, or 0 (set empty) when there are fewer CPUs than ranks and
 * nothing should be bound.
 */
int hr_bind_share(const struct hr_cpu *cpus, int n, int local, int local_size,
                  cpu_set_t *set);

#endif
