#!/usr/bin/env python3
"""Output benchmark: horovodrun against mpirun --tag-output on one workload.

16 spew ranks print 100,000 lines each (1 byte to 64 KiB, about 166 bytes
a line on average, about 270 MB in all; see spew.c) as fast as they can,
under horovodrun and under Open MPI's mpirun --tag-output, alternating the
two run by run. Both launchers' stdout and stderr are pipes read by this
script as fast as it can (counting newlines only). It prints the median
wall time, lines/s and MB/s (raw bytes the ranks printed, per second) of
each and the ratio of the medians. Before timing, one horovodrun run is
checked line by line against the ranks' digests (every line once, whole,
in order, under its prefix), and mpirun's newline count is reported.

This prints figures; it is not a pass/fail test. It exits 1 only when
horovodrun fails or loses output.

Run it with `meson test -C build --benchmark output -v`, or directly:
  PYTHONPATH=tests/lib tests/bench/output_bench.py [--ranks 16] \\
      [--lines 100000] [--runs 3]
Environment: HVD_HOROVODRUN, HVD_SPEW (the spew binary), HVD_MPIRUN
(default: mpirun on PATH).
"""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import loadcheck as lc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build"))
RUN_TIMEOUT = 600


def run_counted(argv, parse=False):
    """Runs argv with both outputs read as fast as possible; returns
    (seconds, rc, readers)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    readers = [lc.Reader(p.stdout.fileno(),
                         lc.TaggedParser("stdout") if parse else None),
               lc.Reader(p.stderr.fileno(),
                         lc.TaggedParser("stderr") if parse else None)]
    for r in readers:
        r.start()
    try:
        rc = p.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    for r in readers:
        r.join()
    return time.perf_counter() - t0, rc, readers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=3,
                    help="timed runs of each launcher (default 3)")
    ap.add_argument("--horovodrun", default=os.environ.get(
        "HVD_HOROVODRUN", os.path.join(BUILD, "launcher", "horovodrun")))
    ap.add_argument("--spew", default=os.environ.get(
        "HVD_SPEW", os.path.join(BUILD, "tests", "load", "spew")))
    ap.add_argument("--mpirun", default=os.environ.get("HVD_MPIRUN") or
                    shutil.which("mpirun"))
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="hvdbench-")
    dig = os.path.join(tmp, "digests")
    os.mkdir(dig)
    spew = [a.spew, "--lines", str(a.lines), "--digests", dig]
    hr = [a.horovodrun, "-np", str(a.ranks)] + spew
    mpi = None
    if a.mpirun:
        mpi = [a.mpirun, "--oversubscribe", "--bind-to", "none",
               "--tag-output"]
        if os.geteuid() == 0:
            mpi.append("--allow-run-as-root")
        mpi += ["-np", str(a.ranks)] + spew

    print("output benchmark: %d ranks x %d lines of spew, %d timed runs "
          "each, alternating" % (a.ranks, a.lines, a.runs))
    print("machine: %s, %d CPUs" % (platform.machine(), os.cpu_count()))

    # One checked run: parsing is slower than the launchers, so untimed.
    secs, rc, readers = run_counted(hr, parse=True)
    digests = lc.read_digests(dig, a.ranks)
    lines, nbytes = lc.totals(digests)
    problems = lc.check_tagged(
        digests, {"stdout": readers[0].parser, "stderr": readers[1].parser},
        {r: r for r in range(a.ranks)})
    print("workload: %d lines, %.1f MB raw, %.1f MB tagged by horovodrun" %
          (lines, nbytes / 1e6, (readers[0].nbytes + readers[1].nbytes) /
           1e6))
    if rc != 0 or problems:
        print("horovodrun failed (rc %s) or lost output:\n  %s" % (
            rc, "\n  ".join(problems[:20])))
        return 1
    print("checked: every line arrived once, whole and in order")

    times = {"horovodrun": [], "mpirun": []}
    got = {}
    for i in range(a.runs):
        order = [("horovodrun", hr), ("mpirun", mpi)]
        if i % 2:
            order.reverse()
        for name, argv in order:
            if argv is None:
                continue
            secs, rc, readers = run_counted(argv)
            if rc != 0:
                print("%s failed with status %d" % (name, rc))
                if name == "horovodrun":
                    return 1
                mpi = None
                continue
            times[name].append(secs)
            got[name] = readers[0].newlines + readers[1].newlines
    if got.get("horovodrun") != lines:
        print("horovodrun: %s lines arrived, %d printed" %
              (got.get("horovodrun"), lines))
        return 1

    print()
    print("%-22s | %8s | %12s | %8s | %s" % (
        "launcher", "time s", "lines/s", "MB/s", "lines arrived"))
    print("-" * 23 + "+" + "-" * 10 + "+" + "-" * 14 + "+" + "-" * 10 +
          "+" + "-" * 15)
    med = {}
    for name, label in (("horovodrun", "horovodrun"),
                        ("mpirun", "mpirun --tag-output")):
        if not times[name]:
            print("%-22s | %8s | %12s | %8s |" % (label, "-", "-", "-"))
            continue
        m = med[name] = statistics.median(times[name])
        print("%-22s | %8.2f | %12.0f | %8.1f | %d" % (
            label, m, lines / m, nbytes / 1e6 / m, got[name]))
    if len(med) == 2:
        print()
        print("ratio mpirun / horovodrun time: %.2f (horovodrun %.2fx "
              "the throughput)" % (med["mpirun"] / med["horovodrun"],
                                   med["mpirun"] / med["horovodrun"]))
        print("runs (s): horovodrun %s; mpirun %s" % (
            " ".join("%.2f" % t for t in times["horovodrun"]),
            " ".join("%.2f" % t for t in times["mpirun"])))
    else:
        print("mpirun not found or failed: no ratio")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
