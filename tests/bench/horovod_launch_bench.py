#!/usr/bin/env python3
"""Our horovodrun against Horovod's own, with the same real-Horovod ranks.

For -np 2 and -np 4 on this host, alternating the two launchers run by run
so that both see the same machine load, it times
  - launch to the first allreduce: from just before the launcher starts to
    the end of the ranks' first hvd.allreduce (rank 0 reports it), and
  - the whole job's wall time (start to the launcher's exit),
with hvdworker.py's `firstop` mode (hvd.init, one allreduce, exit), and
prints the median and min of each and our/Horovod ratios. Then, once per
launcher and size, it SIGKILLs the launcher while the ranks sleep and
counts the job's processes still running 2 s later (then kills them).

This prints figures; it is not a pass/fail test. It exits 0 unless a
launcher fails to run the job.

  PYTHONPATH=tests/lib tests/bench/horovod_launch_bench.py [--runs 7] [--np 2,4]
Environment: HVD_HOROVODRUN (ours; default build/launcher/horovodrun),
HVD_HOROVOD_PYTHON (the venv's python; default build-venv/bin/python,
whose bin/horovodrun is Horovod's launcher).
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

import hvdtest

HERE = os.path.dirname(os.path.abspath(__file__))

ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.environ.get("HVD_HOROVOD_PYTHON",
                         os.path.join(ROOT, "build-venv", "bin", "python"))
THEIRS = os.path.join(os.path.dirname(VENV_PY), "horovodrun")
# The rank program is the one test_horovod.py runs.
WORKER = os.path.join(ROOT, "tests", "horovod", "hvdworker.py")
TIMEOUT = 180


def launcher_argv(which, np, mode):
    hosts = "localhost:%d" % np
    cmd = [VENV_PY, WORKER, mode]
    if which == "ours":
        return [hvdtest.HOROVODRUN, "-np", str(np), "-H", hosts] + cmd
    return [THEIRS, "-np", str(np), "-H", hosts, "--gloo"] + cmd


def one_run(which, np):
    """(seconds to the first allreduce, whole wall seconds)."""
    marker = hvdtest.new_marker("bench")
    t0 = time.time()
    env = hvdtest.base_env(marker, HVD_T0="%.6f" % t0)
    p = subprocess.run(launcher_argv(which, np, "firstop"), env=env,
                       stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=TIMEOUT)
    wall = time.time() - t0
    first = None
    for line in p.stdout.splitlines():
        if "first allreduce " in line:
            first = float(line.rsplit(" ", 1)[1])
    if p.returncode != 0 or first is None:
        raise SystemExit("%s -np %d failed (rc %d):\n%s\n%s" % (
            which, np, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return first, wall


def left_after_sigkill(which, np):
    """Processes of the job still running 2 s after SIGKILL of the
    launcher, once every rank said it was ready."""
    marker = hvdtest.new_marker("kill")
    env = hvdtest.base_env(marker)
    job = hvdtest.Job(launcher_argv(which, np, "sleep"), env=env)
    try:
        job.wait_line(lambda l: "ready" in l, timeout=60, count=np)
        job.signal(signal.SIGKILL)
        job.wait(timeout=10)
        time.sleep(2)
        return len(hvdtest.marked_procs(marker))
    finally:
        hvdtest.kill_marked(marker)
        job.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--np", default="2,4")
    args = ap.parse_args()
    for path in (VENV_PY, THEIRS, hvdtest.HOROVODRUN):
        if not os.access(path, os.X_OK):
            raise SystemExit("%s not found; run scripts/install-deps.sh "
                             "--horovod and build first" % path)
    sizes = [int(n) for n in args.np.split(",")]
    print("real Horovod 0.28.1 ranks (hvdworker.py firstop: hvd.init, one "
          "allreduce), one host, %d runs each after 1 warm-up, launchers "
          "alternated" % args.runs)
    print("%-4s %-22s %10s %10s %10s %10s" % (
        "np", "launcher", "first med", "first min", "wall med", "wall min"))
    rows = []
    for np in sizes:
        times = {"ours": [], "horovod": []}
        for which in times:
            one_run(which, np)  # warm-up: page cache, pip's imports
        for _ in range(args.runs):
            for which in times:
                times[which].append(one_run(which, np))
        med = {}
        for which, name in (("ours", "ours (C)"),
                            ("horovod", "Horovod's horovodrun")):
            first = [t[0] for t in times[which]]
            wall = [t[1] for t in times[which]]
            med[which] = (statistics.median(first), statistics.median(wall))
            print("%-4d %-22s %9.3fs %9.3fs %9.3fs %9.3fs" % (
                np, name, med[which][0], min(first), med[which][1],
                min(wall)))
        rows.append((np, med["ours"][0] / med["horovod"][0],
                     med["ours"][1] / med["horovod"][1]))
    print()
    print("%-4s %22s %22s" % ("np", "first allreduce ratio", "wall ratio"))
    for np, rf, rw in rows:
        print("%-4d %22.2f %22.2f" % (np, rf, rw))
    print()
    print("processes of the job left 2 s after SIGKILL of the launcher")
    for np in sizes:
        print("-np %d: ours %d, Horovod's horovodrun %d" % (
            np, left_after_sigkill("ours", np),
            left_after_sigkill("horovod", np)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
