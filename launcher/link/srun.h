/* Slurm allocations for horovodrun: hosts from SLURM_*, srun agent argv. */
#ifndef HR_SRUN_H
#define HR_SRUN_H

#include <stddef.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/strvec.h"

/* The node list variable of this process's allocation (SLURM_JOB_NODELIST,
 * else the older SLURM_NODELIST), or NULL outside an allocation. */
const char *hr_slurm_nodelist_var(void);

/*
 * Appends the allocation's hosts to hl, each with its SLURM_TASKS_PER_NODE
 * count as slots (one slot each when that is unset). Returns 0, or a
 * negative code with one line in err that names the faulty variable.
 */
int hr_slurm_hosts(struct hvd_hostlist *hl, char *err, size_t errlen);

/*
 * Fills argv (empty) with the srun command that starts agent on host as a
 * one-task job step: srun --nodes=1 --ntasks=1 --nodelist=HOST ... AGENT.
 * srun is the resolved path of srun. Returns 0 or HVD_ENOMEM.
 */
int hr_srun_argv(struct hvd_strvec *argv, const char *srun, const char *host,
                 const char *agent);

#endif
