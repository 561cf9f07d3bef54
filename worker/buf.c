/* Growable byte buffers (buf.h). */
#include "worker/buf.h"

#include <stdlib.h>

#include "common/hvd_err.h"

int hvd__grow(uint8_t **buf, size_t *cap, size_t want)
{
    if (*cap >= want)
        return 0;
    uint8_t *nb = realloc(*buf, want);
    if (nb == NULL)
        return HVD_ENOMEM;
    *buf = nb;
    *cap = want;
    return 0;
}
