/* A rank that prints the env contract horovodrun gave it (the demo job). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/envc.h"

int main(void)
{
    static const char *names[] = {
        HVD_ENV_RANK,
        HVD_ENV_SIZE,
        HVD_ENV_LOCAL_RANK,
        HVD_ENV_LOCAL_SIZE,
        HVD_ENV_CROSS_RANK,
        HVD_ENV_CROSS_SIZE,
        HVD_ENV_HOSTNAME,
        HVD_ENV_RDV_ADDR,
        HVD_ENV_RDV_PORT,
        HVD_ENV_TORCH_RANK,
        HVD_ENV_TORCH_WORLD_SIZE,
        HVD_ENV_TORCH_LOCAL_RANK,
        HVD_ENV_TORCH_LOCAL_WORLD_SIZE,
        HVD_ENV_TORCH_MASTER_ADDR,
        HVD_ENV_TORCH_MASTER_PORT,
        HVD_ENV_CUDA_VISIBLE,
    };
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    const char *secret = getenv(HVD_ENV_SECRET);
    printf("hello from rank %s of %s on %s (pid %d)\n",
           getenv(HVD_ENV_RANK) ? getenv(HVD_ENV_RANK) : "?",
           getenv(HVD_ENV_SIZE) ? getenv(HVD_ENV_SIZE) : "?", host,
           (int)getpid());
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        printf("  %s=%s\n", names[i], v ? v : "(unset)");
    }
    /* The secret itself is never printed, only whether it arrived. */
    printf("  %s is %s\n", HVD_ENV_SECRET,
           secret && secret[0] ? "set (64 hex digits)" : "missing");
    return 0;
}
