"""Integration tests of horovod.torch (worker/python/horovod) on libhvd,
with Debian's PyTorch, under horovodrun.

torchcheck.py runs every collective, dtype and op against serial
references, the collectives' gradients, the errors, and
DistributedOptimizer against one process with the combined batch, in each
rank at -np 2 and -np 4. torchkill.py kills a rank in the middle of a step.
torchelastic.py checks hvd.elastic (run, TorchState, ElasticSampler) at
-np 2, then finishes its sampler's epoch at -np 3.

Environment: HVD_TORCH_PYTHON (default /usr/bin/python3, which sees
Debian's python3-torch), HVD_LIBRARY (libhvd.so of the build) and
HVD_PYTHONPATH (worker/python), set by meson.
"""

import os
import re
import subprocess
import tempfile
import unittest

from torchenv import LIB, PY, PYPATH, ROOT, hvdtest

HERE = os.path.dirname(os.path.abspath(__file__))


def env(**extra):
    values = dict(PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
                  PYTHONDONTWRITEBYTECODE="1")
    values.update(extra)
    return hvdtest.base_env(**values)


def setUpModule():
    r = subprocess.run([PY, "-c", "import torch"], capture_output=True,
                       text=True, env=env())
    if r.returncode != 0:
        raise RuntimeError("%s cannot import torch (%s): run "
                           "scripts/install-deps.sh --horovod, which installs "
                           "python3-torch" % (PY, r.stderr.strip()[-200:]))


