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
/* The address a rank's peers reach it at; unset, the address it reached
 * the rendezvous from. Set by an agent that carries the rendezvous (its
 * ranks then reach it on loopback). */
#define HVD_ENV_DATA_ADDR "HVD_DATA_ADDR"
/* Elastic jobs: "1" in every rank; the process's id, which it keeps
 * while its rank changes at resets; how long (s) a reset may wait for
 * enough hosts, which bounds hvd_init's wait for the new assignment. */
#define HVD_ENV_ELASTIC "HOROVOD_ELASTIC"
#define HVD_ENV_ELASTIC_ID "HOROVOD_ELASTIC_ID"
#define HVD_ENV_ELASTIC_TIMEOUT "HOROVOD_ELASTIC_TIMEOUT"
/* horovodrun: seconds between runs of --host-discovery-script (1). */
#define HVD_ENV_ELASTIC_DISCOVERY_INTERVAL "HOROVOD_ELASTIC_DISCOVERY_INTERVAL"
/* The job secret, 64 hex digits; only ever passed through the env. */
#define HVD_ENV_SECRET "HOROVOD_SECRET_KEY"

/* torch.distributed's env:// names, so its scripts run unchanged. */
#define HVD_ENV_TORCH_RANK "RANK"
#define HVD_ENV_TORCH_WORLD_SIZE "WORLD_SIZE"
#define HVD_ENV_TORCH_LOCAL_RANK "LOCAL_RANK"
#define HVD_ENV_TORCH_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define HVD_ENV_TORCH_MASTER_ADDR "MASTER_ADDR"
#define HVD_ENV_TORCH_MASTER_PORT "MASTER_PORT"

/* Horovod's Gloo rendezvous, for ranks that link real Horovod: its HTTP
 * store, the controller and CPU operations Horovod's own horovodrun picks,
 * and the interface its Gloo and NCCL connect through. */
#define HVD_ENV_GLOO_RDV_ADDR "HOROVOD_GLOO_RENDEZVOUS_ADDR"
#define HVD_ENV_GLOO_RDV_PORT "HOROVOD_GLOO_RENDEZVOUS_PORT"
#define HVD_ENV_CPU_OPERATIONS "HOROVOD_CPU_OPERATIONS"
#define HVD_ENV_GLOO_IFACE "HOROVOD_GLOO_IFACE"
#define HVD_ENV_NCCL_SOCKET_IFNAME "NCCL_SOCKET_IFNAME"

#define HVD_ENV_PYTHONUNBUFFERED "PYTHONUNBUFFERED"
#define HVD_ENV_CUDA_VISIBLE "CUDA_VISIBLE_DEVICES"

/* Runtime tuning that libhvd reads; horovodrun's options set them. */
#define HVD_ENV_CACHE_CAPACITY "HOROVOD_CACHE_CAPACITY"
#define HVD_ENV_CYCLE_TIME "HOROVOD_CYCLE_TIME"
#define HVD_ENV_FUSION_THRESHOLD "HOROVOD_FUSION_THRESHOLD"
#define HVD_ENV_HIERARCHICAL_ALLREDUCE "HOROVOD_HIERARCHICAL_ALLREDUCE"
#define HVD_ENV_PEER_TIMEOUT "HOROVOD_PEER_TIMEOUT"
#define HVD_ENV_LOG_LEVEL "HOROVOD_LOG_LEVEL"
/* "mpi": libhvd takes the job from MPI (worker/transport/mpi_backend.h);
 * any other value ("gloo", as for real Horovod) leaves it to the contract. */
