"""The build with and without the GPU and MPI backends: configures and
builds this source tree again with -Dnccl=disabled and with -Dcuda=disabled
-Dnccl=disabled -Dmpi=disabled (warnings as errors), and checks that
horovodrun --check-build of each build, and of the build under test, says
what it has, and that --mpi is refused without MPI. Where the CUDA toolkit is missing only the builds without it can be
made, and the test says so."""

import os
import subprocess
import tempfile
import unittest

ROOT = os.environ["HVD_SOURCE_ROOT"]
HR = os.environ["HVD_HOROVODRUN"]
HAVE_CUDA = os.environ["HVD_HAVE_CUDA"] == "1"
HAVE_NCCL = os.environ["HVD_HAVE_NCCL"] == "1"


def check_build(horovodrun):
    p = subprocess.run([horovodrun, "--check-build"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def mark(on):
    return "[X]" if on else "[ ]"


class BuildTest(unittest.TestCase):

    def assertSays(self, out, cuda, nccl):
        self.assertIn("    %s NCCL\n" % mark(nccl), out)
        self.assertIn("    %s CUDA" % mark(cuda), out)
        self.assertIn("    [X] TCP\n    [X] Shared memory\n", out)
        self.assertEqual(cuda and not nccl,
                         "(staged through host memory)" in out, out)

    def test_this_build(self):
        self.assertSays(check_build(HR), HAVE_CUDA, HAVE_NCCL)

    def build(self, *options, check=None):
        """Builds with options; returns --check-build's output, after
        check(horovodrun) if given."""
        with tempfile.TemporaryDirectory() as d:
            b = os.path.join(d, "b")
            for cmd in (["meson", "setup", b, ROOT, "-Dwerror=true",
                         "-Dtests=disabled", "-Dman=disabled"] + list(options),
                        ["ninja", "-C", b]):
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=600, stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
            hr = os.path.join(b, "launcher", "horovodrun")
            if check is not None:
                check(hr)
            return check_build(hr)

    def test_without_cuda_and_mpi(self):
        def mpi_refused(hr):
            # --mpi is a one-line usage error in a build without MPI.
            p = subprocess.run([hr, "--mpi", "-np", "1", "true"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
            self.assertEqual(p.stderr.splitlines(), [
                "horovodrun: error: --mpi needs a build with MPI, and this "
                "one has none; rebuild with Open MPI (libopenmpi-dev) and "
                "-Dmpi=enabled, or drop --mpi"])
        out = self.build("-Dcuda=disabled", "-Dnccl=disabled",
                         "-Dmpi=disabled", check=mpi_refused)
        self.assertSays(out, False, False)
        self.assertIn("    [ ] MPI\n", out)

    def test_cuda_without_nccl(self):
        if not HAVE_CUDA:
            self.skipTest("no CUDA toolkit here: only builds without it "
                          "can be made")
        out = self.build("-Dnccl=disabled")
        self.assertSays(out, True, False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
