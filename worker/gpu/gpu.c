/* The choice of device path, once per process: the test double when
 * HVD_TEST_FAKE_GPU=1, else this build's (CUDA with NCCL, CUDA staged, or
 * "all memory is host memory"); the tables of the double and of none. */
#include "worker/gpu/gpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "hvd_build.h"
#include "worker/ctx.h"

/* The double's allocations: each a memfd mapped twice, once without
 * access (the "device" address handed out) and once readable and
 * writable (what the double's copies use). */
#define FAKE_MAX 256

struct fake_region {
    uint8_t *dev, *alias;
    size_t len;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_region g_regions[FAKE_MAX];
static int g_nregions;

void *hvd__gpu_fake_alloc(size_t n)
{
    size_t len = (n + 4095) & ~(size_t)4095;
    int fd = memfd_create("hvd-fake-gpu", MFD_CLOEXEC);
    void *dev = MAP_FAILED, *alias = MAP_FAILED;

    if (len == 0)
        len = 4096;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) {
        dev = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
        alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (fd >= 0)
        close(fd);
    pthread_mutex_lock(&g_mu);
    int ok = dev != MAP_FAILED && alias != MAP_FAILED && g_nregions < FAKE_MAX;
    if (ok)
        g_regions[g_nregions++] = (struct fake_region){dev, alias, len};
    pthread_mutex_unlock(&g_mu);
    if (ok)
        return dev;
    if (dev != MAP_FAILED)
        munmap(dev, len);
    if (alias != MAP_FAILED)
        munmap(alias, len);
    return NULL;
}

/* The double's readable address of p, or NULL when p is host memory. */
static uint8_t *fake_alias(const void *p)
{
    const uint8_t *b = p;
    uint8_t *a = NULL;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nregions && a == NULL; i++)
        if (b >= g_regions[i].dev && b < g_regions[i].dev + g_regions[i].len)
            a = g_regions[i].alias + (b - g_regions[i].dev);
    pthread_mutex_unlock(&g_mu);
    return a;
}

static int fake_is_device(const void *p, int *device)
{
    (void)device;
    return fake_alias(p) != NULL;
}

static int fake_copy(void *dst, const void *src, size_t n, int device,
                     char *err, size_t errlen)
{
    uint8_t *d = fake_alias(dst);
    const uint8_t *s = fake_alias(src);
    (void)device, (void)err, (void)errlen;
    memcpy(d ? d : dst, s ? s : src, n);
    return 0;
}

static int fake_alloc(void **p, size_t n, int device, char *err, size_t errlen)
{
    (void)device;
    *p = hvd__gpu_fake_alloc(n);
    if (*p == NULL) {
        snprintf(err, errlen,
                 "cannot allocate %zu bytes of fake device "
                 "memory",
                 n);
        return HVD_ENOMEM;
    }
    return 0;
}

/* Unmaps one of the double's allocations. */
static void fake_free(void *p)
{
    struct fake_region f = {NULL, NULL, 0};
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nregions; i++)
        if (g_regions[i].dev == p) {
            f = g_regions[i];
            g_regions[i] = g_regions[--g_nregions];
            break;
        }
    pthread_mutex_unlock(&g_mu);
    if (f.dev) {
        munmap(f.dev, f.len);
        munmap(f.alias, f.len);
    }
}

/* A stream of the double: queued writes, run by the waits of marks. */
#define FAKE_QUEUE 16

struct fake_write {
    void *dev;
    uint8_t *bytes;
    size_t n;
};

struct fake_stream {
    struct fake_write q[FAKE_QUEUE];
    int queued, done; /* written so far: q[done .. queued-1] wait */
};

/* A mark: the stream and how much it had queued. */
struct fake_mark {
    struct fake_stream *s;
    int upto;
};

void *hvd__gpu_fake_stream(void)
{
    return calloc(1, sizeof(struct fake_stream));
}

void hvd__gpu_fake_stream_write(void *stream, void *dev, const void *src,
                                size_t n)
{
    struct fake_stream *s = stream;
    uint8_t *copy = malloc(n + 1);
    if (copy == NULL || s->queued == FAKE_QUEUE) {
        free(copy);
        return;
    }
    memcpy(copy, src, n);
    pthread_mutex_lock(&g_mu);
    s->q[s->queued++] = (struct fake_write){dev, copy, n};
    pthread_mutex_unlock(&g_mu);
}

void hvd__gpu_fake_stream_free(void *stream)
{
    struct fake_stream *s = stream;
    for (int i = 0; s && i < s->queued; i++)
        free(s->q[i].bytes);
    free(s);
}

