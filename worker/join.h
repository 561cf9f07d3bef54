/* How hvd_init joins the job: who started this process, the rendezvous,
 * then the transport's connect entry (transport/connect.h holds what the
 * entries use). */
#ifndef HVD_JOIN_H
#define HVD_JOIN_H

#include <stddef.h>

struct hvd_ctx;

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
/* Says goodbye to the rendezvous server and waits (up to a second) until
 * it has closed the connection, so that a later hvd_init in this process
 * finds this rank's place free. */
void hvd__join_leave(struct hvd_ctx *c);

#endif
