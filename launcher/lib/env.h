/* Builds each rank's env contract and picks its GPU. */
#ifndef HVD_ENV_H
#define HVD_ENV_H

#include <stddef.h>

#include "launcher/lib/plan.h"
#include "launcher/lib/strvec.h"

struct hvd_endpoints {
    const char *rdv_addr; /* rendezvous server */
    int rdv_port;
    const char *master_addr; /* torch.distributed master (rank 0's host) */
    int master_port;
    const char *secret_hex; /* job secret */
    double start_timeout;   /* seconds for all ranks to meet */
    /* Horovod's Gloo rendezvous store (port 0: none, so real Horovod
     * ranks fail to meet instead of running alone), the interface of the
     * rendezvous address ("" when unknown: Gloo's default) and the comma
     * list for NCCL (NULL: the Gloo interface); NULL gloo_iface: no Gloo
     * variables at all. */
    int gloo_port;
    const char *gloo_iface;
    const char *nccl_ifnames;
};

/*
 * A rank's place in the job, which the per-rank variables tell it. A
 * negative cross_rank is not known (hvd-mpi-rank, when mpirun did not
 * follow horovodrun's plan): the cross variables are then not given.
 */
struct hvd_env_place {
    int rank, size;
    int local_rank, local_size;
    int cross_rank, cross_size;
    const char *host;
};

/* Where the per-rank variables go: value NULL means "not given". Returns
 * 0 or a negative error, which stops the walk. */
typedef int (*hvd_env_put_fn)(void *ctx, const char *name, const char *value);

/* Appends "NAME=value" to the hvd_strvec ctx; nothing for NULL. */
int hvd_env_put_strvec(void *ctx, const char *name, const char *value);
/* Sets NAME in this process's environment, or unsets it for NULL. */
int hvd_env_put_process(void *ctx, const char *name, const char *value);

/* Gives put every per-rank variable (one table for horovodrun's ranks and
 * hvd-mpi-rank's). Returns 0 or put's first error. */
int hvd_env_place_put(const struct hvd_env_place *pl, hvd_env_put_fn put,
                      void *ctx);

/* Appends the contract variables ("NAME=value") for one rank to env: the
 * per-rank ones, then the rendezvous, torch's master and Gloo's. */
int hvd_env_contract(struct hvd_strvec *env, const struct hvd_plan *p,
                     const struct hvd_hostlist *hl, int rank,
                     const struct hvd_endpoints *ep);

/* The same for a rank whose place is given as it is (an elastic job's,
 * whose plan is not a fixed job's). */
int hvd_env_contract_place(struct hvd_strvec *env,
                           const struct hvd_env_place *pl,
                           const struct hvd_endpoints *ep);

/*
 * The device a rank should see when the host has ngpus GPUs: with visible
 * (the user's own CUDA_VISIBLE_DEVICES, may be NULL) the entry local_rank
 * modulo its length, else local_rank modulo ngpus. Writes it to out and
 * returns 1, or returns 0 when there is nothing to pin (no GPUs).
 */
int hvd_gpu_pick(const char *visible, int ngpus, int local_rank, char *out,
                 size_t outlen);

/* GPUs on this host, from /proc/driver/nvidia/gpus or the test hook. */
int hvd_gpu_count(void);

#endif
