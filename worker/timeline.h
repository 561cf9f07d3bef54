/* The timeline: rank 0's Chrome trace of every tensor's phases. */
#ifndef HVD_TIMELINE_H
#define HVD_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

struct hvd_timeline {
    int fd; /* -1 when off */
    int64_t t0_us;
    long long end; /* offset of the closing bracket */
    int events;
    char **names; /* tensor names, by thread id */
    size_t nnames, cap;
    int mark_cycles;
};

/* Opens path (truncating it) when path is non-NULL; 0 or HVD_ESYS. */
int hvd__timeline_open(struct hvd_timeline *tl, const char *path,
                       int mark_cycles);
void hvd__timeline_close(struct hvd_timeline *tl);
/* One phase of a tensor, from start_us for dur_us (monotonic clock); the
 * part before the timeline was opened is left out. */
void hvd__timeline_phase(struct hvd_timeline *tl, const char *tensor,
                         const char *phase, int64_t start_us, int64_t dur_us,
                         const char *args_json);
/* A cycle marker (only with mark_cycles). */
void hvd__timeline_cycle(struct hvd_timeline *tl, int64_t at_us);

#endif
