"""Training throughput benchmark (figures, not pass/fail): ResNet-18 on
CIFAR-10-shaped data (examples/pytorch_train.py), batch 32 per rank, one
torch thread per rank, samples/s at -np 1 and -np 2, in one run:

- ours: the example on horovod.torch (worker/python) over libhvd;
- torch DDP: tests/torch/ddp_train.py, DistributedDataParallel over gloo;
- Horovod: the same example on real Horovod 0.28.1 (Gloo), when
  scripts/install-horovod.sh's venv is there.

Every rank count is launched by our horovodrun, so launch is the same for
all three; each figure is the median of --reps runs, the runs of the
three alternating. Binding is each side's as users run it: ours with
horovodrun's default (--bind-to auto, an equal share of the cores per
rank), DDP and Horovod with --bind-to none, as torchrun and Horovod's
horovodrun bind nothing (--bind same gives the peers ours too).
Environment: HVD_HOROVODRUN, HVD_LIBRARY, HVD_PYTHONPATH,
HVD_TORCH_PYTHON, HVD_HOROVOD_PYTHON.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

from torchenv import HOROVODRUN, LIB, PY, PYPATH, ROOT

HVD_PY = os.environ.get("HVD_HOROVOD_PYTHON",
                        os.path.join(ROOT, "build-venv", "bin", "python"))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch_train.py")
DDP = os.path.join(ROOT, "tests", "torch", "ddp_train.py")
RATE = re.compile(r"(\d+(?:\.\d+)?) samples/s")


def run(np, python, script, steps, extra_env, unbound):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(extra_env)
    args = [HOROVODRUN, "-np", str(np)]
    if unbound:
        args += ["--bind-to", "none"]
    args += [python, script, "--steps",
            str(steps), "--warmup", "5", "--batch-size", "32",
            "--threads", "1"]
    if script == EXAMPLE:
        # FakeData on both sides, whatever is on disk.
        args += ["--log-every", "0", "--data-dir", "/nonexistent"]
    r = subprocess.run(args, capture_output=True, text=True, env=env,
                       timeout=1200)
    m = RATE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError("%s failed (rc %s):\n%s\n%s" % (
            " ".join(args), r.returncode, r.stdout[-2000:],
            r.stderr[-2000:]))
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--np", default="1,2")
    p.add_argument("--bind", choices=("user", "same"), default="user",
                   help="user (default): the peers unbound, as their own "
                   "launchers run them; same: horovodrun's default for all")
    args = p.parse_args()
    peers = [("ours", PY, EXAMPLE, {"PYTHONPATH": PYPATH,
                                     "HVD_LIBRARY": LIB}),
             ("torch DDP", PY, DDP, {})]
    if os.access(HVD_PY, os.X_OK):
        peers.append(("Horovod 0.28.1", HVD_PY, EXAMPLE, {}))
    else:
        print("# no %s: Horovod's column is left out" % HVD_PY)
    nps = [int(n) for n in args.np.split(",")]
    rates = {(name, n): [] for name, *_ in peers for n in nps}
    for n in nps:
        for _ in range(args.reps):
            for name, py, script, env in peers:
                unbound = name != "ours" and args.bind == "user"
                rates[(name, n)].append(run(n, py, script, args.steps, env,
                                            unbound))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("# ResNet-18, 3x32x32 FakeData, batch 32 per rank, SGD momentum, "
          "1 torch thread per rank; %d timed steps after 5, median of %d; "
          "binding: %s" % (args.steps - 5, args.reps,
                           "ours horovodrun's default, the peers none"
                           if args.bind == "user" else "horovodrun's "
                           "default for all"))
    print("%-16s" % "np" + "".join("%16s" % name for name, *_ in peers)
          + "%16s" % "ours/DDP")
    for n in nps:
        print("%-16s" % ("-np %d samples/s" % n)
              + "".join("%16.1f" % med[(name, n)] for name, *_ in peers)
              + "%16.2f" % (med[("ours", n)] / med[("torch DDP", n)]))
    if len(nps) > 1:
        a, b = nps[0], nps[-1]
        print("%-16s" % ("-np %d / -np %d" % (b, a))
              + "".join("%16.2f" % (med[(name, b)] / med[(name, a)])
                        for name, *_ in peers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
