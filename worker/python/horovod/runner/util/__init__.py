"""Utilities of Horovod's runner package: see horovod.runner.util.threads."""
