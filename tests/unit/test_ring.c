/* Unit tests for the ring's allgather and small-tensor allreduce
 * (worker/transport/ring.c): n threads wired by socket pairs as
 * hvd__connect_ring wires ranks, on the ring's own path and on Bruck's. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/transport/ring.h"

#define MAXN 9

struct member {
    struct hvd_ring r;
    const size_t *bytes; /* each rank's block */
    size_t count;        /* > 0: a float32 sum allreduce of count instead */
    uint8_t *out;
    int rc;
    char err[256];
};

/* Block byte j of rank i. */
static uint8_t pattern(int i, size_t j)
{
    return (uint8_t)(i * 37 + j * 11 + 1);
}

static size_t total(const size_t *bytes, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += bytes[i];
    return t;
}

static void *member_main(void *arg)
{
    struct member *m = arg;
    int me = m->r.rank;
    if (m->count > 0) {
        float *in = malloc(m->count * sizeof(float));
        for (size_t j = 0; j < m->count; j++)
            in[j] = (float)((me * 7 + (int)j) % 13) - 6;
        m->rc = hvd__ring_allreduce(&m->r, in, m->out, m->count, HVD_FLOAT32,
                                    HVD_SUM, m->err, sizeof(m->err));
        free(in);
        return NULL;
    }
    uint8_t *mine = malloc(m->bytes[me] + 1);
    for (size_t j = 0; j < m->bytes[me]; j++)
        mine[j] = pattern(me, j);
    m->rc = hvd__ring_allgatherv(&m->r, mine, m->out, m->bytes, m->err,
                                 sizeof(m->err));
    free(mine);
    return NULL;
}

/* Wires n members as hvd__connect_ring does (links to rank + 2^k for every
 * distance below n when n >= 4, or only the ring: links 1), runs them,
 * and closes them. */
static void run_members(struct member *m, int n, int links)
{
    pthread_t th[MAXN];
    for (int i = 0; i < n; i++) {
        hvd__ring_init(&m[i].r, i, n);
        m[i].r.nlinks = links;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < links; k++) {
            int sv[2], j = (i + (1 << k)) % n;
            cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
            m[i].r.to[k].fd = sv[0];
            m[j].r.from[k].fd = sv[1];
        }
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, member_main, &m[i]);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(m[i].rc, 0, "n=%d rank %d: %s", n, i, m[i].err);
        hvd__ring_close(&m[i].r);
    }
}

/* Every rank gets every block, in rank order, for sizes given by f. */
static void check_allgather(int n, int links, size_t (*f)(int))
{
    struct member m[MAXN];
    size_t bytes[MAXN];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < n; i++)
        bytes[i] = f(i);
    size_t t = total(bytes, n);
    for (int i = 0; i < n; i++) {
        m[i].bytes = bytes;
        m[i].out = malloc(t + 1);
    }
    run_members(m, n, links);
    for (int i = 0; i < n; i++) {
        size_t at = 0;
        for (int b = 0; b < n; b++)
            for (size_t j = 0; j < bytes[b]; j++, at++)
                cr_assert_eq(m[i].out[at], pattern(b, j),
                             "n=%d links=%d rank %d: byte %zu of block %d", n,
                             links, i, j, b);
        free(m[i].out);
    }
}

static size_t small_blocks(int i)
{
    return (size_t)(i * 5 % 7) * 3 + 1;
}

static size_t some_empty(int i)
{
    return i % 3 == 1 ? 0 : 40 + (size_t)i;
}

/* Above RING_BRUCK_MAX in all: the ring's own steps. */
static size_t large_blocks(int i)
{
    return 100000 + (size_t)i * 1000;
}

Test(ring, bruck_allgather_every_rank_count)
{
    for (int n = 2; n <= MAXN; n++) {
        check_allgather(n, hvd_rdv_ring_links(n), small_blocks);
        check_allgather(n, hvd_rdv_ring_links(n), some_empty);
    }
}

Test(ring, ring_allgather_without_skip_links)
{
    for (int n = 2; n <= MAXN; n++)
        check_allgather(n, 1, small_blocks);
}

Test(ring, large_allgather_takes_the_ring)
{
    check_allgather(7, hvd_rdv_ring_links(7), large_blocks);
    check_allgather(5, 1, large_blocks);
}

/* The small-tensor allreduce (a gather, then the fold) on both paths. */
Test(ring, small_allreduce_on_both_paths)
{
    for (int n = 2; n <= MAXN; n++) {
        int paths[2] = {1, hvd_rdv_ring_links(n)};
        for (int p = 0; p < 2; p++) {
            struct member m[MAXN];
            size_t count = 33;
            float want[33] = {0};
            memset(m, 0, sizeof(m));
            for (size_t j = 0; j < count; j++)
                for (int i = 0; i < n; i++)
                    want[j] += (float)((i * 7 + (int)j) % 13) - 6;
            for (int i = 0; i < n; i++) {
                m[i].count = count;
                m[i].out = malloc(count * sizeof(float));
            }
            run_members(m, n, paths[p]);
            for (int i = 0; i < n; i++) {
                cr_expect_eq(memcmp(m[i].out, want, sizeof(want)), 0,
                             "n=%d links=%d rank %d", n, paths[p], i);
                free(m[i].out);
            }
        }
    }
}
