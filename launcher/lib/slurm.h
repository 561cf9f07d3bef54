/* Slurm allocations: node list expressions and tasks per node. */
#ifndef HVD_SLURM_H
#define HVD_SLURM_H

#include <stddef.h>

#include "launcher/lib/hostspec.h"
#include "launcher/lib/strvec.h"

/*
 * Most host names one node list may expand to, and most nodes one tasks per
 * node list may cover. Real allocations are far smaller; a bigger count is a
 * typo such as "n[1-1000000]", and must not become a huge allocation.
 */
#define HVD_SLURM_MAX_HOSTS 100000
/* Longest host name a node list may produce: a full DNS name is 253. */
#define HVD_SLURM_NAME_MAX 255

/* Tasks of each node, with the "(xN)" repeats written out. */
struct hvd_slurm_tasks {
    int *counts; /* n entries, each in 1..HVD_MAX_SLOTS */
    size_t n;
};

/*
 * Expands a Slurm host list expression, as in SLURM_JOB_NODELIST, and
 * appends the names to out in Slurm's order. Entries are separated by
 * commas; an entry is a name with any number of bracket groups such as
 * "rack[1-2]-n[01-04,07]", each group a comma-separated list of numbers and
 * ranges "lo-hi". A group stands for each of its numbers in turn, written
 * with at least as many digits as the lower bound has ("[08-11]" gives 08 09
 * 10 11, "[1-10]" gives 1 to 10); several groups give every combination
 * in Slurm's order: "r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2, and with more
 * groups the last changes fastest, then the first, the second and so on
 * ("a[1-2]b[1-2]c[1-2]" gives a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 ...).
 * Repeated names are kept.
 *
 * On failure returns HVD_EPARSE (bad syntax, whitespace), HVD_ERANGE (a
 * backwards range, a number, name or expansion over the limits) or
 * HVD_ENOMEM, leaves out as it was, and writes one line into err naming the
 * problem and its offset in nodelist.
 */
int hvd_slurm_expand(struct hvd_strvec *out, const char *nodelist, char *err,
                     size_t errlen);

void hvd_slurm_tasks_init(struct hvd_slurm_tasks *t);
/* Frees the counts; t is empty and reusable afterwards. NULL is ok. */
void hvd_slurm_tasks_close(struct hvd_slurm_tasks *t);

/*
 * Parses SLURM_TASKS_PER_NODE, "2(x3),1" for 2,2,2,1, into t (which must be
 * empty). Counts are 1..HVD_MAX_SLOTS, repeats at least 1, and the list may
 * cover at most HVD_SLURM_MAX_HOSTS nodes. Errors as for hvd_slurm_expand;
 * t stays empty on failure.
 */
int hvd_slurm_tasks_parse(struct hvd_slurm_tasks *t, const char *tasks,
                          char *err, size_t errlen);

/*
 * Appends the hosts of a Slurm allocation to hl, each with its tasks as
 * slots: the i-th name of nodelist gets the i-th count of tasks_per_node.
 * A NULL tasks_per_node gives every host one slot. The counts must cover
 * exactly the nodes (HVD_EPARSE otherwise); a host named twice, or already
 * in hl, is HVD_EDUP. On any failure hl is left as it was and err holds one
 * line describing the problem.
 */
int hvd_slurm_hostlist(struct hvd_hostlist *hl, const char *nodelist,
                       const char *tasks_per_node, char *err, size_t errlen);
/*
 * hvd_slurm_hostlist on a node list and tasks per node parsed already:
 * names from hvd_slurm_expand, tasks from hvd_slurm_tasks_parse of the
 * text tasks_per_node (quoted in the message when the counts do not cover
 * the nodes), or both NULL for one slot each. Returns and errors as
 * hvd_slurm_hostlist.
 */
int hvd_slurm_hostlist_parsed(struct hvd_hostlist *hl,
                              const struct hvd_strvec *names,
                              const struct hvd_slurm_tasks *tasks,
                              const char *tasks_per_node, char *err,
                              size_t errlen);

#endif