#define HVD_ENV_CONTROLLER "HOROVOD_CONTROLLER"
#define HVD_ENV_MPI_THREADS_DISABLE "HOROVOD_MPI_THREADS_DISABLE"
/* Open MPI's view of a rank's place, as mpirun sets it. */
#define HVD_ENV_OMPI_RANK "OMPI_COMM_WORLD_RANK"
#define HVD_ENV_OMPI_RSH_AGENT "OMPI_MCA_plm_rsh_agent"
#define HVD_ENV_OMPI_SIZE "OMPI_COMM_WORLD_SIZE"
#define HVD_ENV_OMPI_LOCAL_RANK "OMPI_COMM_WORLD_LOCAL_RANK"
#define HVD_ENV_OMPI_LOCAL_SIZE "OMPI_COMM_WORLD_LOCAL_SIZE"
#define HVD_ENV_SHM_DISABLE "HOROVOD_SHM_DISABLE"
#define HVD_ENV_SPIN_US "HOROVOD_SPIN_US"
#define HVD_ENV_STALL_DISABLE "HOROVOD_STALL_CHECK_DISABLE"
#define HVD_ENV_STALL_SHUTDOWN "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"
#define HVD_ENV_STALL_WARN "HOROVOD_STALL_CHECK_TIME_SECONDS"
#define HVD_ENV_TIMELINE "HOROVOD_TIMELINE"
#define HVD_ENV_TIMELINE_MARK_CYCLES "HOROVOD_TIMELINE_MARK_CYCLES"
/* Horovod's other runtime settings, which horovodrun passes on for ranks
 * that link real Horovod (libhvd reads none of them). */
#define HVD_ENV_HIERARCHICAL_ALLGATHER "HOROVOD_HIERARCHICAL_ALLGATHER"
#define HVD_ENV_TORUS_ALLREDUCE "HOROVOD_TORUS_ALLREDUCE"
#define HVD_ENV_AUTOTUNE "HOROVOD_AUTOTUNE"
#define HVD_ENV_AUTOTUNE_LOG "HOROVOD_AUTOTUNE_LOG"
#define HVD_ENV_AUTOTUNE_WARMUP "HOROVOD_AUTOTUNE_WARMUP_SAMPLES"
#define HVD_ENV_AUTOTUNE_STEPS "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"
#define HVD_ENV_AUTOTUNE_BAYES "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"
#define HVD_ENV_AUTOTUNE_NOISE "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"
#define HVD_ENV_NUM_NCCL_STREAMS "HOROVOD_NUM_NCCL_STREAMS"
#define HVD_ENV_THREAD_AFFINITY "HOROVOD_THREAD_AFFINITY"
#define HVD_ENV_GLOO_TIMEOUT "HOROVOD_GLOO_TIMEOUT_SECONDS"
#define HVD_ENV_LOG_HIDE_TIME "HOROVOD_LOG_HIDE_TIME"
/* --tcp: NCCL keeps off InfiniBand, as under Horovod's horovodrun. */
#define HVD_ENV_NCCL_IB_DISABLE "NCCL_IB_DISABLE"

/* Launcher settings read from the environment. */
#define HVD_ENV_START_TIMEOUT "HOROVOD_START_TIMEOUT"
/* A Slurm allocation, as salloc, sbatch and srun set it. */
#define HVD_ENV_SLURM_JOB_NODELIST "SLURM_JOB_NODELIST"
#define HVD_ENV_SLURM_NODELIST "SLURM_NODELIST"
#define HVD_ENV_SLURM_TASKS_PER_NODE "SLURM_TASKS_PER_NODE"
#define HVD_ENV_SLURM_STEP_ID "SLURM_STEP_ID"
/* Test hook: the agent reports this many GPUs instead of counting them. */
#define HVD_ENV_TEST_GPUS "HVD_TEST_GPU_COUNT"
/* Test hook: libhvd's test double of CUDA device memory (see gpu.h). */
#define HVD_ENV_TEST_FAKE_GPU "HVD_TEST_FAKE_GPU"
/* libhvd stages CUDA device buffers through host memory even with NCCL
 * (NCCL refuses two ranks on one GPU). */
#define HVD_ENV_FORCE_GPU_STAGING "HVD_FORCE_GPU_STAGING"

#endif
