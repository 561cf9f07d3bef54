#!/usr/bin/env python3
"""libhvd through its MPI backend against libhvd on its own transports.

For every rank count of --np (default 2,4) on this host, in the same run,
repetition by repetition with the order rotating so that all see the same
machine load:

  mpi   hvd_bench under mpirun: libhvd takes the job from MPI and runs
        every collective (negotiation included) with MPI;
  own   hvd_bench under horovodrun: libhvd's own transport (shared memory
        for ranks of one host);
  raw   (when built) mpi_bench under mpirun: MPI_Allreduce alone, no
        libhvd, what the MPI backend adds its negotiation and thread
        hand-over to.

Prints, per rank count, the per-size medians side by side (time in us and
busbw in GB/s, busbw = algbw x 2(n-1)/n as nccl-tests) and the ratio of
the MPI backend's busbw to the own transport's. Exits 1 if a run fails or
reports wrong elements, 77 (skipped) without MPI in the build or mpirun.

  meson test -C build --benchmark -v mpi_backend
  python3 tests/bench/mpi_backend_bench.py --build-dir build --reps 3
Options: --np LIST, --reps N, -d DTYPE, -o OP, --build-dir DIR.
Environment: HVD_HOROVODRUN, HVD_BENCH, HVD_MPIRUN, MPI_BENCH,
HVD_HAVE_MPI (meson sets them).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 900
# Small sizes with many iterations (a 20-iteration mean of a 50 us
# operation is mostly noise), large ones with few.
BANDS = (["-b", "8", "-e", "64K", "-f", "8", "-n", "200", "-w", "20"],
         ["-b", "256K", "-e", "64M", "-f", "4", "-n", "20", "-w", "5"])


def parse_table(text):
    """{size: (time_us, busbw)} from an nccl-tests style table, and the
    number of rows with wrong elements."""
    rows, wrong = {}, 0
    for line in text.splitlines():
        if line.startswith("[") and ">:" in line:  # horovodrun's prefix
            line = line.split(">:", 1)[1]
        f = line.split()
        if line.startswith("#") or len(f) != 8:
            continue
        try:
            rows[int(f[0])] = (float(f[4]), float(f[6]))
        except ValueError:
            continue
        wrong += f[7] not in ("0", "N/A")
    return rows, wrong


class Runner:
    def __init__(self, key, cmd):
        self.key, self.cmd = key, cmd
        self.samples = {}  # size -> [(time, busbw)]
        self.failed = None
        self.skipped = None  # the program's reason, e.g. a dtype MPI lacks

    def run_rep(self, extra):
        if self.failed or self.skipped:
            return
        for band in BANDS:
            argv = self.cmd + band + extra
            try:
                p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True,
                                   timeout=TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as e:
                self.failed = "%s: %s" % (" ".join(argv), e)
                return
            rows, wrong = parse_table(p.stdout)
            skip = [x for x in p.stdout.splitlines() if "skipped:" in x]
            if p.returncode == 0 and not rows and skip:
                self.skipped = skip[0].lstrip("# ")
                return
            if p.returncode != 0 or not rows or wrong:
                self.failed = "%s: exit %d, %d wrong rows\n%s" % (
                    " ".join(argv), p.returncode, wrong,
                    (p.stderr.strip() or p.stdout.strip())[-1500:])
                return
            for size, row in rows.items():
                self.samples.setdefault(size, []).append(row)

    def median(self, size, np_):
        """Median time and the busbw it gives."""
        rows = self.samples.get(size)
        if not rows:
            return None
        t = statistics.median(r[0] for r in rows)
        return t, size / t / 1e3 * 2.0 * (np_ - 1) / np_ if t else 0.0


def human(n):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def print_tables(np_, runners, reps, dtype, op):
    keys = [r for r in runners if not r.failed and not r.skipped]
    print("#")
    print("# -np %d, allreduce %s %s, median of %d repetitions" %
          (np_, dtype, op, reps))
    for r in runners:
        print("# %-4s $ %s" % (r.key, " ".join(r.cmd)))
        if r.failed:
            print("#      FAILED: %s" % r.failed.replace("\n", "\n#   "))
        elif r.skipped:
            print("#      %s" % r.skipped)
    head = "# %9s" % "size"
    sub = "# %9s" % ""
    for r in keys:
        head += "  %21s" % ("%s: time    busbw" % r.key)
        sub += "  %21s" % "(us)   (GB/s)"
    by_key = {r.key: r for r in keys}
    if "mpi" in by_key and "own" in by_key:
        head += "  %9s" % "mpi/own"
        sub += "  %9s" % "(busbw)"
    print(head)
    print(sub)
    sizes = sorted(set().union(*(r.samples for r in keys))) if keys else []
    for size in sizes:
        line = "  %9s" % human(size)
        got = {}
        for r in keys:
            m = r.median(size, np_)
            got[r.key] = m
            line += "  %21s" % ("%10.1f %8.2f" % m if m else "-")
        if got.get("mpi") and got.get("own") and got["own"][1] > 0:
            line += "  %9.2f" % (got["mpi"][1] / got["own"][1])
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", default="2,4")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-d", "--dtype", default="float32")
    ap.add_argument("-o", "--op", default="sum")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    b = a.build_dir
    hr = os.environ.get("HVD_HOROVODRUN") or os.path.join(
        b, "launcher", "horovodrun")
    bench = os.environ.get("HVD_BENCH") or os.path.join(
        b, "tests", "bench", "hvd_bench")
    raw = os.environ.get("MPI_BENCH") or os.path.join(
        b, "tests", "bench", "mpi_bench")
    mpirun = os.environ.get("HVD_MPIRUN") or shutil.which("mpirun")
    have = os.environ.get("HVD_HAVE_MPI")
    if have is None:
        try:
            with open(os.path.join(b, "hvd_build.h")) as f:
                have = "1" if "HVD_HAVE_MPI 1" in f.read() else "0"
        except OSError:
            have = "0"
    if have != "1" or not mpirun:
        print("SKIP: %s" % ("this build has no MPI backend (-Dmpi)"
                            if have != "1" else "no mpirun found"))
        return 77
    base = [mpirun, "--oversubscribe"]
    if os.geteuid() == 0:
        base.append("--allow-run-as-root")
    extra = ["-d", a.dtype, "-o", a.op]
    failed = False
    try:
        load = "%.2f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    print("# libhvd allreduce: MPI backend (mpirun) against its own "
          "transports (horovodrun); load average %s on %d CPUs" %
          (load, os.cpu_count() or 1))
    for np_ in [int(x) for x in a.np.split(",") if x]:
        runners = [Runner("mpi", base + ["-np", str(np_), bench]),
                   Runner("own", [hr, "-np", str(np_), bench])]
        if os.access(raw, os.X_OK):
            runners.append(Runner("raw", base + ["-np", str(np_), raw]))
        for rep in range(a.reps):
            k = rep % len(runners)
            for r in runners[k:] + runners[:k]:
                r.run_rep(extra)
        print_tables(np_, runners, a.reps, a.dtype, a.op)
        failed |= any(r.failed for r in runners)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
