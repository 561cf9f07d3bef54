/* Unit tests for the pipes link (launcher/link/link_local.c), without the job
 * controller: an agent program started over pipes, frames both ways. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/link/link.h"

/* What the callbacks saw. */
static struct {
    char buf[256];
    size_t n;
    int ended;
} got;

static void on_bytes(struct hr_agent *a, const char *b, size_t n)
{
    cr_assert_leq(got.n + n, sizeof(got.buf));
    memcpy(got.buf + got.n, b, n);
    got.n += n;
    /* The echo is complete: end the agent the way the controller would. */
    if (got.n >= 10)
        a->link->kill(a, SIGTERM);
}

static void on_ended(struct hr_agent *a)
{
    got.ended++;
    a->link->release(a);
}

static const struct hr_link_cb cb = {on_bytes, on_ended};

static void agent_init(struct hr_agent *a, uv_loop_t *loop, const char *prog)
{
    memset(a, 0, sizeof(*a));
    memset(&got, 0, sizeof(got));
    a->loop = loop;
    a->link = &hr_link_pipes;
    a->cb = &cb;
    a->name = "localhost";
    hvd_strvec_init(&a->argv);
    cr_assert_eq(hvd_strvec_push(&a->argv, prog), 0);
}

static uint8_t *frame(const char *s)
{
    uint8_t *f = malloc(strlen(s));
    cr_assert_not_null(f);
    memcpy(f, s, strlen(s));
    return f;
}

Test(link, pipes_carry_frames_both_ways_and_kill_ends_the_agent)
{
    uv_loop_t loop;
    struct hr_agent a;

    cr_assert_eq(uv_loop_init(&loop), 0);
    /* cat echoes what the link sends, as an agent answers frames. */
    agent_init(&a, &loop, "/bin/cat");
    cr_assert_eq(a.link->start(&a), 0, "%s", a.failure);
    cr_expect(a.running);
    a.link->send(&a, frame("hello"), 5);
    a.link->send(&a, frame("world"), 5);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_expect_eq(got.n, 10);
    cr_expect_eq(memcmp(got.buf, "helloworld", 10), 0);
    cr_expect_eq(got.ended, 1);
    cr_expect_eq(a.term_signal, SIGTERM);
    cr_expect(!a.running);
    hvd_strvec_close(&a.argv);
    cr_expect_eq(uv_loop_close(&loop), 0);
}

Test(link, pipes_pause_holds_the_agents_frames_until_resumed)
{
    uv_loop_t loop;
    struct hr_agent a;

    cr_assert_eq(uv_loop_init(&loop), 0);
    agent_init(&a, &loop, "/bin/cat");
    cr_assert_eq(a.link->start(&a), 0, "%s", a.failure);
    a.link->pause(&a, 1);
    a.link->send(&a, frame("0123456789"), 10);
    /* Paused: the echo waits in the pipe however long the loop runs
     * (cat answers within milliseconds). */
    for (int i = 0; i < 50; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(4000);
    }
    cr_expect_eq(got.n, 0);
    a.link->pause(&a, 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_expect_eq(got.n, 10);
    cr_expect_eq(got.ended, 1);
    hvd_strvec_close(&a.argv);
    cr_expect_eq(uv_loop_close(&loop), 0);
}

Test(link, pipes_start_of_a_missing_program_fails_with_a_reason)
{
    uv_loop_t loop;
    struct hr_agent a;

    cr_assert_eq(uv_loop_init(&loop), 0);
    agent_init(&a, &loop, "/nonexistent/hvd-agent");
    cr_expect_eq(a.link->start(&a), -1);
    cr_expect(strstr(a.failure, "cannot start /nonexistent/hvd-agent") != NULL,
              "%s", a.failure);
    cr_expect(!a.running);
    a.link->release(&a);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_expect_eq(got.ended, 0);
    hvd_strvec_close(&a.argv);
    cr_expect_eq(uv_loop_close(&loop), 0);
}
