/* Load writer: prints many lines of varying length as fast as it can. */
/*
 * One rank of the output load tests. It writes --lines lines to stdout and
 * stderr (about one in eight to stderr), lengths drawn from a fixed
 * distribution dominated by short lines, content that the launcher cannot
 * mistake for line ends. At exit it writes what it printed, per stream, to
 * DIR/digest.RANK: the line count, the byte count, the SHA-256 of the raw
 * bytes (what --output-filename files must hold) and the SHA-256 of the
 * lines each ended by one \n (what a tagged terminal must show once the
 * prefixes are removed).
 *
 * Distribution (--profile mixed, the default), per line:
 *   90 %   1 .. 80 bytes, uniform
 *   9.5 %  81 .. 1024 bytes, uniform
 *   0.5 %  1025 .. 65536 bytes, log-uniform
 * about 166 bytes a line on average; line 0 is 1 byte, and line N/2 (on
 * stdout) and N/2+1 (on stderr) are exactly 64 KiB. --profile big draws
 * half of the lines from 1 .. 80 and half from 1 .. 16 KiB (about 4.2 KiB a
 * line), to pile up many bytes with few lines. Ranks with rank % 3 == 1 end
 * stdout with a line without a newline, ranks with rank % 4 == 2 stderr.
 *
 * --fail RANK:CODE:LINES makes that rank print LINES lines and exit with
 * CODE. The rank comes from HOROVOD_RANK or, under mpirun,
 * OMPI_COMM_WORLD_RANK.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_LEN 65536u
#define POOL_LEN (4u * LINE_MAX_LEN)

struct stream {
    FILE *f;
    const char *name;
    EVP_MD_CTX *md;
    uint64_t lines, bytes;
};

static uint64_t rng_state;

/* splitmix64: small, fast and the same everywhere. */
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t uniform(uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(rng() % (uint64_t)(hi - lo + 1));
}

static uint32_t draw_len(int big)
{
    uint32_t p = (uint32_t)(rng() % 1000);
    if (big)
        return p < 500 ? uniform(1, 80) : uniform(1, 16384);
    if (p < 900)
        return uniform(1, 80);
    if (p < 995)
        return uniform(81, 1024);
    double u = (double)(rng() >> 11) / 9007199254740992.0;
    double len = 1025.0 * exp(u * log(65536.0 / 1025.0));
    return len > LINE_MAX_LEN ? LINE_MAX_LEN : (uint32_t)len;
}

static int env_int(const char *a, const char *b)
{
    const char *v = getenv(a);
    if (v == NULL)
        v = getenv(b);
    return v ? atoi(v) : 0;
}

static void put(struct stream *s, const char *p, size_t n)
{
    if (n && fwrite(p, 1, n, s->f) != n) {
        fprintf(stderr, "spew: write to %s failed: %s\n", s->name,
                strerror(errno));
        exit(3);
    }
    EVP_DigestUpdate(s->md, p, n);
    s->bytes += n;
}

static void hex(const unsigned char *d, unsigned n, char *out)
{
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* "NAME lines bytes raw-sha256 lines-sha256" for one stream. */
static void digest_line(struct stream *s, int partial, FILE *out)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n;
    char raw[2 * EVP_MAX_MD_SIZE + 1], term[2 * EVP_MAX_MD_SIZE + 1];
    EVP_MD_CTX *copy = EVP_MD_CTX_new();

    EVP_MD_CTX_copy_ex(copy, s->md);
    EVP_DigestFinal_ex(copy, d, &n);
    hex(d, n, raw);
    if (partial)
        EVP_DigestUpdate(s->md, "\n", 1);
    EVP_DigestFinal_ex(s->md, d, &n);
    hex(d, n, term);
    fprintf(out, "%s %llu %llu %s %s\n", s->name, (unsigned long long)s->lines,
            (unsigned long long)s->bytes, raw, term);
    EVP_MD_CTX_free(copy);
}

