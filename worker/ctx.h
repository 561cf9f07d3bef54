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
#include "coll.h"
#include "include/hvd.h"
#include "negotiate.h"
#include "timeline.h"
#include "transport/ring.h"
#include "transport/shm.h"

#define HVD_ERRMSG 512

/* Longest operation name, terminator included. */
#define HVD_NAME_MAX 256

enum hvd_op_kind {
    HVD_OP_ALLREDUCE, /* the values match enum hvd_req_kind */
    HVD_OP_BROADCAST,
    HVD_OP_ALLGATHER,
    HVD_OP_BARRIER
};

struct hvd_request;

/* One named collective; an API call hands over one or more. */
struct hvd_work {
    struct hvd_request *op;
    enum hvd_op_kind kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    hvd_dtype dtype;
    hvd_op op_kind;
    int root;
    void **gathered; /* allgather result */
    size_t *counts;  /* allgather counts */
    char name[HVD_NAME_MAX];
    char err[HVD_ERRMSG];
    int64_t submit_us, announce_us; /* for the timeline */
    int compress;                   /* float32 sent as float16 */
    double prescale;                /* 1: none */
    double postscale;               /* 1: none */
    int device;                     /* the buffers are CUDA device memory */
    int device_id;                  /* on this device */
    const void *dev_sendbuf;        /* while staged through host memory */
    void *dev_recvbuf;
    uint8_t *host;
    struct hvd_work *pend_next; /* chain in the pending table */
};

/* What hvd_*_async returns: parts that complete together. */
struct hvd_request {
    _Atomic int done;
    int rc; /* the first failing part's code */
    char err[HVD_ERRMSG];
    int left;     /* parts not finished; the background thread's */
    int shutdown; /* not a collective: stop the background thread */
    struct hvd_request *next;
    int nparts;
    struct hvd_work parts[];
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
    /* The transport (transport/transport.h), chosen once at hvd_init and
     * the ring until then, and the state the transports keep. */
    const struct hvd_transport *tp;
    struct hvd_ring ring; /* every rank (ring), or a job of one */
    struct hvd_topo topo;
    struct hvd_shm shm;    /* this host's ranks (shm and hier) */
    struct hvd_ring xring; /* one leader per host (hier) */
    struct hvd_mpi *mpi;   /* MPI's handles (mpi) */

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
    struct hvd_request *head, *tail; /* submitted, not taken yet */
    /* Taken and announced, or to be announced in the next cycle. */
    struct hvd_work **pend; /* hash chains by name */
    size_t npend_slots;
    struct hvd_work **fresh; /* not announced yet */
    size_t nfresh, fresh_cap;
    struct hvd_neg neg;
    _Atomic unsigned long long noname; /* names of unnamed calls */
    double cycle_ms;         /* least time between cycles this rank starts */
    size_t fusion_threshold; /* bytes; 0 disables fusion */
    int force_staging;       /* device buffers always take the host path */
    struct hvd_timeline tl;  /* rank 0 only */
    /* Stall inspector (rank 0): warn after stall_warn_s, give up after
     * stall_shutdown_s (0: never). */
    int stall_off;
    double stall_warn_s, stall_shutdown_s;
    int64_t stall_next_us, stall_warned_us;
    char **stall_names; /* to give up on in the next cycle */
    size_t nstall;
    uint8_t *fuse_buf;
    size_t fuse_cap;
    int64_t last_cycle_us;
    struct hvd_nccl *nccl; /* made at the first device operation */
    int failed;            /* sticky: every later collective fails with this */
    int fail_rc;
    char fail_msg[HVD_ERRMSG];
};

/* Who started this process, which decides how hvd_init joins the job. */
enum hvd_join_kind {
    HVD_JOIN_ALONE,      /* nobody: a job of one */
    HVD_JOIN_HOROVODRUN, /* the env contract and the rendezvous server */
    HVD_JOIN_MPI         /* mpirun, or HOROVOD_CONTROLLER=mpi */
};
/* The kind from the environment, or a negative code (with err filled)
 * when it asks for MPI and this build has none. */
