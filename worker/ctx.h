/* libhvd's one global context and the work items its thread runs. */
#ifndef HVD_CTX_H
#define HVD_CTX_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/frame.h"
#include "common/secret.h"
#include "include/hvd.h"
#include "ring.h"

#define HVD_ERRMSG 512

enum hvd_op_kind {
    HVD_OP_ALLREDUCE,
    HVD_OP_BROADCAST,
    HVD_OP_ALLGATHER,
    HVD_OP_BARRIER,
    HVD_OP_SHUTDOWN
};

/* One collective handed from an API call to the background thread. */
struct hvd_work {
    enum hvd_op_kind kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    hvd_dtype dtype;
    hvd_op op;
    int root;
    void **gathered; /* allgather result */
    size_t *counts;  /* allgather counts */
    const char *name;
    _Atomic int done;
    int rc;
    char err[HVD_ERRMSG];
    struct hvd_work *next;
};

struct hvd_ctx {
    int rank, size;
    int local_rank, local_size;
    int cross_rank, cross_size;
    int standalone; /* not started by horovodrun: a job of one */
    int peer_timeout_s;
    uint8_t secret[HVD_SECRET_LEN];
    int rdv_fd; /* stays open: failures of other ranks arrive on it */
    struct hvd_frame_reader rdv_reader;
    struct hvd_ring ring;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake_fd;          /* eventfd: new work for the idle thread */
    _Atomic int pending;  /* work queued and not yet taken */
    _Atomic int sleeping; /* the thread is (about to be) in poll */
    /* Busy-wait budget of the background thread, in microseconds, between
     * and within collectives: waking a sleeping thread costs more than a
     * small collective. */
    int spin_us;
    struct hvd_work *head, *tail;
    int failed; /* sticky: every later collective fails with this */
    int fail_rc;
    char fail_msg[HVD_ERRMSG];
};

/* Meets the other ranks (env, rendezvous, ring sockets). */
int hvd__join(struct hvd_ctx *c, char *err, size_t errlen);
/* Starts the background thread. */
int hvd__engine_start(struct hvd_ctx *c);
/* Hands w to the thread and waits for it; returns w->rc. */
int hvd__engine_submit(struct hvd_ctx *c, struct hvd_work *w);
/* Stops the thread (says goodbye to the rendezvous server) and joins it. */
void hvd__engine_stop(struct hvd_ctx *c);

#endif
