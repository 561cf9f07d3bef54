/* An elastic job's controller: hosts found, failures, resets, new ranks. */
#ifndef HR_ELASTIC_H
#define HR_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/lib/env.h"
#include "launcher/lib/strvec.h"

struct hr_elastic;
struct hr_job;

/*
 * Horovod's elastic driver, on horovodrun's loop, for the agents launch
 * (launch_agents.c). Each process gets an id that it keeps for its life,
 * and the agent protocol, job->plan (one entry per process, .rank its rank
 * now) and the output speak of processes by id. The controller
 *
 * - runs the host discovery (--host-discovery-script every second, or the
 *   fixed hosts of -H/--hostfile) and waits for -np slots, then for
 *   --min-np after each change, up to --elastic-timeout;
 * - assigns ranks (elastic_plan.h: surviving hosts first, new ones
 *   appended), starts processes only for new slots and stops those of
 *   removed slots, and hands each generation its plan (hr_rdv_form);
 * - counts, as Horovod's worker registry does, every process of the
 *   current assignment once it registered again (a reset) or ended: then
 *   a success ends the job, failures blacklist their hosts (blacklist.h)
 *   and the job resets, unless every rank failed, every host is
 *   blacklisted or --reset-limit is reached;
 * - sends each process a notice when the discovered hosts would change the
 *   assignment, so that commit() raises HostsUpdatedInterrupt.
 */

/* Takes over job->hosts and job->plan (empty until the first assignment),
 * before hr_job_open; job->launch is the agents launch's state. 0, or
 * horovodrun's exit code once it said why. */
int hr_elastic_start(struct hr_job *job);
/* Starts the discovery (or plans the fixed hosts at once), once the job
 * is open. 0, or horovodrun's exit code once it said why. */
int hr_elastic_go(struct hr_job *job);
/* The contract variables of process id, for its JOB or RANKS entry. */
int hr_elastic_env(struct hr_elastic *el, int id, struct hvd_strvec *env,
                   const struct hvd_endpoints *ep);
/* Whether process id should run: assigned, and not stopped since. */
int hr_elastic_wanted(const struct hr_elastic *el, int id);
/* The start-up line (startup.h) while the first assignment waits for its
 * slots or its ranks; "" once it runs. */
void hr_elastic_status(const struct hr_elastic *el, char *buf, size_t len);
/* Whether the controller has ended the job (its agents may then end). */
int hr_elastic_over(const struct hr_elastic *el);
/* Process id is about to end because the agent that started its host's
 * agent ended (the tree launch): its end is a failure that resets the
 * job, but its host is not to blame and is not blacklisted. */
void hr_elastic_orphan(struct hr_elastic *el, int id);
/* The summary of how the job ended, printed, and horovodrun's exit code;
 * -1 when the job's fate is the controller's of a fixed job (a signal). */
int hr_elastic_failure(struct hr_elastic *el);
/* Stops the discovery and the timers (the job is over). */
void hr_elastic_close(struct hr_elastic *el);
/* Frees the controller once the loop's handles are closed. */
void hr_elastic_free(struct hr_elastic *el);

#endif
