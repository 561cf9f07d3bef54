/* What the API's files share: the context, errors, and submitting ops. */
#ifndef HVD_API_H
#define HVD_API_H

#include "hvd.h"

struct hvd_ctx;
struct hvd_request;

/* The context hvd_init made, or NULL. */
struct hvd_ctx *hvd__api_ctx(void);
/* Sets this thread's hvd_last_error() to msg and returns rc. */
int hvd__api_fail(int rc, const char *msg);
/* A request of nparts zeroed parts, scale factors 1 (NULL: no memory). */
struct hvd_request *hvd__api_new_op(int nparts);
/* Hands op to the background thread (or runs it at once in a job of one);
 * *handle gets it. */
int hvd__api_start(struct hvd_request *op, hvd_handle *handle);
/*
 * The id of the process set this thread's collectives go to, after
 * checking that it exists, holds this rank and (root >= 0) holds root;
 * its size and this rank's place in it go to *n and *me (when not NULL).
 * A negative code, with the last error set, otherwise.
 */
int hvd__api_set(struct hvd_ctx *c, const char *what, int root, int *n,
                 int *me);

#endif
