"""Keras training throughput benchmark (figures, not pass/fail): the
Keras example's ResNet-style CNN (examples/keras_train.py) on
CIFAR-10-shaped synthetic data, batch 32 per rank, one TensorFlow thread
per rank, samples/s at -np 1 and -np 2, in one run:

- ours fit: the example on horovod.tensorflow.keras over libhvd;
- ours loop: the same model, batch and optimizer in a tf.function train
  step with DistributedGradientTape (tests/tensorflow/mwms_train.py
  --horovod);
- MWMS loop: the same model, batch and optimizer under TensorFlow's
  tf.distribute.MultiWorkerMirroredStrategy (tests/tensorflow/
  mwms_train.py), TF_CONFIG made from horovodrun's environment, in
  TensorFlow's custom training loop: Keras 3's model.fit does not run
  under that strategy across workers (keras-team/keras#20585).

All three read the same input pipeline (each rank's shard, shuffled in a
--shuffle-buffer of its own, batched) and are launched by our horovodrun;
each figure is the median of --reps runs, the three alternating; each rate
runs from the end of the first step to the end of the last.
Environment: HVD_HOROVODRUN, HVD_LIBRARY, HVD_PYTHONPATH, HVD_TF_PYTHON.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

import hvdtest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PY = os.environ.get("HVD_TF_PYTHON",
                    os.path.join(ROOT, "build-venv-tf", "bin", "python"))
PYPATH = os.environ.get("HVD_PYTHONPATH", os.path.join(ROOT, "worker",
                                                       "python"))
LIB = os.environ.get("HVD_LIBRARY", os.path.join(hvdtest.BUILD, "worker",
                                                 "libhvd.so"))
EXAMPLE = os.path.join(ROOT, "examples", "keras_train.py")
MWMS = os.path.join(ROOT, "tests", "tensorflow", "mwms_train.py")
RATE = re.compile(r"throughput: (\d+(?:\.\d+)?) samples/s")


def run(np, script, steps, shuffle, extra=()):
    env = dict(os.environ, PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
               TF_CPP_MIN_LOG_LEVEL="2")
    args = [hvdtest.HOROVODRUN, "-np", str(np), PY, script, "--steps",
            str(steps), "--batch-size", "32", "--threads", "1",
            "--fake-size", "4096", "--shuffle-buffer", str(shuffle)] + list(extra)
    if script == EXAMPLE:
        args += ["--data-dir", "/nonexistent", "--warmup-epochs", "0"]
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
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--np", default="1,2")
    p.add_argument("--shuffle-buffer", type=int, default=4096,
                   help="samples in each rank's shuffle buffer, the same "
                   "input pipeline for all (0: none)")
    args = p.parse_args()
    peers = [("ours fit", EXAMPLE, ()), ("ours loop", MWMS, ("--horovod",)),
             ("MWMS loop", MWMS, ())]
    nps = [int(n) for n in args.np.split(",")]
    rates = {(name, n): [] for name, _, _ in peers for n in nps}
    for n in nps:
        for _ in range(args.reps):
            for name, script, extra in peers:
                rates[(name, n)].append(run(n, script, args.steps,
                                                    args.shuffle_buffer, extra))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("# Keras example CNN, 32x32x3 synthetic data, batch 32 per rank, "
          "SGD momentum, 1 TensorFlow thread per rank, each rank's shard "
          "shuffled in a buffer of %d; %d steps, the first left out, median "
          "of %d. fit: the example (model.fit and its "
          "callbacks); loop: the same tf.function train step, with "
          "DistributedGradientTape or under the strategy"
          % (args.shuffle_buffer, args.steps, args.reps))
    names = [name for name, _, _ in peers]
    print("%-18s" % "np" + "".join("%12s" % n for n in names)
          + "%12s%12s" % ("fit/MWMS", "loop/MWMS"))
    for n in nps:
        print("%-18s" % ("-np %d samples/s" % n)
              + "".join("%12.1f" % med[(name, n)] for name in names)
              + "".join("%12.2f" % (med[(name, n)] / med[("MWMS loop", n)])
                        for name in names[:2]))
    if len(nps) > 1:
        a, b = nps[0], nps[-1]
        print("%-18s" % ("-np %d / -np %d" % (b, a))
              + "".join("%12.2f" % (med[(name, b)] / med[(name, a)])
                        for name in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
