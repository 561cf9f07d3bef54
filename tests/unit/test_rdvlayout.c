/* Unit tests for the rendezvous layout (common/rdvlayout.c) and the PEERS
 * frame that carries it (common/rdvproto.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/frame.h"
#include "common/hvd_err.h"
#include "common/rdvproto.h"

/* A job of hosts given as "a a b b": host names by rank. */
static int split(char *s, const char **out)
{
    int n = 0;
    for (char *t = strtok(s, " "); t; t = strtok(NULL, " "))
        out[n++] = t;
    return n;
}

/* Layout from host names, its runs, and back: the same host of every
 * rank and the same leaders. */
static void round_trip(const char *spec, uint32_t want_runs)
{
    char buf[256];
    const char *hosts[64];
    struct hvd_rdv_layout a, b;
    struct hvd_rdv_run *runs;
    uint32_t nruns;

    snprintf(buf, sizeof(buf), "%s", spec);
    int n = split(buf, hosts);
    cr_assert_eq(hvd_rdv_layout_from_hosts(&a, n, hosts), 0);
    cr_assert_eq(hvd_rdv_layout_runs(&a, &runs, &nruns), 0);
    cr_expect_eq(nruns, want_runs, "%s: %u runs", spec, nruns);
    cr_assert_eq(hvd_rdv_layout_from_runs(&b, (uint32_t)n, runs, nruns), 0);
    cr_expect_eq(b.nhosts, a.nhosts, "%s", spec);
    for (int r = 0; r < n; r++) {
        cr_expect_eq(b.host_of[r], a.host_of[r], "%s: rank %d", spec, r);
        cr_expect_str_eq(hosts[a.first[a.host_of[r]]], hosts[r]);
    }
    for (int h = 0; h < a.nhosts; h++)
        cr_expect_eq(b.first[h], a.first[h], "%s: host %d", spec, h);
    free(runs);
    hvd_rdv_layout_close(&a);
    hvd_rdv_layout_close(&b);
}

Test(rdvlayout, runs_are_few_for_usual_jobs)
{
    round_trip("a", 1);
    round_trip("a a a a b b b b c c c c", 1);
    round_trip("a b c d e f", 1);
    round_trip("a a a a b b b c c c", 2);
    /* Hosts that come back: a run each time they do. */
    round_trip("a b a b", 3);
    round_trip("a a b b a c c", 3);
}

Test(rdvlayout, bad_runs_are_refused)
{
    struct hvd_rdv_layout l;
    struct hvd_rdv_run more[] = {{4, 2, -1}};
    struct hvd_rdv_run ahead[] = {{1, 1, -1}, {1, 1, 1}};
    struct hvd_rdv_run twice[] = {{1, 1, -1}, {1, 2, 0}};
    struct hvd_rdv_run empty[] = {{0, 1, -1}, {4, 1, -1}};
    struct hvd_rdv_run huge[] = {{0xffffffffu, 0xffffffffu, -1}};

    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 4, more, 1), HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 9, more, 1), HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 2, ahead, 2), HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 3, twice, 2), HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 4, empty, 2), HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, HVD_RDV_SIZE_MAX, huge, 1),
                 HVD_EPROTO);
    cr_expect_eq(hvd_rdv_layout_from_runs(&l, 0, more, 0), HVD_EPROTO);
    cr_assert_eq(hvd_rdv_layout_from_runs(&l, 8, more, 1), 0);
    hvd_rdv_layout_close(&l);
}

/* Every rank gets the members 1, 2, 4, ... away on the ring of all ranks
 * and, as a leader, on the ring of leaders: what hvd__connect_ring
 * connects to and accepts from. 128 hosts of 8 ranks; the expected set
 * is marked rank by rank. */
