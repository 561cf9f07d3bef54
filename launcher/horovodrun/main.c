/* horovodrun: parse the command line, plan the ranks, run the job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/horovodrun/cli.h"
#include "launcher/horovodrun/client.h"
#include "launcher/horovodrun/detach.h"
#include "launcher/lib/clusterhosts.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/log.h"
#include "launcher/lib/plan.h"
#include "launcher/horovodrun/job.h"
#include "launcher/link/srun.h"

int main(int argc, char **argv)
{
    struct hr_opts o;
    struct hvd_hostlist hl;
    struct hvd_plan plan = {0};
    char err[512];
    struct hr_detach det;
    int rc;

    hvd_log_init("horovodrun", 0);
    /* horovodrun ps, logs, attach, stop: commands for detached jobs. */
    if (argc > 1 && hr_client_is_command(argv[1]))
        return hr_client_main(argc - 1, argv + 1);
    hvd_hostlist_init(&hl);
    rc = hr_cli_parse(&o, argc, argv, stdout, err, sizeof(err));
    for (size_t i = 0; i < o.warnings.n; i++)
        hvd_log_warn("%s", o.warnings.v[i]);
    if (rc == HR_CLI_DONE) {
        rc = 0;
        goto out;
    }
    if (rc == HR_CLI_USAGE) {
        hvd_log_error("%s", err);
        rc = HR_EXIT_USAGE;
        goto out;
    }
    hvd_log_init("horovodrun", o.verbose);
    /* Runtime tuning travels to the ranks in the environment, which they
     * inherit from horovodrun. */
    if (hr_cli_export_env(&o) != 0) {
        hvd_log_error("cannot set the ranks' environment: %s", strerror(errno));
        rc = HR_EXIT_INTERNAL;
        goto out;
    }

    /* Where the hosts come from, for --verbose and the max_slots note. */
    const char *src = "-H";
    const char *path = NULL;
    if (o.hosts) {
        rc = hvd_hostlist_parse_spec(&hl, o.hosts, err, sizeof(err));
    } else if (o.hostfile) {
        src = "--hostfile";
        path = o.hostfile;
        rc = hvd_hostlist_parse_file(&hl, path, err, sizeof(err));
    } else if ((src = hr_slurm_nodelist_var()) != NULL) {
        rc = hr_slurm_hosts(&hl, err, sizeof(err));
    } else if ((src = hvd_cluster_hosts_var()) != NULL) {
        path = hvd_cluster_var_is_file(src) ? getenv(src) : NULL;
        rc = hvd_cluster_hosts(&hl, src, err, sizeof(err));
    } else {
        src = "the default, this host";
        rc = hvd_hostlist_add(&hl, "localhost", o.np);
    }
    if (rc != 0) {
        hvd_log_error("%s", err);
        rc = HR_EXIT_USAGE;
        goto out;
    }
    if (hl.max_slots_line != 0)
        hvd_log_warn("%s:%lu: max_slots is ignored: horovodrun starts -np "
                     "ranks on the slots only",
                     path, hl.max_slots_line);
    hvd_log_info("hosts from %s%s%s%s: %zu host%s, %ld slots", src,
                 path ? " (" : "", path ? path : "", path ? ")" : "", hl.n,
                 hl.n == 1 ? "" : "s", hvd_hostlist_slots(&hl));
    /* Inside an allocation or a batch job: all of its slots. */
    if (o.np == 0)
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
        hvd_log_error("cannot plan %d ranks: %s", o.np, hr_err_str(rc));
        rc = HR_EXIT_INTERNAL;
        goto out;
    }
    if (o.detach && (rc = hr_detach_start(&o, &det)) >= 0)
        goto out; /* the first process: the job runs on */
    rc = hr_job_run(&o, &hl, &plan,
                    o.mpi ? &hr_launch_mpirun : &hr_launch_agents,
                    o.detach ? &det : NULL);
out:
    hvd_plan_close(&plan);
    hvd_hostlist_close(&hl);
    hr_opts_close(&o);
    return rc;
}
