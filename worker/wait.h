/* The clock, and what every wait loop of libhvd shares: the one abort
 * state, a spin budget, and poll timeouts from deadlines. */
#ifndef HVD_WAIT_H
#define HVD_WAIT_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic milliseconds and microseconds. */
int64_t hvd__now_ms(void);
int64_t hvd__now_us(void);

/*
 * How a wait hears that the job failed elsewhere. While fd (the
 * rendezvous connection; -1: none) is readable, or once deadline has
 * passed, check is asked: it returns 0 to go on, or a negative code with
 * err filled to fail the wait. check sets deadline when a failure was
 * announced: until then (hvd__now_ms clock) a collective may still finish
 * with data already on its way. 0: no failure announced.
 */
struct hvd_abort {
    int fd;
    int (*check)(void *ctx, char *err, size_t errlen);
    void *ctx;
    int64_t deadline;
};

/* The fd to poll for ab (-1, which poll ignores, when ab is NULL). */
int hvd__abort_fd(const struct hvd_abort *ab);
/* Asks ab's check when readable (its fd polled readable) or once its
 * deadline has passed: 0, or the code to fail with. ab may be NULL. */
int hvd__abort_poll(struct hvd_abort *ab, int readable, char *err,
                    size_t errlen);

/* A busy-wait budget, zeroed when a wait finds nothing to do. */
struct hvd_spin {
    int64_t since_us; /* when the wait began idle; 0: not yet */
};
/* Microseconds the wait has been idle: 0 on the first call. */
int64_t hvd__spin_spent(struct hvd_spin *s);

/* A poll(2) timeout in ms until the earlier of deadlines a and b
 * (hvd__now_ms clock; 0 or less: none), at most cap_ms (negative: no cap),
 * 0 when one has passed, -1 when there is none of the three. */
int hvd__poll_timeout(int64_t a, int64_t b, int cap_ms);

#endif