static int fake_mark(void *stream, int device, void **mark, char *err,
                     size_t errlen)
{
    struct fake_mark *m = malloc(sizeof(*m));
    (void)device;
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return HVD_ENOMEM;
    }
    m->s = stream;
    pthread_mutex_lock(&g_mu);
    m->upto = m->s ? m->s->queued : 0;
    pthread_mutex_unlock(&g_mu);
    *mark = m;
    return 0;
}

static int fake_wait_mark(void *mark, char *err, size_t errlen)
{
    struct fake_mark *m = mark;
    struct fake_stream *s = m->s;
    (void)err, (void)errlen;
    for (;;) {
        pthread_mutex_lock(&g_mu);
        struct fake_write w = {0};
        if (s && s->done < m->upto)
            w = s->q[s->done++];
        pthread_mutex_unlock(&g_mu);
        if (w.dev == NULL)
            break;
        fake_copy(w.dev, w.bytes, w.n, 0, NULL, 0);
    }
    free(m);
    return 0;
}

/* This build's own table: the one switch on what the build has. */
#if HVD_HAVE_NCCL
#define NATIVE hvd__gpu_nccl
#define FAKE_WHY "the test double stands in for CUDA"
#elif HVD_HAVE_CUDA
#define NATIVE hvd__gpu_cuda
#define FAKE_WHY "this libhvd was built without NCCL"
#else
/* Without CUDA no pointer is device memory: the rest is never reached
 * but says why, should it be. */
static int none_is_device(const void *p, int *device)
{
    (void)p, (void)device;
    return 0;
}

static int none_copy(void *dst, const void *src, size_t n, int device,
                     char *err, size_t errlen)
{
    (void)dst, (void)src, (void)n, (void)device;
    snprintf(err, errlen, "this libhvd was built without CUDA");
    return HVD_ENOTSUP;
}

static int none_alloc(void **p, size_t n, int device, char *err, size_t errlen)
{
    (void)p, (void)n, (void)device;
    snprintf(err, errlen, "this libhvd was built without CUDA");
    return HVD_ENOTSUP;
}

static void none_free(void *p)
{
    (void)p;
}

static int none_count(void)
{
    return 0;
}

static const struct hvd_gpu none = {
    .is_device = none_is_device,
    .copy = none_copy,
    .alloc = none_alloc,
    .free = none_free,
    .count = none_count,
    .staged_why = "this libhvd was built without NCCL",
};
#define NATIVE none
#define FAKE_WHY "this libhvd was built without NCCL"
#endif

/* The double counts the real devices: pinning asks it of hardware. */
static int fake_count(void)
{
    return NATIVE.count();
}

static const struct hvd_gpu fake = {
    .is_device = fake_is_device,
    .copy = fake_copy,
    .alloc = fake_alloc,
    .free = fake_free,
    .count = fake_count,
    .mark = fake_mark,
    .wait_mark = fake_wait_mark,
    .staged_why = FAKE_WHY,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const struct hvd_gpu *g_gpu;

static void choose(void)
{
    const char *v = getenv(HVD_ENV_TEST_FAKE_GPU);
    g_gpu = v && atoi(v) != 0 ? &fake : &NATIVE;
}

const struct hvd_gpu *hvd__gpu(void)
{
    pthread_once(&g_once, choose);
    return g_gpu;
}

int hvd__gpu_is_device(const void *p, int *device)
{
    *device = 0;
    if (p == NULL)
        return 0;
    return hvd__gpu()->is_device(p, device);
}

int hvd__gpu_copy(void *dst, const void *src, size_t n, int device, char *err,
                  size_t errlen)
{
    if (n == 0)
        return 0;
    return hvd__gpu()->copy(dst, src, n, device, err, errlen);
}

int hvd__gpu_alloc(void **p, size_t n, int device, char *err, size_t errlen)
{
    return hvd__gpu()->alloc(p, n, device, err, errlen);
}

void hvd__gpu_free(void *p)
{
    if (p == NULL)
        return;
    hvd__gpu()->free(p);
}

int hvd__gpu_mark(void *stream, int device, void **mark, char *err,
                  size_t errlen)
{
    const struct hvd_gpu *g = hvd__gpu();
    *mark = NULL;
    return g->mark ? g->mark(stream, device, mark, err, errlen) : 0;
}

int hvd__gpu_wait_mark(void **mark, char *err, size_t errlen)
{
    void *m = *mark;
    *mark = NULL;
    return m ? hvd__gpu()->wait_mark(m, err, errlen) : 0;
}

int hvd__gpu_count(void)
{
    return hvd__gpu()->count();
}

int hvd__gpu_device(const struct hvd_ctx *c)
{
    /* horovodrun's pinning leaves each rank one visible device. */
    const char *v = getenv(HVD_ENV_CUDA_VISIBLE);
    if (v && v[0] && strchr(v, ',') == NULL)
        return 0;
    int n = hvd__gpu_count();
    return n > 0 ? c->local_rank % n : c->local_rank;
}
