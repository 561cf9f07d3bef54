"""Integration tests: GPU pinning, through the HVD_TEST_GPU_COUNT hook and,
where the machine has NVIDIA GPUs, for real."""

import os
import unittest

import hvdtest
from hvdtest import sh

WARN = hvdtest.WARN_PREFIX
SHOW = 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset}"'


class GpuPinningTest(hvdtest.TestCase):

    def devices(self, *opts, np=4, **env):
        res = self.run_hr("-np", np, *opts, *sh(SHOW), **env)
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(sorted(per), list(range(np)))
        got = []
        for r in range(np):
            (lr, text), = per[r]
            self.assertTrue(text.startswith("cvd="), text)
            got.append(text[4:])
        return res, got

    def test_fewer_gpus_than_ranks(self):
        res, got = self.devices(HVD_TEST_GPU_COUNT="2")
        self.assertEqual(got, ["0", "1", "0", "1"])
        warns = res.warning_lines()
        self.assertEqual(len(warns), 1, res.describe())
        self.assertTrue(warns[0].startswith(
            WARN + "host localhost: 4 ranks share 2 GPUs"), warns[0])
        self.assertEqual(res.error_lines(), [])

    def test_one_gpu_per_rank(self):
        res, got = self.devices(HVD_TEST_GPU_COUNT="4")
        self.assertEqual(got, ["0", "1", "2", "3"])
        self.assertEqual(res.err, "")

    def test_more_gpus_than_ranks(self):
        res, got = self.devices(np=2, HVD_TEST_GPU_COUNT="8")
        self.assertEqual(got, ["0", "1"])
        self.assertEqual(res.err, "")

    def test_pinning_uses_local_rank(self):
        res, got = self.devices("-H", "localhost:2,127.0.0.1:2",
                                HVD_TEST_GPU_COUNT="2")
        self.assertEqual(got, ["0", "1", "0", "1"])
        self.assertEqual(res.err, "")

    def test_warning_per_host(self):
        res, got = self.devices("-H", "localhost:3,127.0.0.1:3", np=6,
                                HVD_TEST_GPU_COUNT="2")
        self.assertEqual(got, ["0", "1", "0", "0", "1", "0"])
        warns = sorted(res.warning_lines())
        self.assertEqual(len(warns), 2, res.describe())
        self.assertTrue(warns[0].startswith(
            WARN + "host 127.0.0.1: 3 ranks share 2 GPUs"), warns)
        self.assertTrue(warns[1].startswith(
            WARN + "host localhost: 3 ranks share 2 GPUs"), warns)

    def test_no_gpu_pinning(self):
        res, got = self.devices("--no-gpu-pinning", HVD_TEST_GPU_COUNT="2")
        self.assertEqual(got, ["unset"] * 4)
        self.assertEqual(res.err, "", "no warning without pinning")

    def test_no_gpus(self):
        res, got = self.devices(HVD_TEST_GPU_COUNT="0")
        self.assertEqual(got, ["unset"] * 4)
        self.assertEqual(res.err, "")
        # A value that is not a count means no GPUs, not a crash.
        res, got = self.devices(HVD_TEST_GPU_COUNT="many")
        self.assertEqual(got, ["unset"] * 4)
        self.assertEqual(res.err, "")

    def test_user_visible_devices_are_respected(self):
        res, got = self.devices(HVD_TEST_GPU_COUNT="4",
                                CUDA_VISIBLE_DEVICES="5,7")
        self.assertEqual(got, ["5", "7", "5", "7"])

    def test_user_visible_devices_kept_without_pinning(self):
        res, got = self.devices("--no-gpu-pinning", HVD_TEST_GPU_COUNT="4",
                                CUDA_VISIBLE_DEVICES="5,7")
        self.assertEqual(got, ["5,7"] * 4)

    def test_user_visible_devices_kept_without_gpus(self):
        res, got = self.devices(np=2, HVD_TEST_GPU_COUNT="0",
                                CUDA_VISIBLE_DEVICES="3")
        self.assertEqual(got, ["3", "3"])


@unittest.skipUnless(os.path.isdir("/proc/driver/nvidia/gpus") and
                     os.listdir("/proc/driver/nvidia/gpus"),
                     "no NVIDIA GPU on this machine")
class RealGpuTest(hvdtest.TestCase):

    def test_pinning_on_real_gpus(self):
        n = len(os.listdir("/proc/driver/nvidia/gpus"))
        np = min(n, 4) if n > 1 else 2
        res = self.run_hr("-np", np, *sh(SHOW), HVD_TEST_GPU_COUNT=None)
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [])
        got = [per[r][0][1] for r in range(np)]
        self.assertEqual(got, ["cvd=%d" % (r % n) for r in range(np)])
        self.assertEqual(len(res.warning_lines()), 1 if np > n else 0,
                         res.describe())

    def test_no_pinning_on_real_gpus(self):
        res = self.run_hr("-np", "2", "--no-gpu-pinning", *sh(SHOW),
                          HVD_TEST_GPU_COUNT=None)
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), ["[0,0]<stdout>:cvd=unset",
                                                 "[1,1]<stdout>:cvd=unset"])
        self.assertEqual(res.err, "")


if __name__ == "__main__":
    hvdtest.main()
