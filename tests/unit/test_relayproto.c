/* Unit tests for the tree launch's messages (launcher/lib/relayproto.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/frame.h"
#include "common/hvd_err.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"

Test(relayproto, spawn_round_trip_and_every_cut)
{
    struct hvd_spawn s = {7,     "node-9",        2222, "/keys/id", "", 1,
                          30000, "/usr/bin/srun", NULL},
                     d;
    uint8_t *f;
    size_t len;

    cr_assert_eq(hvd_spawn_encode(&s, &f, &len), 0);
    cr_expect_eq(f[3], HVD_MSG_SPAWN);
    const uint8_t *p = f + HVD_FRAME_HDR;
    size_t n = len - HVD_FRAME_HDR;
    cr_assert_eq(hvd_spawn_decode(&d, p, n), 0);
    cr_expect_eq(d.id, 7);
    cr_expect_str_eq(d.host, "node-9");
    cr_expect_eq(d.port, 2222);
    cr_expect_str_eq(d.identity, "/keys/id");
    cr_expect_str_eq(d.agent, "");
    cr_expect_eq(d.accept_new, 1);
    cr_expect_eq(d.retry_ms, 30000);
    cr_expect_str_eq(d.srun, "/usr/bin/srun");
    cr_expect_str_eq(d.rsh, "");
    hvd_spawn_close(&d);
    hvd_spawn_close(&d); /* twice is safe */
    for (size_t cut = 0; cut < n; cut++) {
        cr_expect_eq(hvd_spawn_decode(&d, p, cut), HVD_ETRUNC, "cut %zu", cut);
        cr_expect_null(d.host);
    }
    free(f);
}

Test(relayproto, spawn_through_an_rsh_command)
{
    struct hvd_spawn s = {3,    "w5", 0,
                          NULL, NULL, 0,
                          1000, NULL, "ssh -o BatchMode=yes"},
                     d;
    uint8_t *f;
    size_t len;

    cr_assert_eq(hvd_spawn_encode(&s, &f, &len), 0);
    cr_assert_eq(hvd_spawn_decode(&d, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR),
                 0);
    cr_expect_str_eq(d.srun, "");
    cr_expect_str_eq(d.rsh, "ssh -o BatchMode=yes");
    hvd_spawn_close(&d);
    free(f);
    /* Not both at once. */
    s.srun = "/usr/bin/srun";
    cr_assert_eq(hvd_spawn_encode(&s, &f, &len), 0);
    cr_expect_eq(hvd_spawn_decode(&d, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR),
                 HVD_EPROTO);
    free(f);
}

Test(relayproto, spawn_without_a_host_or_with_a_bad_port_is_refused)
{
    struct hvd_spawn s = {1, "", 22, NULL, NULL, 0, 0, NULL, NULL}, d;
    uint8_t *f;
    size_t len;

    cr_assert_eq(hvd_spawn_encode(&s, &f, &len), 0);
    cr_expect_eq(hvd_spawn_decode(&d, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR),
                 HVD_EPROTO);
    free(f);
    s.host = "h";
    s.port = 70000;
    cr_assert_eq(hvd_spawn_encode(&s, &f, &len), 0);
    cr_expect_eq(hvd_spawn_decode(&d, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR),
                 HVD_EPROTO);
    free(f);
}

Test(relayproto, wrap_carries_a_frame_whole)
{
    uint8_t inner[HVD_FRAME_HDR + 3] = {0}, *f;
    const uint8_t *rest;
    size_t len, n;
    uint32_t id;

    hvd_frame_header(inner, HVD_MSG_PING, 3);
    cr_assert_eq(hvd_relay_wrap(HVD_MSG_TO, 42, inner, sizeof(inner), &f, &len),
                 0);
    cr_expect_eq(f[3], HVD_MSG_TO);
    cr_assert_eq(hvd_relay_unwrap(f + HVD_FRAME_HDR, len - HVD_FRAME_HDR, &id,
                                  &rest, &n),
                 0);
    cr_expect_eq(id, 42);
    cr_expect_eq(n, sizeof(inner));
    cr_expect_arr_eq(rest, inner, sizeof(inner));
    cr_expect_eq(hvd_relay_unwrap(f + HVD_FRAME_HDR, 3, &id, &rest, &n),
                 HVD_ETRUNC);
    free(f);
    /* DROP: the id alone. */
    cr_assert_eq(hvd_relay_wrap(HVD_MSG_DROP, 9, NULL, 0, &f, &len), 0);
    cr_expect_eq(len, HVD_FRAME_HDR + 4);
    free(f);
}

Test(relayproto, gone_round_trip_and_damage)
{
    struct hvd_gone g = {3, -1, 9, "lost"}, d;
    uint8_t *f;
    size_t len;

    cr_assert_eq(hvd_gone_encode(&g, &f, &len), 0);
    const uint8_t *p = f + HVD_FRAME_HDR;
    size_t n = len - HVD_FRAME_HDR;
    cr_assert_eq(hvd_gone_decode(&d, p, n), 0);
    cr_expect_eq(d.id, 3);
    cr_expect_eq(d.status, -1);
    cr_expect_eq(d.signal, 9);
    cr_expect_str_eq(d.why, "lost");
    hvd_gone_close(&d);
    for (size_t cut = 0; cut < n; cut++)
        cr_expect_neq(hvd_gone_decode(&d, p, cut), 0, "cut %zu", cut);
    uint8_t *more = malloc(n + 1);
    memcpy(more, p, n);
    more[n] = 0;
    cr_expect_eq(hvd_gone_decode(&d, more, n + 1), HVD_EPROTO);
    free(more);
    free(f);
}
