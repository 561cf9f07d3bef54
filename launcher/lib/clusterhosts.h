/*
 * Host lists that batch systems and the MPI Operator leave in the
 * environment, for a run without -H or --hostfile outside Slurm.
 */
#ifndef HVD_CLUSTERHOSTS_H
#define HVD_CLUSTERHOSTS_H

#include <stddef.h>

#include "launcher/lib/hostspec.h"

/*
 * The first of PBS_NODEFILE, LSB_MCPU_HOSTS, LSB_HOSTS and
 * OMPI_MCA_orte_default_hostfile that is set and not empty, or NULL.
 */
const char *hvd_cluster_hosts_var(void);

/*
 * True if var names a file (PBS_NODEFILE, OMPI_MCA_orte_default_hostfile)
 * rather than holding the hosts itself.
 */
int hvd_cluster_var_is_file(const char *var);

/*
 * Parses LSF's LSB_MCPU_HOSTS text, "host1 4 host2 4": pairs of a name and
 * its slot count. A repeated host adds up its slots. On failure returns
 * HVD_EPARSE or HVD_ERANGE and writes one line naming the variable into
 * err; hl may then hold the hosts before the bad one.
 */
int hvd_cluster_parse_lsb_mcpu(struct hvd_hostlist *hl, const char *text,
                               char *err, size_t errlen);

/* Parses LSF's LSB_HOSTS text, "host1 host1 host2": one name per slot. */
int hvd_cluster_parse_lsb_hosts(struct hvd_hostlist *hl, const char *text,
                                char *err, size_t errlen);

/*
 * Appends the hosts of var, one hvd_cluster_hosts_var returned, to hl:
 * the file it names, read as a hostfile, or its text. Errors as above,
 * each naming var, plus HVD_EIO for an unreadable file.
 */
int hvd_cluster_hosts(struct hvd_hostlist *hl, const char *var, char *err,
                      size_t errlen);

#endif
