/* Host key checks against ~/.ssh/known_hosts, OpenSSH's way. */
#ifndef HR_KNOWN_HOSTS_H
#define HR_KNOWN_HOSTS_H

#include <libssh2.h>
#include <stddef.h>

struct hr_ssh_target;

/* What the check did with the host's key. */
enum hr_kh_outcome {
    HR_KH_MATCH = 0,    /* known */
    HR_KH_ADDED = 1,    /* unknown, added to known_hosts (msg says) */
    HR_KH_UNCHECKED = 2 /* taken without a check (msg says, or "" once
                           said for this process) */
};

/*
 * Checks the key the server offered on session against t's known_hosts
 * file (plain and hashed entries, "[host]:port" entries for other ports),
 * by t's policy (StrictHostKeyChecking): yes refuses unknown and changed
 * keys; accept-new adds unknown keys (takes them for this run when the
 * file cannot be written) and refuses changed ones; no takes every key.
 * Returns 0 with *outcome, or -1 with one line in msg saying what was
 * wrong and what to do.
 */
int hr_known_hosts_verify(LIBSSH2_SESSION *session,
                          const struct hr_ssh_target *t, int *outcome,
                          char *msg, size_t msglen);

#endif
