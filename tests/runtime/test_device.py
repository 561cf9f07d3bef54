"""Integration tests of device buffers without a GPU: libhvd's test double
of CUDA (HVD_TEST_FAKE_GPU=1) hands out "device" memory that the CPU cannot
touch, so the collectives must stage it through host memory
(tests/runtime/devcheck.c); and hvd_device() under horovodrun's GPU
pinning (faked with HVD_TEST_GPU_COUNT)."""

import os
import re
import subprocess
import unittest

HR = os.environ["HVD_HOROVODRUN"]
DEVCHECK = os.environ["HVD_DEVCHECK"]
NOTICE = ("hvd: notice: rank %d: CUDA device buffers are staged through "
          "host memory (the test double stands in for CUDA); collectives on "
          "them are slower")


def run(args, timeout=120, **env):
    e = dict(os.environ, HVD_TEST_FAKE_GPU="1", **env)
    e.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(args, capture_output=True, text=True, env=e,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class DeviceTest(unittest.TestCase):

    def assertAllPass(self, p, np):
        done = re.findall(r"devcheck: rank (\d+) of (\d+): (\d+) checks, "
                          r"(\d+) failures", p.stdout)
        self.assertEqual(sorted(int(r) for r, _, _, _ in done),
                         list(range(np)), p.stdout + p.stderr)
        for _, _, checks, failures in done:
            self.assertEqual(int(checks), 11 + np)  # a broadcast per root
            self.assertEqual(int(failures), 0, p.stdout)

    def test_job_of_one_stages_device_buffers(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HOROVOD_")}
        p = subprocess.run([DEVCHECK], capture_output=True, text=True,
                           env=dict(env, HVD_TEST_FAKE_GPU="1"), timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertAllPass(p, 1)
        self.assertEqual(p.stderr.count(NOTICE % 0), 1, p.stderr)

    def test_staged_collectives_on_every_transport(self):
        for np, env in ((2, {}), (3, {}), (3, {"HOROVOD_SHM_DISABLE": "1"})):
            with self.subTest(np=np, env=env):
                p = run([HR, "-np", str(np), DEVCHECK], **env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertAllPass(p, np)
                # Said once per rank, however many collectives staged.
                for r in range(np):
                    self.assertEqual(p.stderr.count(NOTICE % r), 1,
                                     p.stderr)
                # Device memory on one rank, host memory on another: a
                # mismatch on every rank, and the job went on.
                want = ("Mismatched allreduce memory: rank 0 gave CUDA "
                        "device memory, rank 1 host memory for tensor "
                        "'where'")
                self.assertEqual(p.stdout.count(want), np, p.stdout)

    def test_hvd_device_with_and_without_pinning(self):
        # Two GPUs (faked): pinned ranks see one device each, so device 0.
        p = run([HR, "-np", "3", DEVCHECK], HVD_TEST_GPU_COUNT="2")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for r in range(3):
            self.assertIn("[%d,%d]<stdout>:devcheck: rank %d: hvd_device 0"
                          % (r, r, r), p.stdout)
        # Without pinning and without a real GPU: the local rank.
        p = run([HR, "-np", "3", "--no-gpu-pinning", DEVCHECK],
                HVD_TEST_GPU_COUNT="2")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for r in range(3):
            self.assertIn("[%d,%d]<stdout>:devcheck: rank %d: hvd_device %d"
                          % (r, r, r, r), p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