int hvd__join_kind(char *err, size_t errlen);
/* Meets the other ranks (env, rendezvous, then the transport's connect). */
int hvd__join(struct hvd_ctx *c, char *err, size_t errlen);
/* What hvd__join hands a transport's connect entry. */
struct hvd_rdv_peers;
struct hvd_link {
    int lfd;                        /* listening for peers */
    const struct hvd_rdv_peers *pt; /* every rank's address and host */
    int64_t deadline;               /* hvd__now_ms() clock */
};
/* Connects ring r to global rank next and accepts global rank prev, with
 * the hellos of the ring of every rank or (cross) of host leaders. */
int hvd__join_ring(struct hvd_ctx *c, struct hvd_ring *r, int cross, int next,
                   int prev, const struct hvd_link *l, char *err,
                   size_t errlen);
/* Sets up shared memory among this host's ranks, if it has more than one. */
int hvd__join_shm(struct hvd_ctx *c, const struct hvd_link *l, char *err,
                  size_t errlen);
/* A 0/1 setting from the environment: dflt when unset or empty, else
 * whether its number is nonzero. */
int hvd__env_flag(const char *name, int dflt);
/* Starts the background thread. */
int hvd__engine_start(struct hvd_ctx *c);
/* Hands op to the thread; it completes on its own (hvd__engine_wait). */
void hvd__engine_submit(struct hvd_ctx *c, struct hvd_request *op);
/* Waits for op to complete and returns its code. */
int hvd__engine_wait(struct hvd_ctx *c, struct hvd_request *op);
/* Failures (failure.c): the first one is sticky and fails every later
 * collective. */
void hvd__set_failed(struct hvd_ctx *c, int rc, const char *msg);
/* Reads the rendezvous server's news (ABORT of a failed rank, or its end). */
void hvd__read_rdv(struct hvd_ctx *c);
/* The ring's abort hook (see struct hvd_ring). */
int hvd__check_abort(void *vctx, char *err, size_t errlen);
/* A failure seen on the ring: returns the code to fail with. */
int hvd__ring_failed(struct hvd_ctx *c, int rc, const char *err);
/* Rank 0's stall inspector (stall.c), run between cycles. */
void hvd__stall_check(struct hvd_ctx *c);
/* Runs one collective on the ring (background thread). */
int hvd__exec(struct hvd_ctx *c, struct hvd_work *w);
/* The first step of an allgather: every rank's element count of w into
 * w->counts, over the host transport; *total gets their bytes together. */
int hvd__exec_counts(struct hvd_ctx *c, struct hvd_work *w, size_t *total,
                     char *err, size_t errlen);
/* Runs n ready allreduces of one dtype and op as fused collectives. */
int hvd__fused_allreduce(struct hvd_ctx *c, struct hvd_work **ws, int n,
                         char *err, size_t errlen);
/* Every rank's len bytes, in rank order: *all (malloc) and lens[size]. */
int hvd__exec_gather(struct hvd_ctx *c, const uint8_t *mine, size_t len,
                     uint8_t **all, size_t *lens, char *err, size_t errlen);
/* Sets w->device when w's buffers are CUDA device memory; HVD_EINVAL when
 * one is and the other is not. */
int hvd__device_classify(struct hvd_work *w, char *err, size_t errlen);
/* Runs one negotiated operation, or n fused allreduces, on device buffers:
 * NCCL, or staged through host memory. */
int hvd__device_exec(struct hvd_ctx *c, struct hvd_work **ws, int n, char *err,
                     size_t errlen);
/* Frees what the device paths made (the NCCL communicator). */
void hvd__device_close(struct hvd_ctx *c);
/* Stops the thread (says goodbye to the rendezvous server) and joins it. */
void hvd__engine_stop(struct hvd_ctx *c);

#endif
