/* Slurm allocations for horovodrun: hosts from SLURM_*, srun agent argv. */
#include <stdlib.h>

#include "common/envc.h"
#include "launcher/lib/errmsg.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/slurm.h"
#include "launcher/link/srun.h"

const char *hr_slurm_nodelist_var(void)
{
    if (getenv(HVD_ENV_SLURM_JOB_NODELIST) != NULL)
        return HVD_ENV_SLURM_JOB_NODELIST;
    if (getenv(HVD_ENV_SLURM_NODELIST) != NULL)
        return HVD_ENV_SLURM_NODELIST;
    return NULL;
}

int hr_slurm_hosts(struct hvd_hostlist *hl, char *err, size_t errlen)
{
    const char *var = hr_slurm_nodelist_var();
    const char *nodes = var ? getenv(var) : NULL;
    const char *tasks = getenv(HVD_ENV_SLURM_TASKS_PER_NODE);
    struct hvd_strvec names;
    struct hvd_slurm_tasks t;
    char why[400];
    int rc;

    if (nodes == NULL) {
        hvd_seterr(err, errlen, "not inside a Slurm allocation");
        return HVD_EINVAL;
    }
    /* Each variable alone first, so that the message names the culprit. */
    hvd_strvec_init(&names);
    hvd_slurm_tasks_init(&t);
    rc = hvd_slurm_expand(&names, nodes, why, sizeof(why));
    if (rc != 0) {
        hvd_seterr(err, errlen, "%s: %s", var, why);
        goto out;
    }
    if (tasks != NULL) {
        rc = hvd_slurm_tasks_parse(&t, tasks, why, sizeof(why));
        if (rc != 0) {
            hvd_seterr(err, errlen, "%s: %s", HVD_ENV_SLURM_TASKS_PER_NODE,
                       why);
            goto out;
        }
    }
    rc = hvd_slurm_hostlist_parsed(hl, &names, tasks ? &t : NULL, tasks, why,
                                   sizeof(why));
    if (rc == HVD_EPARSE)
        hvd_seterr(err, errlen, "%s and %s disagree: %s", var,
                   HVD_ENV_SLURM_TASKS_PER_NODE, why);
    else if (rc != 0)
        hvd_seterr(err, errlen, "%s: %s", var, why);
out:
    hvd_strvec_close(&names);
    hvd_slurm_tasks_close(&t);
    return rc;
}

int hr_srun_argv(struct hvd_strvec *argv, const char *srun, const char *host,
                 const char *agent)
{
    /* One task on the host; the step gets the whole node (the agent forks
     * every rank there) with no CPU binding, horovodrun's environment, and
     * dies as a whole when the agent fails. Unbuffered: slurmstepd would
     * otherwise hold the agent's binary frames back until a newline byte. */
    if (hvd_strvec_push(argv, srun) != 0 ||
        hvd_strvec_push(argv, "--nodes=1") != 0 ||
        hvd_strvec_push(argv, "--ntasks=1") != 0 ||
        hvd_strvec_pushf(argv, "--nodelist=%s", host) != 0 ||
        hvd_strvec_push(argv, "--export=ALL") != 0 ||
        hvd_strvec_push(argv, "--kill-on-bad-exit=1") != 0 ||
        hvd_strvec_push(argv, "--whole") != 0 ||
        hvd_strvec_push(argv, "--overlap") != 0 ||
        hvd_strvec_push(argv, "--cpu-bind=none") != 0 ||
        hvd_strvec_push(argv, "--unbuffered") != 0 ||
        hvd_strvec_push(argv, "--job-name=hvd-agent") != 0 ||
        hvd_strvec_push(argv, agent) != 0)
        return HVD_ENOMEM;
    return 0;
}
