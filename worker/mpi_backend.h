/* libhvd's MPI backend: the job's place from MPI when mpirun started the
 * ranks, the collectives of HVD_COLL_MPI, and the doorbells that call an
 * idle rank into a negotiation cycle. (Not "mpi.h", which would hide the
 * MPI library's own header from the files of this folder.) */
#ifndef HVD_MPI_BACKEND_H
#define HVD_MPI_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "hvd_build.h"
#include "include/hvd.h"

struct hvd_ctx;
/* MPI's handles: opaque, so that only mpi_backend.c includes <mpi.h>. */
struct hvd_mpi;

#if HVD_HAVE_MPI

/*
 * Initializes MPI (unless the program did), takes rank, size, local and
 * cross rank and size from it, and sets the MPI transport. On the thread
 * that calls hvd_init; every later MPI call but hvd__mpi_close's is made
 * by the background thread.
 */
int hvd__mpi_join(struct hvd_ctx *c, char *err, size_t errlen);
/* Frees what hvd__mpi_join made and finalizes MPI if libhvd initialized
 * it; after the background thread has ended. */
void hvd__mpi_close(struct hvd_ctx *c);

/* As the hvd__coll_* functions of the same names, through MPI. */
int hvd__mpi_allreduce(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                       size_t count, hvd_dtype dt, hvd_op op, char *err,
                       size_t errlen);
int hvd__mpi_broadcast(struct hvd_ctx *c, void *buf, size_t bytes, int root,
                       char *err, size_t errlen);
int hvd__mpi_allgatherv(struct hvd_ctx *c, const void *sendbuf, void *recvbuf,
                        const size_t *bytes, char *err, size_t errlen);

/* Whether another rank has rung this one into the next cycle. */
int hvd__mpi_peer_started(struct hvd_mpi *m);
/* A cycle starts: rings the other ranks unless one of them rang first. */
void hvd__mpi_cycle_start(struct hvd_mpi *m);
/* How long the idle thread may sleep before it looks for bells again, in
 * microseconds; longer each time, until a cycle runs. */
int64_t hvd__mpi_idle_us(struct hvd_mpi *m);
/* One line on the transport, for HOROVOD_LOG_LEVEL=debug. */
void hvd__mpi_describe(const struct hvd_mpi *m, char *out, size_t len);

#else

/* A build without MPI never picks the MPI transport: these are never
 * called, but keep the callers free of #if. */
static inline int hvd__mpi_join(struct hvd_ctx *c, char *err, size_t errlen)
{
    (void)c, (void)err, (void)errlen;
    return HVD_ENOTSUP;
}
static inline void hvd__mpi_close(struct hvd_ctx *c)
{
    (void)c;
}
static inline int hvd__mpi_allreduce(struct hvd_ctx *c, const void *sendbuf,
                                     void *recvbuf, size_t count, hvd_dtype dt,
                                     hvd_op op, char *err, size_t errlen)
{
    (void)c, (void)sendbuf, (void)recvbuf, (void)count, (void)dt, (void)op;
    (void)err, (void)errlen;
    return HVD_ENOTSUP;
}
static inline int hvd__mpi_broadcast(struct hvd_ctx *c, void *buf, size_t bytes,
                                     int root, char *err, size_t errlen)
{
    (void)c, (void)buf, (void)bytes, (void)root, (void)err, (void)errlen;
    return HVD_ENOTSUP;
}
static inline int hvd__mpi_allgatherv(struct hvd_ctx *c, const void *sendbuf,
                                      void *recvbuf, const size_t *bytes,
                                      char *err, size_t errlen)
{
    (void)c, (void)sendbuf, (void)recvbuf, (void)bytes, (void)err;
    (void)errlen;
    return HVD_ENOTSUP;
}
static inline int hvd__mpi_peer_started(struct hvd_mpi *m)
{
    (void)m;
    return 0;
}
static inline void hvd__mpi_cycle_start(struct hvd_mpi *m)
{
    (void)m;
}
static inline int64_t hvd__mpi_idle_us(struct hvd_mpi *m)
{
    (void)m;
    return -1;
}
static inline void hvd__mpi_describe(const struct hvd_mpi *m, char *out,
                                     size_t len)
{
    (void)m;
    if (len > 0)
        out[0] = '\0';
}

#endif

#endif
