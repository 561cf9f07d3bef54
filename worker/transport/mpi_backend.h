/* libhvd's MPI backend: the job's place from MPI when mpirun started the
 * ranks, and the MPI transport (hvd__transport_mpi: its collectives, and
 * the doorbells that call an idle rank into a negotiation cycle). (Not "mpi.h",
 * which would hide the MPI library's own header from the files of this folder.)
 */
#ifndef HVD_MPI_BACKEND_H
#define HVD_MPI_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "hvd_build.h"
#include "hvd.h"

struct hvd_ctx;
/* MPI's handles: opaque, so that only mpi_backend.c includes <mpi.h>. */
struct hvd_mpi;

#if HVD_HAVE_MPI

/*
 * Initializes MPI (unless the program did), takes rank, size, local and
 * cross rank and size from it, and sets the MPI transport (c->tp). On the
 * thread that calls hvd_init; every later MPI call but hvd__mpi_close's is made
 * by the background thread.
 */
int hvd__mpi_join(struct hvd_ctx *c, char *err, size_t errlen);
/* Frees what hvd__mpi_join made and finalizes MPI if libhvd initialized
 * it; after the background thread has ended. */
void hvd__mpi_close(struct hvd_ctx *c);

#else

/* A build without MPI never joins through MPI (hvd__join_kind says so
 * first): these keep the callers free of #if. */
static inline int hvd__mpi_join(struct hvd_ctx *c, char *err, size_t errlen)
{
    (void)c, (void)err, (void)errlen;
    return HVD_ENOTSUP;
}
static inline void hvd__mpi_close(struct hvd_ctx *c)
{
    (void)c;
}

#endif

#endif
