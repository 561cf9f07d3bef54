/* Cross-memory-attach probe: how fast one process reads another's memory
 * with process_vm_readv, against memcpy from its own memory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * Why this exists: a shared-memory allreduce that read the other ranks'
 * buffers in place (as Open MPI's CMA path does) would move fewer bytes
 * than libhvd's copy into the shared segment and out again, but only if
 * such a read costs no more than a memcpy. This probe measures both on
 * the same host, through the same sizes of chunk, into one small
 * destination that stays in cache, as a fold would use it. GB/s counts
 * the bytes read (1e9 bytes per second); the best of the repetitions.
 */

#define DEFAULT_BYTES ((size_t)64 << 20)
#define DEFAULT_REPS 5

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The peer: touches its buffer, says where it is, and lives until the
 * probe closes the pipe (or dies: PR_SET_PDEATHSIG). */
static void peer(size_t bytes, int out, int in)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uint8_t *buf = malloc(bytes);
    uintptr_t at = (uintptr_t)buf;
    if (buf != NULL)
        memset(buf, 7, bytes);
    if (write(out, &at, sizeof(at)) != (ssize_t)sizeof(at))
        _exit(1);
    char c;
    while (read(in, &c, 1) > 0)
        ;
    _exit(0);
}

/* GB/s of reading bytes from (pid, src), or from src here when pid is 0,
 * chunk bytes at a time; a negative errno when a read fails. */
static double pass(pid_t pid, const uint8_t *src, uint8_t *dst, size_t bytes,
                   size_t chunk, int reps)
{
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (size_t off = 0; off < bytes; off += chunk) {
            size_t k = bytes - off < chunk ? bytes - off : chunk;
            if (pid == 0) {
                memcpy(dst, src + off, k);
                __asm__ volatile("" : : "r"(dst) : "memory");
                continue;
            }
            struct iovec l = {dst, k}, rv = {(void *)(src + off), k};
            if (process_vm_readv(pid, &l, 1, &rv, 1, 0) != (ssize_t)k)
                return -(errno ? errno : EIO);
        }
        double gbs = (double)bytes / (now() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    size_t mul = *end == 'K' ? 1u << 10 : *end == 'M' ? 1u << 20 : 1;
    if (v == 0 || (*end && strchr("KM", *end) == NULL))
        return 0;
    return (size_t)v * mul;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cma_probe [-s BYTES] [-r REPS] [CHUNK...]\n"
               "  -s BYTES  the peer's buffer (default 64M; K, M suffixes)\n"
               "  -r REPS   passes per figure, the best shown (default 5)\n"
               "  CHUNK     bytes per read (default 64K 1M)\n");
}

int main(int argc, char **argv)
{
    size_t bytes = DEFAULT_BYTES;
    int reps = DEFAULT_REPS, opt;
    while ((opt = getopt(argc, argv, "s:r:h")) != -1) {
        if (opt == 's' && (bytes = parse_size(optarg)) != 0)
            continue;
        if (opt == 'r' && (reps = atoi(optarg)) > 0 && reps <= 1000)
            continue;
        usage(opt == 'h' ? stdout : stderr);
        return opt == 'h' ? 0 : 2;
    }
    size_t chunks[16] = {64u << 10, 1u << 20};
    int nchunks = 2;
    if (optind < argc)
        nchunks = 0;
    for (int i = optind; i < argc; i++) {
        if (nchunks == 16 || (chunks[nchunks++] = parse_size(argv[i])) == 0) {
            fprintf(stderr,
                    "cma_probe: bad chunk size '%s' (at most 16, "
                    "such as 64K)\n",
                    argv[i]);
            return 2;
        }
    }
    size_t most = 0;
    for (int i = 0; i < nchunks; i++)
        most = chunks[i] > most ? chunks[i] : most;
    uint8_t *own = malloc(bytes), *dst = malloc(most);
    int up[2], down[2];
    if (own == NULL || dst == NULL || pipe(up) || pipe(down)) {
        fprintf(stderr, "cma_probe: out of memory or descriptors\n");
        return 1;
    }
    memset(own, 7, bytes);
    memset(dst, 0, most);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        peer(bytes, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    uintptr_t at = 0;
    int rc = 0;
    if (pid < 0 || read(up[0], &at, sizeof(at)) != (ssize_t)sizeof(at) ||
        at == 0) {
        fprintf(stderr, "cma_probe: the peer process did not start\n");
        rc = 1;
    }
    if (rc == 0)
        printf("# cma_probe: %zu-byte buffer, best of %d passes, GB/s of "
               "bytes read\n#   chunk (B)  process_vm_readv    memcpy  "
               "ratio\n",
               bytes, reps);
    for (int i = 0; rc == 0 && i < nchunks; i++) {
        double cma =
            pass(pid, (const uint8_t *)at, dst, bytes, chunks[i], reps);
        double cpy = pass(0, own, dst, bytes, chunks[i], reps);
        if (cma < 0) {
            fprintf(stderr,
                    "cma_probe: process_vm_readv from pid %d: %s (ptrace "
                    "rules or a seccomp filter forbid cross-memory attach "
                    "here)\n",
                    (int)pid, strerror((int)-cma));
            rc = 1;
            break;
        }
        printf("%13zu %17.2f %9.2f %6.2f\n", chunks[i], cma, cpy, cma / cpy);
    }
    close(down[1]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    free(own);
    free(dst);
    return rc;
}
