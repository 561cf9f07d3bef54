/* --launcher, --rsh-agent and OMPI_MCA_plm_rsh_agent: how horovodrun
 * reaches the agents of other hosts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/envc.h"
#include "launcher/horovodrun/cli.h"
#include "launcher/lib/spawn.h"

extern char **environ;

/* Whether cmd's first word is a program: a path that can be run, or a
 * name on PATH. */
static int program_exists(const char *cmd, size_t len)
{
    char word[4096], found[4096];
    size_t skip = strspn(cmd, " \t");
    size_t n = strcspn(cmd + skip, " \t");
    if (n > len - skip)
        n = len - skip;
    if (n == 0 || n >= sizeof(word))
        return 0;
    memcpy(word, cmd + skip, n);
    word[n] = '\0';
    if (strchr(word, '/'))
        return access(word, X_OK) == 0;
    return hvd_spawn_resolve(word, environ, found, sizeof(found)) == 0;
}

/* The first of Open MPI's alternatives ("ssh : rsh") that names a program
 * here, kept in o's strings; NULL when none does. */
static const char *ompi_rsh_agent(struct hr_opts *o)
{
    const char *v = getenv(HVD_ENV_OMPI_RSH_AGENT);
    for (const char *p = v; p && *p;) {
        size_t n = strcspn(p, ":");
        size_t skip = strspn(p, " \t");
        size_t end = n;
        while (end > skip && (p[end - 1] == ' ' || p[end - 1] == '\t'))
            end--;
        if (end > skip && program_exists(p + skip, end - skip))
            return hr_opts_keep(o, p + skip, end - skip);
        p += n + (p[n] == ':');
    }
    return NULL;
}

int hr_cli_launcher(struct hr_opts *o, int in_slurm, char *err, size_t errlen)
{
    /* Still AUTO here unless --launcher was given. */
    if ((o->launcher != HR_LAUNCH_AUTO || o->rsh_agent) && o->mpi) {
        snprintf(err, errlen,
                 "%s cannot be used with --mpi: mpirun starts its own "
                 "daemons (give it OMPI_MCA_plm_rsh_agent instead)",
                 o->rsh_agent ? "--rsh-agent" : "--launcher");
        return -1;
    }
    if (o->launcher == HR_LAUNCH_SLURM && !in_slurm) {
        snprintf(err, errlen,
                 "--launcher slurm needs a Slurm allocation (neither "
                 "SLURM_JOB_NODELIST nor SLURM_NODELIST is set); run "
                 "horovodrun under salloc or sbatch");
        return -1;
    }
    if (o->rsh_agent) {
        if (o->launcher != HR_LAUNCH_AUTO && o->launcher != HR_LAUNCH_RSH) {
            snprintf(err, errlen,
                     "--rsh-agent starts the agents; it cannot be used with "
                     "--launcher %s",
                     o->launcher == HR_LAUNCH_SSH ? "ssh" : "slurm");
            return -1;
        }
        if (!program_exists(o->rsh_agent, strlen(o->rsh_agent))) {
            snprintf(err, errlen,
                     "--rsh-agent '%.200s': no such program (give a path, "
                     "or a program on PATH)",
                     o->rsh_agent);
            return -1;
        }
        o->launcher = HR_LAUNCH_RSH;
        return 0;
    }
    if (o->launcher == HR_LAUNCH_RSH ||
        (o->launcher == HR_LAUNCH_AUTO && !in_slurm && !o->mpi)) {
        o->rsh_agent = ompi_rsh_agent(o);
        if (o->rsh_agent) {
            o->launcher = HR_LAUNCH_RSH;
            return 0;
        }
        if (o->launcher == HR_LAUNCH_RSH) {
            snprintf(err, errlen,
                     "--launcher rsh needs --rsh-agent CMD, or "
                     "%s naming a program",
                     HVD_ENV_OMPI_RSH_AGENT);
            return -1;
        }
    }
    if (o->rsh_tree) {
        snprintf(err, errlen,
                 "--rsh-tree needs --rsh-agent CMD (or %s naming a "
                 "program); over SSH and through srun the agents start "
                 "agents already (--tree-fanout)",
                 HVD_ENV_OMPI_RSH_AGENT);
        return -1;
    }
    if (o->launcher == HR_LAUNCH_AUTO)
        o->launcher = in_slurm ? HR_LAUNCH_SLURM : HR_LAUNCH_SSH;
    return 0;
}
