/* Host lists from the output of an elastic job's host discovery script. */
#ifndef HR_DISCOVERY_H
#define HR_DISCOVERY_H

#include <stddef.h>

#include "launcher/lib/hostspec.h"

/*
 * Parses what --host-discovery-script printed into hl, which must be empty.
 * This is pure: the job controller runs the script on its loop and hands
 * the bytes over, so that the parsing can be tested without processes.
 *
 * One host a line: "host", "host:slots", "[v6addr]" or "[v6addr]:slots",
 * any of them with a "user@" in front as -H allows. Surrounding blanks and
 * a "\r" before the newline are ignored, and so are blank lines: a script
 * prints nothing, or an empty line, while no worker is ready yet, and that
 * means no hosts, not an error (Horovod PR #3490). An empty output gives an
 * empty list and returns 0; waiting for enough slots is the caller's job.
 *
 * A line without slots gets default_slots, the value of --slots-per-host;
 * default_slots < 1 means the option was not given, and such a line is
 * then an error that says so. "host:0" is accepted, as Horovod accepts it,
 * and leaves the host out: a host without slots can run nothing.
 *
 * A host listed on several lines keeps the place of its first line and
 * takes the slots of its last. Horovod reads the lines into a set and then
 * a dict, so identical lines fold into one and, among differing ones, an
 * arbitrary line wins; the last line is the deterministic form of that,
 * and refusing the output instead would fail scripts that Horovod runs.
 *
 * Unbracketed IPv6 addresses are refused, as in Horovod, where "a::1:2"
 * does not split into one host and one slot count: brackets make it plain.
 *
 * On failure returns HVD_EPARSE (a malformed line, or a line without slots
 * and no default), HVD_ERANGE (slots above HVD_MAX_SLOTS) or HVD_ENOMEM,
 * leaves hl empty, and writes one line such as "line 3: ..." into err.
 */
int hr_discovery_parse(struct hvd_hostlist *hl, const char *out, size_t len,
                       int default_slots, char *err, size_t errlen);

/* The kinds of change between two discoveries, as Horovod's
 * HostUpdateResult names them; the values are Horovod's too. */
#define HR_DISCOVERY_REMOVED 1
#define HR_DISCOVERY_ADDED 2

/*
 * Sets *changes to what went from prev to cur: HR_DISCOVERY_ADDED if a
 * host appeared or has more slots, HR_DISCOVERY_REMOVED if one went away
 * or has fewer, both, or 0 when the two list the same hosts and slots in
 * any order. A host coming back from a blacklist cooldown also counts as
 * added in Horovod; the blacklist reports that (hr_blacklist_filter), and
 * the caller adds it in. HVD_EINVAL on NULL arguments, HVD_ENOMEM.
 */
int hr_discovery_changes(const struct hvd_hostlist *prev,
                         const struct hvd_hostlist *cur, int *changes);

#endif