Test(rdvlayout, wanted_are_the_ring_partners_and_leaders)
{
    struct hvd_rdv_run runs[] = {{8, 128, -1}};
    struct hvd_rdv_layout l;
    int out[HVD_RDV_WANTED_MAX];
    char want[1024];

    cr_assert_eq(hvd_rdv_layout_from_runs(&l, 1024, runs, 1), 0);
    cr_assert_eq(hvd_rdv_ring_links(1024), 10);
    cr_assert_eq(hvd_rdv_ring_links(128), 7);
    for (int rank = 0; rank < 1024; rank += 37) {
        int h = rank / 8, nwant = 0;
        memset(want, 0, sizeof(want));
        want[rank] = 1;
        for (int k = 0; k < 10; k++)
            want[(rank + (1 << k)) % 1024] =
                want[(rank - (1 << k) + 1024) % 1024] = 1;
        for (int k = 0; rank % 8 == 0 && k < 7; k++)
            want[(h + (1 << k)) % 128 * 8] =
                want[(h - (1 << k) + 128) % 128 * 8] = 1;
        for (int r = 0; r < 1024; r++)
            nwant += want[r];
        int n = hvd_rdv_layout_wanted(&l, rank, out);
        cr_assert_eq(n, nwant, "rank %d: %d peers, want %d", rank, n, nwant);
        for (int i = 0; i < n; i++) {
            cr_expect(want[out[i]], "rank %d: %d not wanted", rank, out[i]);
            cr_expect(i == 0 || out[i] > out[i - 1], "ascending, once each");
        }
    }
    /* Two ranks: each other. */
    struct hvd_rdv_run two[] = {{1, 2, -1}};
    hvd_rdv_layout_close(&l);
    cr_assert_eq(hvd_rdv_layout_from_runs(&l, 2, two, 1), 0);
    cr_expect_eq(hvd_rdv_layout_wanted(&l, 0, out), 2);
    cr_expect_eq(out[1], 1);
    hvd_rdv_layout_close(&l);
}

static uint8_t secret[32], nonce[HVD_NONCE_LEN];

/* Encodes pt and decodes it into got: the decoder's verdict. */
static int through_the_wire(const struct hvd_rdv_peers *pt,
                            struct hvd_rdv_peers *got)
{
    uint8_t *f;
    size_t len;
    memset(secret, 7, sizeof(secret));
    memset(nonce, 9, sizeof(nonce));
    cr_assert_eq(
        hvd_rdv_peers_encode(pt, secret, sizeof(secret), nonce, &f, &len), 0);
    int rc = hvd_rdv_peers_decode(got, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR,
                                  secret, sizeof(secret), nonce);
    free(f);
    return rc;
}

Test(rdvlayout, peers_frame_round_trip)
{
    struct hvd_rdv_run runs[] = {{2, 2, -1}, {1, 1, 0}};
    struct hvd_rdv_peer peers[] = {{0, "a", "10.0.0.1", 4000},
                                   {3, "b", "10.0.0.2", 4003}};
    struct hvd_rdv_peers pt = {5, 2, runs, 2, peers}, got = {0};

    cr_assert_eq(through_the_wire(&pt, &got), 0);
    cr_expect_eq(got.size, 5);
    cr_expect_eq(got.nruns, 2);
    cr_expect_eq(got.runs[1].host, 0);
    cr_expect_eq(got.n, 2);
    cr_expect_str_eq(hvd_rdv_peers_find(&got, 3)->addr, "10.0.0.2");
    cr_expect_eq(hvd_rdv_peers_find(&got, 0)->port, 4000);
    cr_expect_null(hvd_rdv_peers_find(&got, 1));
    cr_expect_null(hvd_rdv_peers_find(&got, 4));
    hvd_rdv_peers_close(&got);

    /* Ranks out of order, or beyond the job, are refused, and so is a
     * layout of another size. */
    peers[1].rank = 0;
    cr_expect_eq(through_the_wire(&pt, &got), HVD_EPROTO);
    hvd_rdv_peers_close(&got);
    peers[1].rank = 5;
    cr_expect_eq(through_the_wire(&pt, &got), HVD_EPROTO);
    hvd_rdv_peers_close(&got);
    peers[1].rank = 3;
    pt.size = 6;
    cr_expect_eq(through_the_wire(&pt, &got), HVD_EPROTO);
    hvd_rdv_peers_close(&got);
    /* And a MAC from another secret. */
    pt.size = 5;
    uint8_t *f;
    size_t len;
    cr_assert_eq(
        hvd_rdv_peers_encode(&pt, secret, sizeof(secret), nonce, &f, &len), 0);
    secret[0] ^= 1;
    cr_expect_eq(hvd_rdv_peers_decode(&got, f + HVD_FRAME_HDR,
                                      len - HVD_FRAME_HDR, secret,
                                      sizeof(secret), nonce),
                 HVD_EAUTH);
    hvd_rdv_peers_close(&got);
    free(f);
}
