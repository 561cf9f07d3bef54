/* Where detached jobs live: this user's folder of job folders. */
#ifndef HR_JOBDIR_H
#define HR_JOBDIR_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#define HR_JOB_ID_LEN 8 /* hex digits */
/* A Unix socket's path must fit sun_path. */
#define HR_JOBDIR_SOCK_MAX 100

/* What a job folder says about its job. */
struct hr_jobinfo {
    char id[HR_JOB_ID_LEN + 1];
    long pid;     /* the job controller */
    long started; /* seconds since the epoch */
    int ranks;
    char cmd[256];
    char output[PATH_MAX]; /* the per-rank files */
    int ended;             /* its status file exists */
    int code;              /* horovodrun's exit code, once ended */
    char summary[512];     /* its last message, once ended */
};

/*
 * This user's folder of jobs: $XDG_RUNTIME_DIR/horovodrun when that is
 * set, else ~/.horovodrun; made (mode 0700) when create. A folder that
 * another user owns or that others may write is refused. 0, or HVD_EIO
 * with one line in err.
 */
int hr_jobdir_root(char *out, size_t len, int create, char *err, size_t errlen);
/* Makes a new job folder root/ID (0700) with a random id: 0 or HVD_EIO
 * with err set. */
int hr_jobdir_new(const char *root, char id[HR_JOB_ID_LEN + 1], char *err,
                  size_t errlen);
/* root/id/name into out: 0, or HVD_EINVAL when it does not fit. */
int hr_jobdir_path(char *out, size_t len, const char *root, const char *id,
                   const char *name);
/* Writes root/id/name through a temporary file and a rename, so that it
 * is whole or absent: fill writes the content and returns 0. 0 or
 * HVD_EIO. */
int hr_jobdir_write(const char *root, const char *id, const char *name,
                    int (*fill)(FILE *f, void *arg), void *arg);
/* Writes root/id's info (ended and what follows are not written), or its
 * status (code and summary); each whole or not at all. 0 or HVD_EIO. */
int hr_jobdir_write_info(const char *root, const struct hr_jobinfo *ji);
int hr_jobdir_write_status(const char *root, const char *id, int code,
                           const char *summary);
/* Reads job id's info and status: 0, or HVD_EIO when it has no info. */
int hr_jobdir_read(const char *root, const char *id, struct hr_jobinfo *ji);
/*
 * The job whose id is or starts with prefix, into id. 0, or HVD_EINVAL
 * with err naming no job or several.
 */
int hr_jobdir_find(const char *root, const char *prefix,
                   char id[HR_JOB_ID_LEN + 1], char *err, size_t errlen);
/* Whether the job's controller still runs. */
int hr_jobdir_alive(const struct hr_jobinfo *ji);
/* Calls fn on each job id in root: 0, or HVD_EIO when root cannot be
 * read (none is no job). */
int hr_jobdir_each(const char *root, void (*fn)(void *arg, const char *id),
                   void *arg);
/* Removes job id's folder (not its output files). */
void hr_jobdir_remove(const char *root, const char *id);

#endif
