/* horovodrun --config-file: Horovod's YAML layout, read into hr_opts. */
#ifndef HR_CONFIG_H
#define HR_CONFIG_H

#include <stddef.h>

#include "launcher/horovodrun/cli.h"

/*
 * Applies the settings of the YAML file at path to o through the options
 * they stand for, as Horovod's config_parser.py lays them out:
 *
 *   controller: gloo | mpi
 *   params: fusion_threshold_mb, cycle_time_ms, cache_capacity,
 *           hierarchical_allreduce, hierarchical_allgather, torus_allreduce
 *   autotune: enabled, log_file, warmup_samples, steps_per_sample,
 *             bayes_opt_max_samples, gaussian_process_noise
 *   timeline: filename, mark_cycles
 *   stall_check: enabled, warning_time_seconds, shutdown_time_seconds
 *   library_options: mpi_threads_disable, num_nccl_streams,
 *                    thread_affinity, gloo_timeout_seconds
 *   logging: level, with_timestamp
 *
 * A null value sets nothing. Keys Horovod does not read are skipped, as
 * Horovod skips them, with a line in o->warnings. Returns 0, or
 * HVD_EIO / HVD_EPARSE / HVD_ENOMEM with one line in err naming the file,
 * the line and the key.
 */
int hr_config_load(struct hr_opts *o, const char *path, char *err,
                   size_t errlen);

#endif
