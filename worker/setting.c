/* Settings from the environment (setting.h). */
#include "worker/setting.h"

#include <stdlib.h>

int hvd__env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? atoi(v) != 0 : dflt;
}
