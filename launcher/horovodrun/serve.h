/*
 * A detached job's control socket: its controller keeps each rank's last
 * output (keep.h) and serves it to horovodrun logs/attach/stop on a Unix
 * socket that only its user may open. A reader too slow for the job
 * misses lines (it is told how many) instead of holding the job back.
 */
#ifndef HR_SERVE_H
#define HR_SERVE_H

#include <stdint.h>
#include <uv.h>

#include "launcher/horovodrun/keep.h"
#include "launcher/lib/plan.h"

/* Bytes queued for one reader beyond which its lines are skipped. */
#define HR_SERVE_BACKLOG (4u * 1024 * 1024)

struct hr_serve;

/*
 * Listens on root/id/sock (mode 0600, in a 0700 folder) and sends
 * horovodrun's own messages (hvd_log) to root/id/horovodrun.log and to
 * the readers. on_stop(arg, now) is a client's stop request. 0, or
 * HVD_EIO or HVD_ENOMEM with err set.
 */
int hr_serve_start(struct hr_serve **out, uv_loop_t *loop, const char *root,
                   const char *id, const struct hvd_plan *plan,
                   void (*on_stop)(void *arg, int now), void *arg, char *err,
                   size_t errlen);
/* One line of a rank's output (the hr_output tap). */
void hr_serve_line(void *serve, uint32_t rank, int stream, int term,
                   const char *text, size_t len);
/*
 * The job ended with horovodrun's exit code: writes the job's status and
 * kept output, sends the end to the readers, runs the loop until they
 * have it (two seconds at most), then closes the socket and frees s.
 */
void hr_serve_end(struct hr_serve *s, int code);

#endif
