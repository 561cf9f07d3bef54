/*
 * The control socket's messages between a detached job's controller and
 * horovodrun ps/logs/attach/stop, in the agent protocol's frames (the
 * same bytes make a job's kept file).
 */
#ifndef HR_CTL_H
#define HR_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/horovodrun/keep.h"

enum hr_ctl_msg {
    /* client: u8 follow, i32 rank (-1: all), i32 tail (-1: all kept) */
    HR_CTL_LOGS = 1,
    /* client: u8 now: stop the job (SIGTERM and the grace, or SIGKILL) */
    HR_CTL_STOP = 2,
    /* controller: str id, u32 size, then each rank's i32 local_rank */
    HR_CTL_HELLO = 3,
    /* controller: u32 rank (HR_KEEP_SELF: its own), u8 stream, u8 term,
     * then the text */
    HR_CTL_LINE = 4,
    /* controller: u32 lines this reader missed, too slow to take them */
    HR_CTL_SKIPPED = 5,
    /* controller: i32 horovodrun's exit code, str its last message */
    HR_CTL_END = 6,
    /* controller: str why this client is refused */
    HR_CTL_REFUSED = 7
};

/* Largest request a controller takes; a reader takes any frame (a rank's
 * line may be as long as a frame allows). */
#define HR_CTL_REQUEST_MAX 64

/* A whole frame (header included) to free(); p is NULL without memory. */
struct hr_ctl_frame {
    uint8_t *p;
    size_t len;
};

struct hr_ctl_frame hr_ctl_logs(int follow, int rank, long tail);
struct hr_ctl_frame hr_ctl_stop(int now);
struct hr_ctl_frame hr_ctl_hello(const char *id, uint32_t size,
                                 const int *local_ranks);
struct hr_ctl_frame hr_ctl_line(const struct hr_keep_line *l);
struct hr_ctl_frame hr_ctl_u32(int type, uint32_t v); /* SKIPPED */
struct hr_ctl_frame hr_ctl_end(int code, const char *summary);
struct hr_ctl_frame hr_ctl_refused(const char *why);

#endif
