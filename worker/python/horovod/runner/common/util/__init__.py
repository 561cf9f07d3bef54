"""horovod.runner.common.util: see the env module."""
