#!/usr/bin/env python3
"""Launch benchmark: horovodrun -np N true against mpirun -np N true.

Times the wall clock of whole launches (start, run `true` on every rank,
tear down) of horovodrun and of Open MPI's mpirun, alternating the two run
by run in one process so that both see the same machine load, and prints
the median, p90 and min of each and the ratio horovodrun/mpirun of the
medians. Absolute times on a shared machine are noise; the ratio is the
figure. Target: horovodrun at most half of mpirun's wall time.

This prints figures; it is not a pass/fail test. It exits 0 unless
horovodrun itself fails to run. Without mpirun it says so and still times
horovodrun.

Run it with `meson test -C build --benchmark -v` or `ninja -C build
benchmark`, or directly:
  tests/bench/launch_bench.py [--runs 15] [--warmup 2] [--np 4,16]
Environment: HVD_HOROVODRUN (the horovodrun binary; default
build/launcher/horovodrun next to this source tree), HVD_MPIRUN (default:
mpirun on PATH), HVD_BENCH_RUNS, HVD_BENCH_WARMUP.
"""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = 0.5  # horovodrun's median at most this fraction of mpirun's
RUN_TIMEOUT = 120


class LaunchError(Exception):
    pass


def percentile(xs, q):
    """Nearest-rank percentile, q in [0, 100]."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def time_run(argv):
    """Wall time of one run in seconds; LaunchError if it fails."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise LaunchError("%s: no exit within %d s" % (" ".join(argv),
                                                       RUN_TIMEOUT))
    except OSError as e:
        raise LaunchError("%s: %s" % (argv[0], e))
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        raise LaunchError("%s exited %d%s" % (
            " ".join(argv), r.returncode,
            (": " + " / ".join(err[-3:])) if err else ""))
    return dt


def horovodrun_cmd(exe, np):
    return [exe, "-np", str(np), "true"]


def mpirun_cmd(exe, np):
    cmd = [exe, "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + ["-np", str(np), "true"]


def mpirun_version(exe):
    try:
        r = subprocess.run([exe, "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        line = r.stdout.decode(errors="replace").strip().splitlines()
        return line[0] if line else "unknown version"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown version"


def fmt_ms(x):
    return "%8.1f" % (x * 1000.0) if x is not None else "%8s" % "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int,
                    default=int(os.environ.get("HVD_BENCH_RUNS", "15")),
                    help="timed runs of each launcher per np (default 15)")
    ap.add_argument("--warmup", type=int,
                    default=int(os.environ.get("HVD_BENCH_WARMUP", "2")),
                    help="untimed runs of each first (default 2)")
    ap.add_argument("--np", default="4,16",
                    help="comma-separated process counts (default 4,16)")
    ap.add_argument("--horovodrun", default=os.environ.get(
        "HVD_HOROVODRUN", os.path.join(ROOT, "build", "launcher",
                                       "horovodrun")))
    ap.add_argument("--mpirun", default=os.environ.get("HVD_MPIRUN") or
                    shutil.which("mpirun"))
    a = ap.parse_args()
    nps = [int(x) for x in a.np.split(",") if x.strip()]
    if a.runs < 1 or a.warmup < 0 or not nps or min(nps) < 1:
        ap.error("need --runs >= 1, --warmup >= 0 and positive --np values")

    hr = a.horovodrun
    mpi = a.mpirun
    if not os.access(hr, os.X_OK):
        print("launch_bench: horovodrun not found at %s (set HVD_HOROVODRUN)"
              % hr)
        return 1
    print("launch benchmark: `-np N true` on localhost, %d timed runs of "
          "each launcher per N after %d warm-ups, alternating run by run"
          % (a.runs, a.warmup))
    print("machine: %s, %d CPUs, Python %s" % (
        platform.platform(), os.cpu_count() or 0, platform.python_version()))
    print("horovodrun: %s" % hr)
    if mpi is None or not os.access(mpi, os.X_OK):
        print("mpirun: not found; timing horovodrun alone (install "
              "openmpi-bin for the comparison)")
        mpi = None
    else:
        print("mpirun: %s (%s)" % (mpi, mpirun_version(mpi)))

    results = {}
    for np in nps:
        hcmd = horovodrun_cmd(hr, np)
        mcmd = mpirun_cmd(mpi, np) if mpi else None
        try:
            for _ in range(a.warmup):
                time_run(hcmd)
        except LaunchError as e:
            print("launch_bench: horovodrun failed: %s" % e)
            return 1
        if mcmd:
            try:
                for _ in range(a.warmup):
                    time_run(mcmd)
            except LaunchError as e:
                print("mpirun failed, comparing no further: %s" % e)
                mpi = mcmd = None
        ht, mt = [], []
        for i in range(a.runs):
            # ABBA order, so neither launcher always runs right after the
            # other one's teardown.
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for which in order:
                if which == 0:
                    try:
                        ht.append(time_run(hcmd))
                    except LaunchError as e:
                        print("launch_bench: horovodrun failed: %s" % e)
                        return 1
                elif mcmd:
                    try:
                        mt.append(time_run(mcmd))
                    except LaunchError as e:
                        print("mpirun failed, comparing no further: %s" % e)
                        mpi = mcmd = None
                        mt = []
        results[np] = (ht, mt)

    print()
    print("wall time in ms (median / p90 / min); ratio = horovodrun median "
          "/ mpirun median")
    print("%4s | %8s %8s %8s | %8s %8s %8s | %6s" % (
        "np", "hr med", "hr p90", "hr min", "mpi med", "mpi p90", "mpi min",
        "ratio"))
    print("-" * 5 + "+" + "-" * 28 + "+" + "-" * 28 + "+" + "-" * 7)
    ratios = {}
    for np in nps:
        ht, mt = results[np]
        hmed = statistics.median(ht)
        row = [fmt_ms(hmed), fmt_ms(percentile(ht, 90)), fmt_ms(min(ht))]
        if mt:
            mmed = statistics.median(mt)
            row += [fmt_ms(mmed), fmt_ms(percentile(mt, 90)), fmt_ms(min(mt))]
            ratios[np] = hmed / mmed
            ratio = "%6.2f" % ratios[np]
        else:
            row += [fmt_ms(None)] * 3
            ratio = "%6s" % "-"
        print("%4d | %s %s %s | %s %s %s | %s" % ((np,) + tuple(row) +
                                                  (ratio,)))
    print()
    if not ratios:
        print("verdict: no mpirun figures; target (horovodrun <= %.1f x "
              "mpirun) not checked" % TARGET)
    else:
        missed = ["np=%d (%.2f)" % (np, r) for np, r in ratios.items()
                  if r > TARGET]
        worst = max(ratios.values())
        if missed:
            print("verdict: target MISSED: horovodrun/mpirun above %.2f at %s"
                  % (TARGET, ", ".join(missed)))
        else:
            print("verdict: target met: horovodrun/mpirun at most %.2f at "
                  "every np (worst %.2f, %.1fx faster)"
                  % (TARGET, worst, 1.0 / worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
