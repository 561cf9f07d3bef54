/* The clock and the pieces every wait loop shares (wait.h). */
#include "worker/wait.h"

#include <time.h>

int64_t hvd__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t hvd__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int hvd__abort_fd(const struct hvd_abort *ab)
{
    return ab ? ab->fd : -1;
}

int hvd__abort_poll(struct hvd_abort *ab, int readable, char *err,
                    size_t errlen)
{
    if (ab == NULL ||
        !(readable || (ab->deadline > 0 && hvd__now_ms() >= ab->deadline)))
        return 0;
    int rc = ab->check(ab->ctx, err, errlen);
    return rc < 0 ? rc : 0;
}

int64_t hvd__spin_spent(struct hvd_spin *s)
{
    int64_t now = hvd__now_us();
    if (s->since_us == 0)
        s->since_us = now;
    return now - s->since_us;
}

int hvd__poll_timeout(int64_t a, int64_t b, int cap_ms)
{
    int64_t until = a > 0 ? a : 0;
    if (b > 0 && (until == 0 || b < until))
        until = b;
    if (until == 0)
        return cap_ms < 0 ? -1 : cap_ms;
    int64_t left = until - hvd__now_ms();
    if (left < 0)
        left = 0;
    if (cap_ms >= 0 && left > cap_ms)
        left = cap_ms;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}
