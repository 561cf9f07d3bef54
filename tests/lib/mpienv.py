"""What the tests that start Open MPI share: under the sanitizers, Open
MPI's own reports are suppressed (the files in tests/mpi/), nothing
else."""

import os

# The suppression files stay with the MPI tests, in tests/mpi/.
SUPP_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi")


def add_openmpi_suppressions(env):
    """Adds the suppressions to env's sanitizer options; returns env."""
    for name, opt in (
            ("LSAN_OPTIONS",
             "suppressions=" + os.path.join(SUPP_DIR, "lsan-openmpi.supp")),
            ("ASAN_OPTIONS", "fast_unwind_on_malloc=0"),
            ("TSAN_OPTIONS",
             "suppressions=" + os.path.join(SUPP_DIR, "tsan-openmpi.supp"))):
        env[name] = env[name] + ":" + opt if env.get(name) else opt
    return env
