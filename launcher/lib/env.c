/* Env contract values for a rank, and GPU selection. */
#include "env.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"

int hvd_env_contract(struct hvd_strvec *env, const struct hvd_plan *p,
                     const struct hvd_hostlist *hl, int rank,
                     const struct hvd_endpoints *ep)
{
    if (rank < 0 || rank >= p->size)
        return HVD_EINVAL;
    const struct hvd_slot *s = &p->ranks[rank];
    int err = 0;
    /* Each line is one variable; stop at the first failure. */
    if ((err = hvd_strvec_pushf(env, HVD_ENV_RANK "=%d", s->rank)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_SIZE "=%d", p->size)) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_LOCAL_RANK "=%d", s->local_rank)) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_LOCAL_SIZE "=%d", s->local_size)) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_CROSS_RANK "=%d", s->cross_rank)) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_CROSS_SIZE "=%d", s->cross_size)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_HOSTNAME "=%s",
                                hl->hosts[s->host].name)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_RDV_ADDR "=%s", ep->rdv_addr)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_RDV_PORT "=%d", ep->rdv_port)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_SECRET "=%s", ep->secret_hex)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_START_TIMEOUT "=%g",
                                ep->start_timeout)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_TORCH_RANK "=%d", s->rank)) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_TORCH_WORLD_SIZE "=%d", p->size)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_TORCH_LOCAL_RANK "=%d",
                                s->local_rank)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_TORCH_LOCAL_WORLD_SIZE "=%d",
                                s->local_size)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_TORCH_MASTER_ADDR "=%s",
                                ep->master_addr)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_TORCH_MASTER_PORT "=%d",
                                ep->master_port)) ||
        (err = hvd_strvec_push(env, HVD_ENV_PYTHONUNBUFFERED "=1")))
        return err;
    if (ep->gloo_iface == NULL)
        return 0;
    /* What Horovod's own horovodrun gives a Gloo rank; the store is on the
     * rendezvous address. An empty interface is Gloo's default. */
    const char *nccl = ep->nccl_ifnames ? ep->nccl_ifnames : ep->gloo_iface;
    if ((err = hvd_strvec_pushf(env, HVD_ENV_GLOO_RDV_ADDR "=%s",
                                ep->rdv_addr)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_GLOO_RDV_PORT "=%d",
                                ep->gloo_port)) ||
        (err = hvd_strvec_push(env, HVD_ENV_CONTROLLER "=gloo")) ||
        (err = hvd_strvec_push(env, HVD_ENV_CPU_OPERATIONS "=gloo")) ||
        (err =
             hvd_strvec_pushf(env, HVD_ENV_GLOO_IFACE "=%s", ep->gloo_iface)) ||
        (nccl[0] != '\0' &&
         (err = hvd_strvec_pushf(env, HVD_ENV_NCCL_SOCKET_IFNAME "=%s", nccl))))
        return err;
    return 0;
}

int hvd_gpu_pick(const char *visible, int ngpus, int local_rank, char *out,
                 size_t outlen)
{
    if (local_rank < 0 || ngpus <= 0 || outlen == 0)
        return 0;
    if (visible != NULL && visible[0] != '\0') {
        /* Pick among the devices the user already restricted us to. */
        int n = 1;
        for (const char *c = visible; *c; c++)
            n += *c == ',';
        int want = local_rank % n;
        const char *start = visible;
        for (int i = 0; i < want; i++)
            start = strchr(start, ',') + 1;
        size_t len = strcspn(start, ",");
        if (len == 0 || len >= outlen)
            return 0;
        memcpy(out, start, len);
        out[len] = '\0';
        return 1;
    }
    snprintf(out, outlen, "%d", local_rank % ngpus);
    return 1;
}

int hvd_gpu_count(void)
{
    const char *fake = getenv(HVD_ENV_TEST_GPUS);
    if (fake != NULL && fake[0] != '\0') {
        char *end;
        long n = strtol(fake, &end, 10);
        return (*end == '\0' && n >= 0 && n < 4096) ? (int)n : 0;
    }
    /* The driver lists one directory per GPU; no CUDA needed to count. */
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}
