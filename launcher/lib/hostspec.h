/* Host lists from -H specs and hostfiles. */
#ifndef HVD_HOSTSPEC_H
#define HVD_HOSTSPEC_H

#include <stddef.h>

/* Most slots one host may declare; more is a typo, not a machine. */
#define HVD_MAX_SLOTS 65536

struct hvd_host {
    char *name; /* as written, without brackets; may hold "user@" */
    int slots;  /* >= 1 */
};

struct hvd_hostlist {
    struct hvd_host *hosts;
    size_t n;
    /* First hostfile line whose max_slots= was ignored, 0 if none: the
     * caller warns once per file. */
    unsigned long max_slots_line;
};

void hvd_hostlist_init(struct hvd_hostlist *hl);
/* Frees the hosts; the list is empty and reusable afterwards. NULL is ok. */
void hvd_hostlist_close(struct hvd_hostlist *hl);
/* Appends one host; HVD_EDUP if the name is already listed. */
int hvd_hostlist_add(struct hvd_hostlist *hl, const char *name, int slots);
/*
 * Adds slots to the host named by the len bytes at name ("host",
 * "user@host" or "[addr]"), appending it if it is not listed yet: the
 * form of lists that repeat a host once per slot. HVD_EPARSE if the name
 * is not plausible, HVD_ERANGE if the host would pass HVD_MAX_SLOTS.
 */
int hvd_hostlist_merge(struct hvd_hostlist *hl, const char *name, size_t len,
                       int slots);
/* Sum of all slots. */
long hvd_hostlist_slots(const struct hvd_hostlist *hl);

/*
 * Parses an -H spec "host[:slots][,host[:slots]...]" ("[v6addr]:slots" for
 * IPv6) and appends to hl. On failure returns HVD_EPARSE, HVD_ERANGE or
 * HVD_EDUP and writes one line (no trailing newline, no program prefix)
 * describing the bad token into err.
 */
int hvd_hostlist_parse_spec(struct hvd_hostlist *hl, const char *spec,
                            char *err, size_t errlen);

/*
 * Parses hostfile text: one "host", "host:N" or "host slots=N
 * [max_slots=M]" per line ("[v6addr]" for IPv6), blank lines and '#'
 * comments allowed. A host on several lines gets the sum of their slots,
 * in the order of its first line; max_slots is ignored (see
 * max_slots_line). fname is only used in messages ("fname:line: ...").
 */
int hvd_hostlist_parse_text(struct hvd_hostlist *hl, const char *text,
                            size_t len, const char *fname, char *err,
                            size_t errlen);

/* Reads and parses a hostfile; HVD_EIO with a message if unreadable. */
int hvd_hostlist_parse_file(struct hvd_hostlist *hl, const char *path,
                            char *err, size_t errlen);

#endif
