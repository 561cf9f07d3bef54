/* Unit tests for the engine (worker/engine.c, worker/cycle.c) in a job of
 * one, in this process: submit, wait, inline runs and the background
 * thread, the pending table's checks, fusion, and shutdown. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hvd_err.h"
#include "worker/api.h"
#include "worker/ctx.h"
#include "worker/engine.h"
#include "worker/transport/ring.h"
#include "worker/transport/transport.h"

/* A context as hvd_init makes it for a job of one joined through
 * rendezvous, with the engine started. */
static struct hvd_ctx *start(void)
{
    struct hvd_ctx *c = calloc(1, sizeof(*c));
    cr_assert(c != NULL);
    c->rdv_fd = c->eng.wake_fd = c->tl.fd = -1;
    c->tp = &hvd__transport_ring;
    c->size = c->local_size = c->cross_size = 1;
    c->peer_timeout_s = 30;
    hvd__ring_init(&c->ring, 0, 1);
    hvd__ring_init(&c->xring, 0, 1);
    cr_assert_eq(hvd__pset_init(&c->psets, 1, 0), 0);
    cr_assert_eq(hvd__engine_start(c), 0);
    return c;
}

static void stop(struct hvd_ctx *c)
{
    hvd__engine_stop(c);
    cr_expect_eq(c->eng.npend, 0, "nothing left in the pending table");
    hvd__pset_close(&c->psets);
    hvd__ring_close(&c->ring);
    hvd__ring_close(&c->xring);
    free(c);
}

/* An allreduce of n floats (sum) named name. */
static struct hvd_request *allreduce(const char *name, const float *in,
                                     float *out, size_t n, int sync)
{
    struct hvd_request *op = hvd__api_new_op(1);
    cr_assert(op != NULL);
    struct hvd_work *w = &op->parts[0];
    w->kind = HVD_OP_ALLREDUCE;
    w->sendbuf = in;
    w->recvbuf = out;
    w->count = n;
    w->dtype = HVD_FLOAT32;
    w->op_kind = HVD_SUM;
    snprintf(w->name, sizeof(w->name), "%s", name);
    op->sync = sync;
    return op;
}

Test(engine, a_caller_runs_its_collective_inline)
{
    struct hvd_ctx *c = start();
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    struct hvd_request *op = allreduce("a", in, out, 4, 1);
    hvd__engine_submit(c, op);
    cr_assert_eq(hvd__engine_wait(c, op), 0, "%s", op->err);
    cr_expect_arr_eq(out, in, sizeof(in));
    free(op);
    stop(c);
}

Test(engine, the_thread_runs_what_nobody_waits_for)
{
    struct hvd_ctx *c = start();
    enum { N = 16 };
    static float in[N][8], out[N][8];
    struct hvd_request *ops[N];
    /* Submitted asynchronously and waited for later: the thread takes
     * them, batched into cycles, and fuses what fits. */
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        for (int k = 0; k < 8; k++)
            in[i][k] = (float)(i * 8 + k);
        ops[i] = allreduce(name, in[i], out[i], 8, 0);
        hvd__engine_submit(c, ops[i]);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(hvd__engine_wait(c, ops[i]), 0, "%s", ops[i]->err);
        cr_expect_arr_eq(out[i], in[i], sizeof(in[i]));
        free(ops[i]);
    }
    stop(c);
}

Test(engine, a_name_in_flight_is_refused)
{
    struct hvd_ctx *c = start();
    float in[2] = {1, 2}, out[2], out2[2];
    struct hvd_request *a = allreduce("same", in, out, 2, 0);
    struct hvd_request *b = allreduce("same", in, out2, 2, 0);
    /* Both in one submission batch: the thread takes them together. */
    pthread_mutex_lock(&c->eng.run_mu);
    hvd__engine_submit(c, a);
    hvd__engine_submit(c, b);
    pthread_mutex_unlock(&c->eng.run_mu);
    int ra = hvd__engine_wait(c, a), rb = hvd__engine_wait(c, b);
    cr_expect_eq(ra, 0, "%s", a->err);
    cr_expect_eq(rb, HVD_EINVAL);
    cr_expect(strstr(b->err, "already in flight") != NULL, "%s", b->err);
    free(a);
    free(b);
    stop(c);
}

Test(engine, shutdown_fails_nothing_that_finished)
{
    struct hvd_ctx *c = start();
    float in[1] = {5}, out[1] = {0};
    struct hvd_request *op = allreduce("x", in, out, 1, 1);
    hvd__engine_submit(c, op);
    cr_assert_eq(hvd__engine_wait(c, op), 0, "%s", op->err);
    free(op);
    stop(c);
    cr_expect_eq(out[0], 5);
}
