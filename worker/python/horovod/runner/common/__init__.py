"""Helpers shared by Horovod's runner and its workers: see
horovod.runner.common.util."""
