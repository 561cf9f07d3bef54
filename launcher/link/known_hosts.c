/* Host key policy: known keys pass, changed keys are refused, unknown keys
 * are refused unless the user asked to accept new ones. */
#include "launcher/link/known_hosts.h"

#include "launcher/link/ssh_target.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct keyinfo {
    int kh_type;      /* LIBSSH2_KNOWNHOST_KEY_* */
    const char *name; /* as OpenSSH shows it */
};

static struct keyinfo key_info(int hostkey_type)
{
    switch (hostkey_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_SSHRSA, "RSA"};
    case LIBSSH2_HOSTKEY_TYPE_DSS:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_SSHDSS, "DSA"};
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ECDSA"};
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ECDSA"};
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ECDSA"};
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_ED25519, "ED25519"};
    default:
        return (struct keyinfo){LIBSSH2_KNOWNHOST_KEY_UNKNOWN, "unknown"};
    }
}

/* "SHA256:base64-without-padding", as ssh and ssh-keygen print it. */
static void fingerprint(LIBSSH2_SESSION *s, char *out, size_t len)
{
    const unsigned char *h = (const unsigned char *)libssh2_hostkey_hash(
        s, LIBSSH2_HOSTKEY_HASH_SHA256);
    unsigned char b64[64];
    if (h == NULL) {
        snprintf(out, len, "(no fingerprint)");
        return;
    }
    int n = EVP_EncodeBlock(b64, h, 32);
    while (n > 0 && b64[n - 1] == '=')
        n--;
    snprintf(out, len, "SHA256:%.*s", n, b64);
}

/*
 * Reads known_hosts line by line so that one line libssh2 cannot parse
 * (a certificate authority, a hardware key) does not hide the others, and
 * remembers the line of every entry for messages.
 */