int main(int argc, char **argv)
{
    unsigned long lines = 1000;
    unsigned long seed = 1;
    const char *dir = NULL;
    int big = 0, linebuf = 0;
    int fail_rank = -1, fail_code = 0;
    unsigned long fail_lines = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lines") == 0 && i + 1 < argc)
            lines = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--digests") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
            big = strcmp(argv[++i], "big") == 0;
        else if (strcmp(argv[i], "--linebuf") == 0)
            linebuf = 1;
        else if (strcmp(argv[i], "--fail") == 0 && i + 1 < argc &&
                 sscanf(argv[++i], "%d:%d:%lu", &fail_rank, &fail_code,
                        &fail_lines) == 3)
            ;
        else {
            fprintf(stderr,
                    "usage: spew [--lines N] [--seed S] [--digests DIR] "
                    "[--profile mixed|big] [--linebuf] "
                    "[--fail RANK:CODE:LINES]\n");
            return 2;
        }
    }
    int rank = env_int("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK");
    /* --fail: that rank prints fewer lines and exits with CODE. */
    if (rank == fail_rank)
        lines = fail_lines;
    if (lines < 4)
        lines = 4;
    rng_state = seed * 1000003ull + (uint64_t)rank;

    /* Bytes 0x20..0x7e and 0x80..0xff: never a \n or \r. */
    char *pool = malloc(POOL_LEN);
    if (pool == NULL)
        return 1;
    for (size_t i = 0; i < POOL_LEN; i++) {
        uint32_t c = (uint32_t)(rng() % 222);
        pool[i] = (char)(c < 95 ? 0x20 + c : 0x80 + (c - 95));
    }

    struct stream st[2] = {{stdout, "stdout", NULL, 0, 0},
                           {stderr, "stderr", NULL, 0, 0}};
    for (int k = 0; k < 2; k++) {
        st[k].md = EVP_MD_CTX_new();
        EVP_DigestInit_ex(st[k].md, EVP_sha256(), NULL);
        setvbuf(st[k].f, NULL, linebuf ? _IOLBF : _IOFBF, 1 << 16);
    }
    int partial[2] = {rank % 3 == 1, rank % 4 == 2};

    char head[64];
    for (unsigned long i = 0; i < lines; i++) {
        uint32_t len = draw_len(big);
        int k = rng() % 8 == 0;
        if (i == 0)
            len = 1;
        if (i == lines / 2 || i == lines / 2 + 1) {
            len = LINE_MAX_LEN;
            k = i != lines / 2;
        }
        /* The last line of each stream may lack its newline. */
        if (i == lines - 2)
            k = 1;
        if (i == lines - 1)
            k = 0;
        int last = (k == 1 && i == lines - 2) || (k == 0 && i == lines - 1);
        struct stream *s = &st[k];
        uint32_t off = (uint32_t)(rng() % (POOL_LEN - LINE_MAX_LEN));
        uint32_t h = 0;
        /* A readable head, when it fits, to debug a mismatch. */
        if (len >= 32)
            h = (uint32_t)snprintf(head, sizeof(head), "%d:%c:%lu:", rank,
                                   "oe"[k], i);
        put(s, head, h);
        put(s, pool + off, len - h);
        if (!(last && partial[k]))
            put(s, "\n", 1);
        s->lines++;
    }
    if (fflush(stdout) != 0 || fflush(stderr) != 0) {
        fprintf(stderr, "spew: flush failed: %s\n", strerror(errno));
        return 3;
    }
    if (dir != NULL) {
        char path[4096], tmp[4200];
        snprintf(path, sizeof(path), "%s/digest.%d", dir, rank);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *out = fopen(tmp, "w");
        if (out == NULL) {
            fprintf(stderr, "spew: cannot write %s: %s\n", tmp,
                    strerror(errno));
            return 3;
        }
        fprintf(out, "rank %d\n", rank);
        for (int k = 0; k < 2; k++)
            digest_line(&st[k], partial[k], out);
        if (fclose(out) != 0 || rename(tmp, path) != 0)
            return 3;
    }
    for (int k = 0; k < 2; k++)
        EVP_MD_CTX_free(st[k].md);
    free(pool);
    return rank == fail_rank ? fail_code : 0;
}
