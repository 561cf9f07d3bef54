/* horovodrun's own stdin, read a block at a time in libuv's thread pool
 * for whatever forwards it to rank 0 (an agent, or mpirun). */
#ifndef HR_STDIN_READER_H
#define HR_STDIN_READER_H

#include <stddef.h>
#include <uv.h>

struct hr_stdin;

/* A block of n bytes in buf; n 0 is the end of input (or an unreadable
 * stdin). */
typedef void (*hr_stdin_cb)(struct hr_stdin *in, const char *buf, size_t n);

struct hr_stdin {
    uv_loop_t *loop;
    hr_stdin_cb cb;
    void *data;
    uv_fs_t req;
    int busy; /* a read is under way: it may block until input comes */
    char buf[65536];
};

void hr_stdin_init(struct hr_stdin *in, uv_loop_t *loop, hr_stdin_cb cb,
                   void *data);
/* Starts the next read unless one is under way; the callback may start
 * the one after. In the background of a terminal, whose input belongs to
 * the foreground job, it gives the end of input at once instead of
 * stopping horovodrun with SIGTTIN. */
void hr_stdin_read(struct hr_stdin *in);

#endif
