/* Event-loop skeleton: signal handles, closing everything, the last exit. */
#include "launcher/lib/loop.h"

#include <stdio.h>
#include <unistd.h>

void hr_loop_signals(uv_loop_t *loop, uv_signal_t *const *sigs,
                     const int *signums, int n, void *data, uv_signal_cb cb,
                     int weak)
{
    for (int i = 0; i < n; i++) {
        uv_signal_init(loop, sigs[i]);
        sigs[i]->data = data;
        uv_signal_start(sigs[i], cb, signums[i]);
        if (weak)
            uv_unref((uv_handle_t *)sigs[i]);
    }
}

static void close_one(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void hr_loop_close_all(uv_loop_t *loop, uv_run_mode mode)
{
    uv_walk(loop, close_one, NULL);
    uv_run(loop, mode);
}

int hr_loop_finish(uv_loop_t *loop, int stuck, int rc)
{
    if (stuck) {
        fflush(NULL);
        _exit(rc);
    }
    uv_loop_close(loop);
    return rc;
}
