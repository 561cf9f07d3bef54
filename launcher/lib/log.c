/* Prefixed one-line messages, each written to stderr with one write. */
#include "launcher/lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *log_prog = "horovodrun";
static int log_verbose;
typedef void (*log_fn_t)(void *arg, const char *line, size_t len);
/* Set and used by one thread; others only see that it is not theirs. */
static _Atomic(log_fn_t) log_fn;
static void *log_arg;
static _Atomic(pthread_t) log_thread;

void hvd_log_init(const char *prog, int verbose)
{
    log_prog = prog;
    log_verbose = verbose;
}

int hvd_log_verbose(void)
{
    return log_verbose;
}

void hvd_log_redirect(void (*fn)(void *arg, const char *line, size_t len),
                      void *arg)
{
    log_arg = arg;
    atomic_store(&log_thread, pthread_self());
    atomic_store(&log_fn, fn);
}

static void vlog(const char *level, const char *fmt, va_list ap)
{
    char line[4096];
    int saved = errno;
    int n = snprintf(line, sizeof(line), "%s: %s", log_prog, level);
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    log_fn_t fn = atomic_load(&log_fn);
    if (fn && pthread_equal(pthread_self(), atomic_load(&log_thread))) {
        fn(log_arg, line, len);
        errno = saved;
        return;
    }
    line[len++] = '\n';
    /* One write so that concurrent writers never split the line. */
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    errno = saved;
}

void hvd_log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("error: ", fmt, ap);
    va_end(ap);
}

void hvd_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog("warning: ", fmt, ap);
    va_end(ap);
}

void hvd_log_info(const char *fmt, ...)
{
    if (!log_verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}
