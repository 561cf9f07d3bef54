/* The host topology from the rendezvous layout, and the transport it
 * calls for. */
#include "worker/transport/topo.h"

#include <stdlib.h>
#include <string.h>

#include "common/envc.h"
#include "common/hvd_err.h"
#include "common/rdvlayout.h"
#include "worker/setting.h"
#include "worker/transport/shm.h"
#include "worker/transport/transport.h"

int hvd__topo_build(struct hvd_topo *t, const struct hvd_rdv_layout *l,
                    int rank)
{
    memset(t, 0, sizeof(*t));
    t->nhosts = l->nhosts;
    t->host = l->host_of[rank];
    t->first = calloc((size_t)l->nhosts, sizeof(int));
    t->count = calloc((size_t)l->nhosts, sizeof(int));
    if (t->first == NULL || t->count == NULL)
        return HVD_ENOMEM;
    memcpy(t->first, l->first, (size_t)l->nhosts * sizeof(int));
    t->contiguous = 1;
    for (int r = 0; r < l->size; r++) {
        int h = l->host_of[r];
        /* A host seen before comes back. */
        if (r > 0 && h != l->host_of[r - 1] && l->first[h] != r)
            t->contiguous = 0;
        if (++t->count[h] > t->most)
            t->most = t->count[h];
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
