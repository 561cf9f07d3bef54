"""The two ways horovodrun starts ranks, as mixins for tests that check
both with the same methods: its own agents (AgentsMode), and --mpi, where
Open MPI's mpirun runs every rank inside hvd-mpi-rank (MpiMode). A test
class lists a mode first: class XMpiTest(MpiMode, XChecks, TestCase).

Where Open MPI decides differently, the mode says how: mpirun stops the
ranks itself on a signal (SIGCONT, SIGTERM, then SIGKILL) instead of
passing the signal on, so the ranks never see SIGINT or SIGHUP."""

import os
import re
import shutil

import hvdtest


def have_mpi_backend():
    """Whether the build has MPI: HVD_HAVE_MPI from meson, else the
    build's hvd_build.h (a test run by hand)."""
    v = os.environ.get("HVD_HAVE_MPI")
    if v is not None:
        return v == "1"
    path = os.path.join(os.path.dirname(os.path.dirname(hvdtest.HOROVODRUN)),
                        "hvd_build.h")
    try:
        with open(path) as f:
            return re.search(r"#define HVD_HAVE_MPI 1\b", f.read()) is not None
    except OSError:
        return False


def mpi_missing():
    """Why horovodrun --mpi cannot run here, or None."""
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH (install Open MPI to test horovodrun --mpi)"
    if not have_mpi_backend():
        return "this build has no MPI (--mpi needs -Dmpi=enabled)"
    return None


class AgentsMode:
    """horovodrun's own agents: the ranks get a forwarded signal itself."""
    MODE = ()
    FORWARD_TO = "all ranks"
    ALL_STOPPED = "all ranks exited"
    GETS_SIGNAL = True

    def hr_args(self, *args):
        return hvdtest.hr_args(*self.MODE, *args)


class MpiMode(AgentsMode):
    """horovodrun --mpi: skipped (never passed) where it cannot run."""
    MODE = ("--mpi",)
    FORWARD_TO = "mpirun, which stops every rank"
    ALL_STOPPED = "every rank was stopped"
    GETS_SIGNAL = False

    def setUp(self):
        reason = mpi_missing()
        if reason:
            self.skipTest(reason)
        super().setUp()

    def run_hr(self, *args, **kw):
        return super().run_hr(*self.MODE, *args, **kw)

    def start_hr(self, *args, **kw):
        return super().start_hr(*self.MODE, *args, **kw)

    def run_hr_behind_terminal(self, *args, **kw):
        return super().run_hr_behind_terminal(*self.MODE, *args, **kw)
