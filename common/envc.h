/* Names of the env contract between the launcher and its ranks. */
#ifndef HVD_ENVC_H
#define HVD_ENVC_H

#define HVD_ENV_RANK "HOROVOD_RANK"
#define HVD_ENV_SIZE "HOROVOD_SIZE"
#define HVD_ENV_LOCAL_RANK "HOROVOD_LOCAL_RANK"
#define HVD_ENV_LOCAL_SIZE "HOROVOD_LOCAL_SIZE"
#define HVD_ENV_CROSS_RANK "HOROVOD_CROSS_RANK"
#define HVD_ENV_CROSS_SIZE "HOROVOD_CROSS_SIZE"
#define HVD_ENV_HOSTNAME "HOROVOD_HOSTNAME"
#define HVD_ENV_RDV_ADDR "HOROVOD_RENDEZVOUS_ADDR"
#define HVD_ENV_RDV_PORT "HOROVOD_RENDEZVOUS_PORT"
/* The job secret, 64 hex digits; only ever passed through the env. */
#define HVD_ENV_SECRET "HOROVOD_SECRET_KEY"

/* torch.distributed's env:// names, so its scripts run unchanged. */
#define HVD_ENV_TORCH_RANK "RANK"
#define HVD_ENV_TORCH_WORLD_SIZE "WORLD_SIZE"
#define HVD_ENV_TORCH_LOCAL_RANK "LOCAL_RANK"
#define HVD_ENV_TORCH_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define HVD_ENV_TORCH_MASTER_ADDR "MASTER_ADDR"
#define HVD_ENV_TORCH_MASTER_PORT "MASTER_PORT"

#define HVD_ENV_PYTHONUNBUFFERED "PYTHONUNBUFFERED"
#define HVD_ENV_CUDA_VISIBLE "CUDA_VISIBLE_DEVICES"

/* Launcher settings read from the environment. */
#define HVD_ENV_START_TIMEOUT "HOROVOD_START_TIMEOUT"
/* Test hook: the agent reports this many GPUs instead of counting them. */
#define HVD_ENV_TEST_GPUS "HVD_TEST_GPU_COUNT"

#endif
