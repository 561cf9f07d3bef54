/* Env contract values for a rank, and GPU selection. */
#include "launcher/lib/env.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"

/* Which part of a rank's place a variable tells. */
enum place_part {
    PART_RANK,
    PART_SIZE,
    PART_LOCAL_RANK,
    PART_LOCAL_SIZE,
    PART_CROSS_RANK, /* both cross parts: not given when unknown */
    PART_CROSS_SIZE,
    PART_HOST,
};

/* The per-rank variables, Horovod's and torch.distributed's. */
static const struct {
    const char *name;
    enum place_part part;
} rank_vars[] = {
    {HVD_ENV_RANK, PART_RANK},
    {HVD_ENV_SIZE, PART_SIZE},
    {HVD_ENV_LOCAL_RANK, PART_LOCAL_RANK},
    {HVD_ENV_LOCAL_SIZE, PART_LOCAL_SIZE},
    {HVD_ENV_CROSS_RANK, PART_CROSS_RANK},
    {HVD_ENV_CROSS_SIZE, PART_CROSS_SIZE},
    {HVD_ENV_HOSTNAME, PART_HOST},
    {HVD_ENV_TORCH_RANK, PART_RANK},
    {HVD_ENV_TORCH_WORLD_SIZE, PART_SIZE},
    {HVD_ENV_TORCH_LOCAL_RANK, PART_LOCAL_RANK},
    {HVD_ENV_TORCH_LOCAL_WORLD_SIZE, PART_LOCAL_SIZE},
};

/* The value of one part, in buf when it is a number; NULL when unknown. */
static const char *part_value(const struct hvd_env_place *pl,
                              enum place_part part, char *buf, size_t len)
{
    int v;
    switch (part) {
    case PART_RANK:
        v = pl->rank;
        break;
    case PART_SIZE:
        v = pl->size;
        break;
    case PART_LOCAL_RANK:
        v = pl->local_rank;
        break;
    case PART_LOCAL_SIZE:
        v = pl->local_size;
        break;
    case PART_CROSS_RANK:
        if (pl->cross_rank < 0)
            return NULL;
        v = pl->cross_rank;
        break;
    case PART_CROSS_SIZE:
        if (pl->cross_rank < 0)
            return NULL;
        v = pl->cross_size;
        break;
    default: /* PART_HOST */
        return pl->host;
    }
    snprintf(buf, len, "%d", v);
    return buf;
}

int hvd_env_place_put(const struct hvd_env_place *pl, hvd_env_put_fn put,
                      void *ctx)
{
    char buf[32];
    int err = 0;
    for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++) {
        const char *v = part_value(pl, rank_vars[i].part, buf, sizeof(buf));
        if ((err = put(ctx, rank_vars[i].name, v)) != 0)
            break;
    }
    return err;
}

int hvd_env_put_strvec(void *ctx, const char *name, const char *value)
{
    return value ? hvd_strvec_pushf(ctx, "%s=%s", name, value) : 0;
}

int hvd_env_put_process(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    int rc = value ? setenv(name, value, 1) : unsetenv(name);
    return rc == 0 ? 0 : HVD_ENOMEM;
}

int hvd_env_contract(struct hvd_strvec *env, const struct hvd_plan *p,
                     const struct hvd_hostlist *hl, int rank,
                     const struct hvd_endpoints *ep)
{
    if (rank < 0 || rank >= p->size)
        return HVD_EINVAL;
    const struct hvd_slot *s = &p->ranks[rank];
    const struct hvd_env_place pl = {
        .rank = s->rank,
        .size = p->size,
        .local_rank = s->local_rank,
        .local_size = s->local_size,
        .cross_rank = s->cross_rank,
        .cross_size = s->cross_size,
        .host = hl->hosts[s->host].name,
    };
    return hvd_env_contract_place(env, &pl, ep);
}

int hvd_env_contract_place(struct hvd_strvec *env,
                           const struct hvd_env_place *pl,
                           const struct hvd_endpoints *ep)
{
    int err = hvd_env_place_put(pl, hvd_env_put_strvec, env);
    /* Each line is one variable; stop at the first failure. */
    if (err ||
        (err = hvd_strvec_pushf(env, HVD_ENV_RDV_ADDR "=%s", ep->rdv_addr)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_RDV_PORT "=%d", ep->rdv_port)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_SECRET "=%s", ep->secret_hex)) ||
        (err = hvd_strvec_pushf(env, HVD_ENV_START_TIMEOUT "=%g",
                                ep->start_timeout)) ||
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
