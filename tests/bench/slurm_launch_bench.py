"""Launch time on Slurm: horovodrun against srun, side by side.

Starts the two-node test cluster (slurmfix.py; needs root), takes one
allocation of two nodes with two tasks each, and inside it times, in
alternation, `horovodrun true` (hosts and -np from the allocation, both
agents through srun from this "login node") and `srun true` (the same four
tasks as one job step). Prints the medians and their ratio. Figures, not a
test.

    PYTHONPATH=tests/lib python3 tests/bench/slurm_launch_bench.py [--reps N]
"""

import argparse
import os
import statistics
import subprocess
import sys

import hvdtest
import slurmfix


# Runs inside the allocation: each command REPS times, in alternation,
# printing "name seconds" per run.
INNER = r"""
import subprocess, sys, time
reps, cmds = int(sys.argv[1]), {"horovodrun": [sys.argv[2], "true"],
                                 "srun": [sys.argv[3], "true"]}
for _ in range(reps):
    for name, cmd in cmds.items():
        t = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(name, time.monotonic() - t, flush=True)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    reps = ap.parse_args().reps
    with slurmfix.SlurmCluster() as c:
        env = c.env(hvdtest.base_env())
        p = subprocess.run([c.bin["salloc"], "-Q", "--nodes=2",
                            "--ntasks-per-node=2", hvdtest.PYTHON, "-c",
                            INNER, str(reps), hvdtest.HOROVODRUN,
                            c.bin["srun"]],
                           env=env, capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            sys.exit("salloc failed (%d): %s\n%s" % (p.returncode, p.stderr,
                                                     c.logs()))
    times = {"horovodrun": [], "srun": []}
    for line in p.stdout.splitlines():
        name, secs = line.split()
        times[name].append(float(secs) * 1000)
    hr, sr = (statistics.median(times[k]) for k in ("horovodrun", "srun"))
    print("launch of 4 ranks on 2 Slurm nodes, `true`, median of %d "
          "(min-max):" % reps)
    for k in times:
        print("  %-10s %7.1f ms (%.1f-%.1f)" % (
            k, statistics.median(times[k]), min(times[k]), max(times[k])))
    print("  horovodrun / srun: %.2f" % (hr / sr))


if __name__ == "__main__":
    main()
