/* Failures: the first one is sticky and fails every later collective; the
 * rendezvous server's news of other ranks' failures. */
#ifndef HVD_FAILURE_H
#define HVD_FAILURE_H

#include <stddef.h>
#include <stdint.h>

struct hvd_ctx;

void hvd__set_failed(struct hvd_ctx *c, int rc, const char *msg);
/* Reads the rendezvous server's news (ABORT of a failed rank, HOSTS
 * notices of an elastic job, or its end). */
void hvd__read_rdv(struct hvd_ctx *c);
/* Takes the host notices heard since the last take (hvd_host_updates). */
int hvd__host_notice_take(uint64_t *timestamp);
/* The check of the context's abort state (wait.h; vctx is the context). */
int hvd__check_abort(void *vctx, char *err, size_t errlen);
/* A failure seen on the ring: returns the code to fail with. */
int hvd__ring_failed(struct hvd_ctx *c, int rc, const char *err);

#endif
