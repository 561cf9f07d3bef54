/* Event-loop skeleton shared by horovodrun, --mpi, hvd-agent, hvd-mpi-rank. */
#ifndef HR_LOOP_H
#define HR_LOOP_H

#include <uv.h>

/*
 * Initializes and starts one signal handle per signal number, each with
 * data and cb. With weak, the handles do not keep the loop alive.
 */
void hr_loop_signals(uv_loop_t *loop, uv_signal_t *const *sigs,
                     const int *signums, int n, void *data, uv_signal_cb cb,
                     int weak);

/*
 * Closes every handle still open and runs the loop (in mode) so that
 * their close callbacks run; what they held can be freed afterwards.
 */
void hr_loop_close_all(uv_loop_t *loop, uv_run_mode mode);

/*
 * The end of a controller's run: with stuck set (a thread-pool read of a
 * terminal or an idle pipe still blocks, or a write to a terminal takes
 * nothing), waiting for the loop would hold the exit until the user typed
 * something, or forever, so the process exits with rc at once; otherwise
 * the loop is closed and rc returned.
 */
int hr_loop_finish(uv_loop_t *loop, int stuck, int rc);

#endif
