/* Writes rank lines whole to the terminal and raw to per-rank files. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/hvd_err.h"
#include "common/linesplit.h"
#include "common/proto.h"

/* mkdir -p: creates every missing component of path. */
static int mkdir_p(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

int hr_output_init(struct hr_output *o, const struct hvd_plan *p,
                   const char *dir, char *err, size_t errlen)
{
    char path[4096];
    int width = snprintf(NULL, 0, "%d", p->size - 1);

    memset(o, 0, sizeof(*o));
    o->out_fd = STDOUT_FILENO;
    o->err_fd = STDERR_FILENO;
    o->plan = p;
    if (dir == NULL)
        return 0;
    o->files = malloc((size_t)p->size * sizeof(*o->files));
    if (o->files == NULL)
        return HVD_ENOMEM;
    for (int r = 0; r < p->size; r++)
        o->files[r][0] = o->files[r][1] = -1;
    for (int r = 0; r < p->size; r++) {
        snprintf(path, sizeof(path), "%s/rank.%0*d", dir, width, r);
        if (mkdir_p(path) != 0) {
            snprintf(err, errlen, "cannot create output directory '%s': %s",
                     path, strerror(errno));
            return HVD_EIO;
        }
        static const char *names[2] = {"stdout", "stderr"};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof(path), "%s/rank.%0*d/%s", dir, width, r,
                     names[k]);
            o->files[r][k] =
                open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
            if (o->files[r][k] < 0) {
                snprintf(err, errlen, "cannot create output file '%s': %s",
                         path, strerror(errno));
                return HVD_EIO;
            }
        }
    }
    return 0;
}

void hr_output_close(struct hr_output *o)
{
    if (o == NULL || o->files == NULL)
        return;
    for (int r = 0; r < o->plan->size; r++)
        for (int k = 0; k < 2; k++)
            if (o->files[r][k] >= 0)
                close(o->files[r][k]);
    free(o->files);
    o->files = NULL;
}

/* Writes all of iov, blocking if the fd was left non-blocking, so a slow
 * reader slows horovodrun down instead of making it buffer. */
static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                poll(&pfd, 1, -1);
                continue;
            }
            return -1;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

void hr_output_line(struct hr_output *o, uint32_t rank, int stream, int term,
                    const char *text, size_t len)
{
    if (rank >= (uint32_t)o->plan->size)
        return;
    int k = stream == HVD_STREAM_STDERR;
    if (o->files) {
        static const char *ends[] = {"", "\n", "\r", "\n"};
        struct iovec raw[2] = {
            {(void *)text, len},
            {(void *)ends[term & 3], strlen(ends[term & 3])}};
        write_all(o->files[rank][k], raw, 2);
    }
    /* The \n of a \r\n was already shown with its line. */
    if (term == HVD_TERM_CRLF_TAIL || o->broken)
        return;
    char prefix[64];
    int n = snprintf(prefix, sizeof(prefix), "[%u,%d]<%s>:", rank,
                     o->plan->ranks[rank].local_rank, k ? "stderr" : "stdout");
    struct iovec iov[3] = {{prefix, (size_t)n}, {(void *)text, len}, {"\n", 1}};
    /* A closed terminal (horovodrun | head) must not stop the job or its
     * files; the terminal side is dropped instead. */
    if (write_all(k ? o->err_fd : o->out_fd, iov, 3) != 0 && errno == EPIPE)
        o->broken = 1;
}
