"""What the tests that start Open MPI share: under the sanitizers, Open
MPI's own reports are suppressed (the files next to this one), nothing
else."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def add_openmpi_suppressions(env):
    """Adds the suppressions to env's sanitizer options; returns env."""
    for name, opt in (
            ("LSAN_OPTIONS",
             "suppressions=" + os.path.join(HERE, "lsan-openmpi.supp")),
            ("ASAN_OPTIONS", "fast_unwind_on_malloc=0"),
            ("TSAN_OPTIONS",
             "suppressions=" + os.path.join(HERE, "tsan-openmpi.supp"))):
        env[name] = env[name] + ":" + opt if env.get(name) else opt
    return env
