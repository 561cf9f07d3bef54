/* horovodrun --mpi: the job run by Open MPI's mpirun instead of agents. */
#ifndef HR_MPIRUN_H
#define HR_MPIRUN_H

#include "launcher/horovodrun/cli.h"
#include "launcher/lib/hostspec.h"
#include "launcher/lib/plan.h"

/*
 * Runs the job with mpirun: every rank inside hvd-mpi-rank, whose records
 * (mpiwire.h) give horovodrun the ranks' lines, places and exit statuses,
 * so that output, the failure summary and the exit code are those of
 * horovodrun's own launcher. Returns horovodrun's exit code; 2 when there
 * is no mpirun on PATH. With d (--detach), the job serves its control
 * socket (serve.h).
 */
struct hr_detach;

int hr_mpirun_run(const struct hr_opts *o, const struct hvd_hostlist *hosts,
                  const struct hvd_plan *plan, struct hr_detach *d);

#endif
