/* The host topology from the peer table, and the transport it calls for. */
#include "worker/transport/topo.h"

#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "worker/setting.h"
#include "worker/transport/shm.h"
#include "worker/transport/transport.h"

int hvd__topo_build(struct hvd_topo *t, int size, int rank,
                    const char *const *hosts)
{
    memset(t, 0, sizeof(*t));
    t->first = calloc((size_t)size, sizeof(int));
    t->count = calloc((size_t)size, sizeof(int));
    if (t->first == NULL || t->count == NULL)
        return HVD_ENOMEM;
    t->contiguous = 1;
    int prev = -1;
    for (int r = 0; r < size; r++) {
        int h = 0;
        while (h < t->nhosts && strcmp(hosts[t->first[h]], hosts[r]) != 0)
            h++;
        if (h == t->nhosts)
            t->first[t->nhosts++] = r;
        else if (h != prev)
            t->contiguous = 0; /* a host seen before comes back */
        t->count[h]++;
        if (t->count[h] > t->most)
            t->most = t->count[h];
        if (r == rank)
            t->host = h;
        prev = h;
    }
    return 0;
}

void hvd__topo_close(struct hvd_topo *t)
{
    if (t == NULL)
        return;
    free(t->first);
    free(t->count);
    free(t->buf);
    memset(t, 0, sizeof(*t));
}

const struct hvd_transport *hvd__topo_choose(const struct hvd_topo *t, int size)
{
    if (size < 2 || hvd__env_flag(HVD_ENV_SHM_DISABLE, 0) || t->most < 2 ||
        t->most > HVD_SHM_MAX)
        return &hvd__transport_ring;
    if (t->nhosts == 1)
        return &hvd__transport_shm;
    if (t->contiguous && hvd__env_flag(HVD_ENV_HIERARCHICAL_ALLREDUCE, 1))
        return &hvd__transport_hier;
    return &hvd__transport_ring;
}
