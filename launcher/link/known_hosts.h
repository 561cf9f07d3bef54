/* Host key checks against ~/.ssh/known_hosts, OpenSSH's way. */
#ifndef HR_KNOWN_HOSTS_H
#define HR_KNOWN_HOSTS_H

#include <libssh2.h>
#include <stddef.h>

/*
 * Checks the key the server offered on session against known_hosts
 * (plain and hashed entries, "[host]:port" entries for other ports).
 * A changed key is always refused; an unknown one unless accept_new, in
 * which case it is added and *added is set. Returns 0, or -1 with one
 * line in msg saying what was wrong and what to do.
 */
int hr_known_hosts_verify(LIBSSH2_SESSION *session, const char *host, int port,
                          int accept_new, int *added, char *msg, size_t msglen);

/* $HOME/.ssh/NAME (else the password database's home). */
int hr_ssh_home_path(const char *name, char *out, size_t len);

#endif
