/* horovodrun: parse the command line, plan the ranks, run the job. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "common/hostspec.h"
#include "common/envc.h"
#include "common/hvd_err.h"
#include "common/log.h"
#include "common/plan.h"
#include "job.h"
#include "mpirun.h"
#include "srun.h"

int main(int argc, char **argv)
{
    struct hr_opts o;
    struct hvd_hostlist hl;
    struct hvd_plan plan = {0};
    char err[512];
    int rc;

    hvd_log_init("horovodrun", 0);
    hvd_hostlist_init(&hl);
    rc = hr_cli_parse(&o, argc, argv, stdout, err, sizeof(err));
    if (rc == HR_CLI_DONE)
        return 0;
    if (rc == HR_CLI_USAGE) {
        hvd_log_error("%s", err);
        return HR_EXIT_USAGE;
    }
    hvd_log_init("horovodrun", o.verbose);
    /* Runtime tuning travels to the ranks in the environment, which they
     * inherit from horovodrun. */
    if (o.fusion_threshold_mb) {
        char bytes[32];
        snprintf(bytes, sizeof(bytes), "%.0f",
                 atof(o.fusion_threshold_mb) * 1024 * 1024);
        setenv(HVD_ENV_FUSION_THRESHOLD, bytes, 1);
    }
    if (o.cycle_time_ms)
        setenv(HVD_ENV_CYCLE_TIME, o.cycle_time_ms, 1);
    if (o.cache_capacity)
        setenv(HVD_ENV_CACHE_CAPACITY, o.cache_capacity, 1);
    if (o.stall_warn_s)
        setenv(HVD_ENV_STALL_WARN, o.stall_warn_s, 1);
    if (o.stall_shutdown_s)
        setenv(HVD_ENV_STALL_SHUTDOWN, o.stall_shutdown_s, 1);
    if (o.no_stall_check)
        setenv(HVD_ENV_STALL_DISABLE, "1", 1);
    if (o.timeline)
        setenv(HVD_ENV_TIMELINE, o.timeline, 1);
    if (o.timeline_mark_cycles)
        setenv(HVD_ENV_TIMELINE_MARK_CYCLES, "1", 1);
    if (o.hierarchical)
        setenv(HVD_ENV_HIERARCHICAL_ALLREDUCE, o.hierarchical, 1);
    if (o.log_level)
        setenv(HVD_ENV_LOG_LEVEL, o.log_level, 1);

    if (o.hosts)
        rc = hvd_hostlist_parse_spec(&hl, o.hosts, err, sizeof(err));
    else if (o.hostfile)
        rc = hvd_hostlist_parse_file(&hl, o.hostfile, err, sizeof(err));
    else if (hr_slurm_nodelist_var() != NULL)
        rc = hr_slurm_hosts(&hl, err, sizeof(err));
    else
        rc = hvd_hostlist_add(&hl, "localhost", o.np);
    if (rc != 0) {
        hvd_log_error("%s", err);
        rc = HR_EXIT_USAGE;
        goto out;
    }
    if (o.np == 0) /* inside a Slurm allocation: all of its tasks */
        o.np = (int)hvd_hostlist_slots(&hl);
    rc = hvd_plan_build(&plan, &hl, o.np);
    if (rc == HVD_ENOSLOTS) {
        hvd_log_error("-np %d is more than the %ld slots in the host list; "
                      "lower -np or add slots",
                      o.np, hvd_hostlist_slots(&hl));
        rc = HR_EXIT_USAGE;
        goto out;
    }
    if (rc != 0) {
        hvd_log_error("cannot plan %d ranks: %s", o.np, hvd_strerror(rc));
        rc = HR_EXIT_INTERNAL;
        goto out;
    }
    rc = o.mpi ? hr_mpirun_run(&o, &hl, &plan) : hr_job_run(&o, &hl, &plan);
out:
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
    return rc;
}
