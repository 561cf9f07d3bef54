/* Fuzz target: the OpenSSH client-config reader (lib/sshconfig.h). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "launcher/lib/errcode.h"
#include "launcher/lib/sshconfig.h"

/*
 * Input layout: byte 0 picks the host name looked up (low two bits) and
 * the size of the message buffer (the other six: 1 to 63, 0 for a roomy
 * one), and the rest is the config text. The text goes to a memfd, read
 * as /proc/self/fd/N, so nothing touches the disk. Home does not exist,
 * so relative and ~/ Includes find nothing; inputs with '/' after
 * "include" on a line are skipped, as an absolute Include would read the
 * machine's files and make runs depend on them.
 */
#define ROOMY 512
#define HOME "/nonexistent-hvd-fuzz-home"

static const char *const names[] = {"a", "node-1.cluster.local", "[::1]",
                                    "10.0.0.1"};

/* Whether some line of text has "include" and, after it, a '/'. */
static int absolute_include(const char *text, size_t len)
{
    for (size_t i = 0; i + 7 <= len; i++) {
        if (strncasecmp(text + i, "include", 7) != 0)
            continue;
        for (size_t k = i + 7; k < len && text[k] != '\n'; k++)
            if (text[k] == '/')
                return 1;
    }
    return 0;
}

/* A string ends inside its array and holds no control byte. */
static void check_str(const char *s, size_t size)
{
    size_t n = strnlen(s, size);

    FUZZ_CHECK(n < size);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    char path[64];

    if (size < 1)
        return 0;
    const char *name = names[data[0] & 3];
    size_t errlen = data[0] >> 2 ? data[0] >> 2 : ROOMY;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (absolute_include(text, len))
        return 0;
    if (fd < 0)
        fd = memfd_create("fuzz_sshconfig", 0);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    FUZZ_CHECK(pwrite(fd, text, len, 0) == (ssize_t)len);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    /* Exactly errlen bytes, so that ASan sees a write past them. */
    char *err = malloc(errlen);
    struct hr_sshcfg_host *out = malloc(sizeof(*out));
    FUZZ_CHECK(err != NULL && out != NULL);
    memset(err, 0x55, errlen);
    memset(out, 0x55, sizeof(*out));
    int rc = hr_sshcfg_lookup(path, name, HOME, "fuzzer", out, err, errlen);
    FUZZ_CHECK(rc == 0 || rc == HVD_EPARSE || rc == HVD_ERANGE ||
               rc == HVD_EIO || rc == HVD_EINVAL);
    /* One line, ending in its buffer; something on failure only. */
    check_str(err, errlen);
    FUZZ_CHECK(rc == 0 ? err[0] == '\0' : errlen == 1 || err[0] != '\0');
    /* Whatever the verdict, out holds strings and values in range; the
     * note, like err, has its input quoted. */
    FUZZ_CHECK(strnlen(out->user, 64) < 64);
    check_str(out->note, sizeof(out->note));
    FUZZ_CHECK(strnlen(out->hostname, 256) < 256);
    FUZZ_CHECK(strnlen(out->known_hosts, 512) < 512);
    FUZZ_CHECK(out->nidentity >= 0 && out->nidentity <= HR_SSHCFG_MAX_IDENTITY);
    for (int i = 0; i < HR_SSHCFG_MAX_IDENTITY; i++)
        FUZZ_CHECK(i < out->nidentity ? strnlen(out->identity[i], 512) < 512
                                      : out->identity[i][0] == '\0');
    FUZZ_CHECK(out->port >= 0 && out->port <= 65535);
    FUZZ_CHECK(out->strict >= HR_SSH_STRICT_UNSET &&
               out->strict <= HR_SSH_STRICT_ACCEPT_NEW);
    FUZZ_CHECK(out->connect_timeout >= 0);

    /* The text up to its first NUL as a pattern list: the name added
     * keeps a match, the name negated rules it out. */
    size_t plen = strnlen(text, len);
    char *pat = malloc(plen + 32);
    FUZZ_CHECK(pat != NULL);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        memcpy(pat, text, plen);
        pat[plen] = '\0';
        int m = hr_sshcfg_match(pat, names[i]);
        FUZZ_CHECK(m == 0 || m == 1);
        snprintf(pat + plen, 32, ",%s", names[i]);
        FUZZ_CHECK(hr_sshcfg_match(pat, names[i]) >= m);
        snprintf(pat + plen, 32, ",!%s", names[i]);
        FUZZ_CHECK(hr_sshcfg_match(pat, names[i]) == 0);
    }
    free(pat);
    free(out);
    free(err);
    return 0;
}
