/* The SSH link (launcher/link/ssh.c) without the job controller: reaches a
 * host's hvd-agent, reads its first bytes, kills the link, reports. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/log.h"
#include "launcher/link/link.h"
#include "launcher/link/ssh.h"

static size_t got;
static int ended;

static void on_bytes(struct hr_agent *a, const char *b, size_t n)
{
    (void)b;
    /* The agent's HELLO frame: the link works both ways once we close
     * it and the agent, seeing its stdin close, exits. */
    if (got == 0)
        a->link->kill(a, SIGTERM);
    got += n;
}

static void on_ended(struct hr_agent *a)
{
    ended = 1;
    a->link->release(a);
}

static const struct hr_link_cb cb = {on_bytes, on_ended};

int main(int argc, char **argv)
{
    struct hr_agent a;

    if (argc != 4) {
        fprintf(stderr, "usage: linkcheck HOST PORT AGENT_PATH\n");
        return 2;
    }
    hvd_log_init("linkcheck", 0);
    const struct hr_ssh_cfg cfg = {.port = atoi(argv[2]),
                                   .agent_path = argv[3]};
    memset(&a, 0, sizeof(a));
    a.loop = uv_default_loop();
    a.link = &hr_link_ssh;
    a.cb = &cb;
    a.name = argv[1];
    if ((a.ssh = hr_ssh_new(&a, &cfg)) == NULL || a.link->start(&a) != 0) {
        fprintf(stderr, "linkcheck: cannot start: %s\n", a.failure);
        return 1;
    }
    uv_run(a.loop, UV_RUN_DEFAULT);
    hr_ssh_free(a.ssh);
    printf("bytes %zu ended %d failure '%s'\n", got, ended, a.failure);
    uv_loop_close(a.loop);
    return got > 0 && ended ? 0 : 1;
}
