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
#include "worker/coll.h"
#include "worker/eager.h"
#include "worker/engine_state.h"
#include "hvd.h"
#include "worker/negotiate.h"
#include "worker/pset.h"
#include "worker/timeline.h"
#include "worker/transport/topo.h"
#include "worker/transport/ring.h"
#include "worker/transport/shm.h"
#include "worker/wait.h"

#define HVD_ERRMSG 512

/* Longest operation name, terminator included. */
#define HVD_NAME_MAX 256

enum hvd_op_kind {
    HVD_OP_ALLREDUCE, /* the values match enum hvd_req_kind */
    HVD_OP_BROADCAST,
    HVD_OP_ALLGATHER,
    HVD_OP_BARRIER,
    /* 4 is negotiation's HVD_REQ_STALL, which is no operation. */
    HVD_OP_REDUCESCATTER = 5,
    HVD_OP_ALLTOALL = 6,
    HVD_OP_JOIN = 7,
    HVD_OP_PSET_ADD = 8,
    HVD_OP_PSET_REMOVE = 9
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
    /* broadcast: the root (a global rank); process set remove: the set;
     * join and process set add: the answer (last rank, new set) */
    int root;
    int pset; /* the process set, 0 for every rank */
    /* The set's size, this rank's place in it (-1: a stand-in, which
     * takes part only to let the others run, standin.h) and its ranks,
     * while the background thread runs w. */
    int set_size, set_rank;
    const int *set_ranks;
    void **gathered;          /* allgather, alltoall result */
    size_t *counts;           /* allgather counts; alltoall counts received */
    size_t row;               /* reducescatter: elements per row */
    uint64_t shape;           /* hvd_next_shape's tag, 0: none */
    const size_t *sendcounts; /* alltoall: elements to each rank */
    char name[HVD_NAME_MAX];
    char err[HVD_ERRMSG];
    int64_t submit_us, announce_us; /* for the timeline */
    int compress;                   /* float32 sent as float16 */
    double prescale;                /* 1: none */
    double postscale;               /* 1: none */
    int device;                     /* the buffers are CUDA device memory */
    int device_id;                  /* on this device */
    /* What the caller's CUDA stream had queued at submission
     * (hvd_use_cuda_stream): waited for before the buffers are read. */
    void *mark;
    const void *dev_sendbuf; /* while staged through host memory */
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
    int sync;     /* a synchronous call: its caller waits for it at once */
    /* Not a collective either: start the timeline in tl_path (replacing
     * the one running) or, when tl_path is NULL, stop it. */
    int timeline;
    const char *tl_path;
    int tl_mark_cycles;
    /* A stand-in's own buffers (standin.h); NULL for the caller's ops. */
    struct hvd_standin *standin;
    struct hvd_request *next;
    int nparts;
    struct hvd_work parts[];
};

struct hvd_ctx {
    int rank, size;
    int local_rank, local_size;
    int cross_rank, cross_size;
    int standalone; /* not started by horovodrun: a job of one */
    int elastic_id; /* the process's id in an elastic job, or -1 */
    int peer_timeout_s;
    uint8_t secret[HVD_SECRET_LEN];
    int rdv_fd; /* stays open: failures of other ranks arrive on it */
    struct hvd_frame_reader rdv_reader;
    /* The transport (transport/transport.h), chosen once at hvd_init and
     * the ring until then, and the state the transports keep. */
    const struct hvd_transport *tp;
    struct hvd_ring ring; /* every rank (ring), or a job of one */
    struct hvd_topo topo;
    struct hvd_shm shm;     /* this host's ranks (shm and hier) */
    struct hvd_ring xring;  /* one leader per host (hier) */
    struct hvd_mpi *mpi;    /* MPI's handles (mpi) */
    struct hvd_abort abort; /* every wait hears of failures through this */

    /* The engine: who runs cycles, and the cycle's own state
     * (engine_state.h). Everything from here to the end but the engine's
     * locked and atomic fields is the engine holder's (docs/engine.md). */
    struct hvd_engine eng;
    int rings_ended; /* ring sockets whose sender left: 1 ring, 2 cross */
    struct hvd_neg neg;
    struct hvd_psets psets;
    _Atomic unsigned long long noname; /* names of unnamed calls */
    int force_staging;      /* device buffers always take the host path */
    struct hvd_timeline tl; /* rank 0 only */
    /* Stall inspector (rank 0): warn after stall_warn_s, give up after
     * stall_shutdown_s (0: never). */
    int stall_off;
    double stall_warn_s, stall_shutdown_s;
    int64_t stall_next_us, stall_warned_us;
    struct hvd_stalled {
        char *name;
        int pset;
    } * stall; /* to give up on in the next cycle */
    size_t nstall;
    uint8_t *fuse_buf;
    size_t fuse_cap;
    /* The negotiation's gather keeps its buffers from cycle to cycle
     * (hvd__exec_gather): a cycle at many ranks allocates none. */
    struct hvd_gather {
        uint8_t *blocks, *tails, *all;
        size_t blocks_cap, tails_cap, all_cap;
        size_t *bytes; /* per rank, in the current pass */
        size_t block;  /* the next first pass's block (0: the largest) */
    } gather;
    /* What the ranks' messages of the last cycle carried (eager.h). */
    struct hvd_eager_in eager_in;
    /* Waiting small allreduces whose data goes with every cycle's
     * requests (eager.h), and their cache ids. */
    struct hvd_eager_out {
        struct hvd_work *w;
        int32_t id;
    } eager[HVD_EAGER_MAX];
    int neager;
    struct hvd_nccl *nccl; /* made at the first device operation */
    int failed;            /* sticky: every later collective fails with this */
    int fail_rc;
    char fail_msg[HVD_ERRMSG];
};

#endif
