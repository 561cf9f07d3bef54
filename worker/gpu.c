/* Device memory queries and copies: the CUDA runtime in a CUDA build, the
 * test double when HVD_TEST_FAKE_GPU=1, and "all memory is host memory"
 * otherwise. */
#include "gpu.h"

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

/* The double's allocations: each a memfd mapped twice, once without
 * access (the "device" address handed out) and once readable and
 * writable (what the double's copies use). */
#define FAKE_MAX 256

struct fake_region {
    uint8_t *dev, *alias;
    size_t len;
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_fake;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_region g_regions[FAKE_MAX];
static int g_nregions;

static void read_env(void)
{
    const char *v = getenv(HVD_ENV_TEST_FAKE_GPU);
    g_fake = v && atoi(v) != 0;
}

int hvd__gpu_fake(void)
{
    pthread_once(&g_once, read_env);
    return g_fake;
}

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

int hvd__gpu_is_device(const void *p, int *device)
{
    *device = 0;
    if (p == NULL)
        return 0;
    if (hvd__gpu_fake())
        return fake_alias(p) != NULL;
#if HVD_HAVE_CUDA
    return hvd__cuda_is_device(p, device);
#else
    return 0;
#endif
}

int hvd__gpu_copy(void *dst, const void *src, size_t n, int device, char *err,
                  size_t errlen)
{
    if (n == 0)
        return 0;
    if (hvd__gpu_fake()) {
        uint8_t *d = fake_alias(dst);
        const uint8_t *s = fake_alias(src);
        memcpy(d ? d : dst, s ? s : src, n);
        return 0;
    }
#if HVD_HAVE_CUDA
    return hvd__cuda_copy(dst, src, n, device, err, errlen);
#else
    (void)device;
    snprintf(err, errlen, "this libhvd was built without CUDA");
    return HVD_ENOTSUP;
#endif
}

int hvd__gpu_alloc(void **p, size_t n, int device, char *err, size_t errlen)
{
    if (hvd__gpu_fake()) {
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
#if HVD_HAVE_CUDA
    return hvd__cuda_alloc(p, n, device, err, errlen);
#else
    (void)device;
    snprintf(err, errlen, "this libhvd was built without CUDA");
    return HVD_ENOTSUP;
#endif
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

void hvd__gpu_free(void *p)
{
    if (p == NULL)
        return;
    if (hvd__gpu_fake()) {
        fake_free(p);
        return;
    }
#if HVD_HAVE_CUDA
    hvd__cuda_free(p);
#endif
}

int hvd__gpu_count(void)
{
#if HVD_HAVE_CUDA
    return hvd__cuda_count();
#else
    return 0;
#endif
}