static int read_known(LIBSSH2_KNOWNHOSTS *kh, const char *path, int **lines,
                      int *n)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0;
    int lineno = 0;

    *lines = NULL;
    *n = 0;
    if (f == NULL)
        return errno == ENOENT ? 0 : -1;
    while (getline(&buf, &cap, f) > 0) {
        lineno++;
        if (libssh2_knownhost_readline(kh, buf, strlen(buf),
                                       LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
            continue;
        int *nl = realloc(*lines, (size_t)(*n + 1) * sizeof(**lines));
        if (nl == NULL)
            break;
        *lines = nl;
        (*lines)[(*n)++] = lineno;
    }
    free(buf);
    fclose(f);
    return 0;
}

/* The file line of an entry, by its position in the collection. */
static int line_of(LIBSSH2_KNOWNHOSTS *kh, struct libssh2_knownhost *want,
                   const int *lines, int n)
{
    struct libssh2_knownhost *e = NULL;
    for (int i = 0; libssh2_knownhost_get(kh, &e, e) == 0; i++)
        if (e == want)
            return i < n ? lines[i] : 0;
    return 0;
}

static int append(LIBSSH2_KNOWNHOSTS *kh, const char *path, const char *hoststr,
                  const char *key, size_t keylen, int type)
{
    struct libssh2_knownhost *e;
    char line[8192];
    size_t len = 0;
    if (libssh2_knownhost_addc(kh, hoststr, NULL, key, keylen, NULL, 0,
                               LIBSSH2_KNOWNHOST_TYPE_PLAIN |
                                   LIBSSH2_KNOWNHOST_KEYENC_RAW | type,
                               &e) != 0 ||
        libssh2_knownhost_writeline(kh, e, line, sizeof(line), &len,
                                    LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0)
        return -1;
    /* ~/.ssh may not exist yet on a fresh account. */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        mkdir(dir, 0700);
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = write(fd, line, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : -1;
}

/* "no": every key passes, said once per process (one line, not one a
 * host). */
static void unchecked(const struct hr_ssh_target *t, char *msg, size_t len)
{
    static int said;
    msg[0] = '\0';
    if (said++)
        return;
    snprintf(msg, len,
             "host keys are not checked (StrictHostKeyChecking no in %s): "
             "anyone on the network path can pose as a host",
             t->strict_from[0] ? t->strict_from : "the ssh config");
}

/* A file that holds nothing and takes nothing, as OpenSSH sees it. */
static int no_file(const char *path)
{
    return strcmp(path, "/dev/null") == 0 || strcmp(path, "none") == 0;
}

int hr_known_hosts_verify(LIBSSH2_SESSION *session,
                          const struct hr_ssh_target *t, int *outcome,
                          char *msg, size_t msglen)
{
    const char *path = t->known_hosts;
    char fp[96], hoststr[300];
    size_t keylen = 0;
    int keytype = 0, *lines = NULL, nlines = 0, rc = -1;
    struct libssh2_knownhost *found = NULL;
    LIBSSH2_KNOWNHOSTS *kh = NULL;

    *outcome = HR_KH_MATCH;
    const char *key = libssh2_session_hostkey(session, &keylen, &keytype);
    struct keyinfo ki = key_info(keytype);
    fingerprint(session, fp, sizeof(fp));
    snprintf(hoststr, sizeof(hoststr), t->port == 22 ? "%s" : "[%s]:%d",
             t->host, t->port);
    if (key == NULL) {
        snprintf(msg, msglen, "cannot get the host key");
        goto out;
    }
    kh = libssh2_knownhost_init(session);
    if (kh == NULL ||
        (!no_file(path) && read_known(kh, path, &lines, &nlines) != 0)) {
        snprintf(msg, msglen, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    int check =
        libssh2_knownhost_checkp(kh, t->host, t->port, key, keylen,
                                 LIBSSH2_KNOWNHOST_TYPE_PLAIN |
                                     LIBSSH2_KNOWNHOST_KEYENC_RAW | ki.kh_type,
                                 &found);
    if (check != LIBSSH2_KNOWNHOST_CHECK_MATCH &&
        t->strict == HR_SSH_STRICT_NO) {
        if (check == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND && !no_file(path))
            append(kh, path, hoststr, key, keylen, ki.kh_type);
        *outcome = HR_KH_UNCHECKED;
        unchecked(t, msg, msglen);
        rc = 0;
        goto out;
    }
    switch (check) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
        rc = 0;
        break;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
        snprintf(msg, msglen,
                 "HOST KEY CHANGED: the server offers %s key %s, but %s:%d "
                 "holds a different key for it; someone may be "
                 "impersonating the host. If the change is expected, remove "
                 "that line (ssh-keygen -R '%s' -f %s) and try again",
                 ki.name, fp, path, line_of(kh, found, lines, nlines), hoststr,
                 path);
        break;
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
        if (t->strict != HR_SSH_STRICT_ACCEPT_NEW) {
            snprintf(msg, msglen,
                     "host key not in %s (%s %s); add it with ssh-keyscan, "
                     "or pass --ssh-accept-new",
                     path, ki.name, fp);
        } else if (no_file(path) ||
                   append(kh, path, hoststr, key, keylen, ki.kh_type) != 0) {
            /* A read-only ~/.ssh, as in a Kubernetes pod. */
            snprintf(msg, msglen,
                     "took %s key %s for %s without saving it (%s%s%s)",
                     ki.name, fp, hoststr, path, no_file(path) ? "" : ": ",
                     no_file(path) ? "" : strerror(errno));
            *outcome = HR_KH_UNCHECKED;
            rc = 0;
        } else {
            snprintf(msg, msglen, "added %s key %s for %s to %s", ki.name, fp,
                     hoststr, path);
            *outcome = HR_KH_ADDED;
            rc = 0;
        }
        break;
    default:
        snprintf(msg, msglen, "cannot check the host key (%s %s) against %s",
                 ki.name, fp, path);
    }
out:
    free(lines);
    if (kh)
        libssh2_knownhost_free(kh);
    return rc;
}