class TorchTest(unittest.TestCase):

    def check_all_ok(self, np):
        r = hvdtest.run(hvdtest.hr_args("-np", np, PY,
                                        os.path.join(HERE, "torchcheck.py")),
                        env=env(), timeout=400)
        self.assertEqual(r.rc, 0, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        counts = set()
        for rank in range(np):
            oks = [m.group(1) for _, t in per.get(rank, [])
                   for m in [re.match(r"torchcheck: rank %d: ok (\d+)$" % rank,
                                      t)] if m]
            self.assertEqual(len(oks), 1, r.describe())
            counts.add(int(oks[0]))
        self.assertEqual(len(counts), 1, counts)
        self.assertGreaterEqual(counts.pop(), 20)

    def test_np2(self):
        self.check_all_ok(2)

    def test_np4(self):
        self.check_all_ok(4)

    def test_process_sets_join_and_adasum_np4(self):
        for dynamic in ("0", "1"):
            with self.subTest(dynamic=dynamic):
                r = hvdtest.run(
                    hvdtest.hr_args("-np", 4, PY,
                                    os.path.join(HERE, "torchpset.py")),
                    env=env(HOROVOD_DYNAMIC_PROCESS_SETS=dynamic),
                    timeout=300)
                self.assertEqual(r.rc, 0, r.describe())
                per, _ = hvdtest.prefixed(r.out_lines)
                for rank in range(4):
                    self.assertTrue(any(
                        re.match(r"torchpset: rank %d: ok [1-9]" % rank, t)
                        for _, t in per.get(rank, [])), r.describe())

    def test_init_again_and_horovods_helpers(self):
        # Horovod's tests shut down in tearDown and init again in the next
        # test; they import these helpers of Horovod's too.
        code = (
            "import os, queue, torch, horovod.torch as hvd\n"
            "from horovod.common.util import env, split_list, "
            "is_version_greater_equal_than as ge\n"
            "from horovod.runner.util.threads import in_thread\n"
            "from horovod.runner.common.util.env import "
            "get_env_rank_and_size\n"
            "for i in range(5):\n"
            "    hvd.init()\n"
            "    s = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), "
            "op=hvd.Sum).item()\n"
            "    hvd.shutdown()\n"
            "    print('cycle', i, hvd.is_initialized(), s)\n"
            "q = queue.Queue()\n"
            "in_thread(q.put, (7,)).join()\n"
            "with env(HVDTEST_X='x'):\n"
            "    inside = os.environ['HVDTEST_X']\n"
            "print('helpers', get_env_rank_and_size(), inside, "
            "'HVDTEST_X' in os.environ, ge('1.13.1', '1.12'), "
            "split_list([1, 2, 3, 4, 5], 2), q.get())\n")
        r = hvdtest.run(hvdtest.hr_args("-np", 2, PY, "-c", code), env=env(),
                        timeout=120)
        self.assertEqual(r.rc, 0, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        for rank in (0, 1):
            text = [t for _, t in per.get(rank, [])]
            self.assertEqual([t for t in text if t.startswith("cycle")],
                             ["cycle %d False 3.0" % i for i in range(5)])
            self.assertIn("helpers (%d, 2) x False True [[1, 2, 3], [4, 5]] 7"
                          % rank, text)

    def test_killed_rank_fails_the_others(self):
        r = hvdtest.run(hvdtest.hr_args("-np", 3, PY,
                                        os.path.join(HERE, "torchkill.py")),
                        env=env(), timeout=120)
        self.assertEqual(r.rc, 128 + 9, r.describe())
        per, _ = hvdtest.prefixed(r.out_lines)
        for rank in (0, 1):
            lines = [t for _, t in per.get(rank, [])]
            self.assertTrue(any(
                "HorovodInternalError" in t and "rank 2 (host localhost)" in t
                for t in lines), r.describe())
        self.assertIn(hvdtest.ERR_PREFIX + "rank 2 (host localhost, "
                      "local_rank 2) was killed by signal 9 (SIGKILL)",
                      r.err, r.describe())

    def test_elastic_restore_reset_sampler_and_host_updates(self):
        # torchelastic.py asserts in each rank; here: every rank says ok
        # and the ranks agree on what they saw (its "same:" lines).
        with tempfile.TemporaryDirectory(prefix="hvdtest-elastic-") as d:
            statefile = os.path.join(d, "sampler.json")
            for np, mode in ((2, "np2"), (3, "resized")):
                with self.subTest(np=np):
                    r = hvdtest.run(
                        hvdtest.hr_args("-np", np, PY,
                                        os.path.join(HERE, "torchelastic.py"),
                                        mode, statefile),
                        env=env(), timeout=180)
                    self.assertEqual(r.rc, 0, r.describe())
                    per, _ = hvdtest.prefixed(r.out_lines)
                    same = []
                    for rank in range(np):
                        prefix = "torchelastic: rank %d: " % rank
                        text = [t[len(prefix):] for _, t in per.get(rank, [])
                                if t.startswith(prefix)]
                        self.assertEqual(text[-1:], ["ok"], r.describe())
                        same.append([t for t in text
                                     if t.startswith("same:")])
                    self.assertEqual(len(same[0]), 3 if np == 2 else 1,
                                     r.describe())
                    for other in same[1:]:
                        self.assertEqual(other, same[0], r.describe())

    def test_example_trains_with_equal_weights(self):
        ckpt = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                            "hvdtest-torch-%d.pt" % os.getpid())
        example = os.path.join(ROOT, "examples", "pytorch_train.py")
        try:
            r = hvdtest.run(hvdtest.hr_args(
                "-np", 2, PY, example, "--steps", 6, "--fake-size", 512,
                "--data-dir", "/nonexistent", "--log-every", 3,
                "--checkpoint", ckpt), env=env(), timeout=300)
            self.assertEqual(r.rc, 0, r.describe())
            per, _ = hvdtest.prefixed(r.out_lines)
            text = [t for _, t in per.get(0, [])]
            self.assertIn("pytorch_train: weights equal on all 2 ranks", text)
            self.assertTrue(any("FakeData" in t for t in text), text)
            self.assertTrue(any(re.search(r"epoch 0: mean loss \d", t)
                                for t in text), text)
            load = ("import torch, sys; sd = torch.load(sys.argv[1]); "
                    "print(len(sd), 'fc.weight' in sd)")
            c = subprocess.run([PY, "-c", load, ckpt], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(c.stdout.split()[1:], ["True"], c.stderr)
        finally:
            if os.path.exists(ckpt):
                os.unlink(ckpt)

    def test_pip_install_into_a_venv(self):
        # As a user would: a venv that sees Debian's torch, pip install .
        # of the repository, then the venv's horovodrun and Python only.
        with tempfile.TemporaryDirectory(prefix="hvdtest-venv-") as d:
            venv = os.path.join(d, "venv")
            subprocess.run([PY, "-m", "venv", "--system-site-packages", venv],
                           check=True, timeout=120)
            pip = subprocess.run(
                [os.path.join(venv, "bin", "pip"), "install", "-q", ROOT],
                capture_output=True, text=True, timeout=900,
                env=hvdtest.base_env(PYTHONPATH=None, HVD_LIBRARY=None))
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            bindir = os.path.join(venv, "bin")
            code = ("import horovod.torch as hvd, horovod.common.libhvd as l, "
                    "torch\nimport horovod.common.util, "
                    "horovod.runner.util.threads, "
                    "horovod.runner.common.util.env\nhvd.init()\n"
                    "print('pip:', hvd.rank(), l.path.startswith(%r), "
                    "hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), "
                    "op=hvd.Sum).item())\n" % venv)
            run_env = hvdtest.base_env(
                PYTHONPATH=None, HVD_LIBRARY=None,
                PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
            r = hvdtest.run([os.path.join(bindir, "horovodrun"), "-np", 2,
                             os.path.join(bindir, "python"), "-c", code],
                            env=run_env, timeout=120)
            self.assertEqual(r.rc, 0, r.describe())
            per, _ = hvdtest.prefixed(r.out_lines)
            for rank in (0, 1):
                self.assertIn("pip: %d True 3.0" % rank,
                              [t for _, t in per.get(rank, [])], r.describe())

    def test_job_of_one_outside_horovodrun(self):
        code = ("import horovod.torch as hvd, torch\n"
                "try:\n    hvd.rank()\nexcept ValueError as e:\n"
                "    print('before:', e)\n"
                "hvd.init()\n"
                "print(hvd.size(), hvd.rank(), hvd.local_rank(),\n"
                "      hvd.allreduce(torch.tensor([3.0])).item())\n")
        r = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                           env=env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("before: Horovod has not been initialized; use "
                      "hvd.init().", r.stdout)
        self.assertIn("1 0 0 3.0", r.stdout)

    def test_real_horovod_beside_it_is_refused(self):
        # An environment where real Horovod is installed: its metadata.
        with tempfile.TemporaryDirectory(prefix="hvdtest-dist-") as d:
            info = os.path.join(d, "horovod-0.28.1.dist-info")
            os.mkdir(info)
            with open(os.path.join(info, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: horovod\n"
                        "Version: 0.28.1\n")
            r = subprocess.run(
                [PY, "-c", "import sys; sys.path.append(%r); "
                 "import horovod.torch" % d], capture_output=True, text=True,
                env=env(), timeout=60)
        self.assertNotEqual(r.returncode, 0)
        last = r.stderr.strip().splitlines()[-1]
        self.assertIn("ImportError: horovod: real Horovod 0.28.1 is "
                      "installed in this environment", last)
        self.assertIn("cannot be mixed", last)

    def test_missing_library_is_one_clear_error(self):
        r = subprocess.run([PY, "-c", "import horovod.torch"],
                           capture_output=True, text=True,
                           env=env(HVD_LIBRARY="/nonexistent/libhvd.so"),
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        last = r.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("ImportError: horovod: cannot load "
                                        "libhvd"), last)
        self.assertIn("HVD_LIBRARY", last)


if __name__ == "__main__":
    unittest.main(verbosity=2)
