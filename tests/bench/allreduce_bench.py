#!/usr/bin/env python3
"""Allreduce benchmark: libhvd (hvd_bench) against MPI_Allreduce (mpi_bench).

Runs hvd_bench under horovodrun and mpi_bench under mpirun twice: once with
`--mca pml ob1 --mca btl tcp,self` (TCP on loopback, the same transport as
libhvd, which is what the target is measured against) and once with
mpirun's default transport (vader shared memory on one host, a second
reference that libhvd does not yet try to match). The three are run in
turn, repetition by repetition, so that all see the same machine load; the
tables printed are the per-size median over the repetitions, in the
nccl-tests format the programs themselves print. Then a table of busbw
ratios hvd/mpi per size, the 8-byte latency ratio, and whether the target
is met:

  busbw at 1 MiB and above >= MPI_Allreduce over tcp,self, and
  8-byte latency <= 2x MPI_Allreduce over tcp,self.

Small sizes (up to --small-max) run with more iterations than large ones,
because a 20-iteration mean of a 10 us operation is mostly noise.

This prints figures; it is not a pass/fail test. It exits 0 unless hvd_bench
fails or reports wrong elements. Without mpi_bench or mpirun it says so
and prints libhvd's table alone.

Run it with `meson test -C build --benchmark -v allreduce`, or directly:
  tests/bench/allreduce_bench.py [--np 2] [-b 8] [-e 64M] [--reps 3]
Environment: HVD_HOROVODRUN, HVD_BENCH, MPI_BENCH, HVD_MPIRUN (defaults:
the binaries under --build-dir, and mpirun on PATH).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
LATENCY_TARGET = 2.0  # hvd's 8-byte time at most this times MPI's (tcp)
RUN_TIMEOUT = 900
PREFIX_END = ">:"  # horovodrun prefixes lines with [rank,local]<stdout>:


class BenchError(Exception):
    pass


def parse_bytes(s):
    """A byte count with an optional K, M or G (binary) suffix."""
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    if mult > 1:
        s = s[:-1]
    return int(s) * mult


def sizes(minb, maxb, step):
    """The sizes bench_common.c visits, computed the same way."""
    out, b = [], minb
    while b <= maxb:
        out.append(b)
        nb = int(float(b) * step)
        b = nb if nb > b else b + 1
    return out


def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def parse_table(text):
    """Rows of an nccl-tests style table: {size: row}, and comment lines."""
    rows, comments = {}, []
    for line in text.splitlines():
        # horovodrun's prefix ends at the first ">:"; mpirun adds none.
        if line.startswith("[") and PREFIX_END in line:
            line = line.split(PREFIX_END, 1)[1]
        if line.startswith("#"):
            comments.append(line)
            continue
        f = line.split()
        if len(f) != 8:
            continue
        try:
            rows[int(f[0])] = {
                "count": int(f[1]), "type": f[2], "redop": f[3],
                "time": float(f[4]), "algbw": float(f[5]),
                "busbw": float(f[6]), "wrong": f[7]}
        except ValueError:
            continue
    return rows, comments


def run(argv, label):
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise BenchError("%s: no exit within %d s" % (label, RUN_TIMEOUT))
    except OSError as e:
        raise BenchError("%s: %s" % (label, e))
    rows, comments = parse_table(r.stdout)
    if r.returncode != 0 and not rows:
        tail = (r.stderr.strip() or r.stdout.strip())[-2000:]
        raise BenchError("%s exited %d:\n%s" % (label, r.returncode, tail))
    skipped = [c for c in comments if "skipped" in c]
    return rows, comments, skipped, r.returncode


class Runner:
    """One launcher + program: runs every band and collects the rows."""

    def __init__(self, key, title, cmd):
        self.key, self.title, self.cmd = key, title, cmd
        self.samples = {}  # size -> list of rows, one per repetition
        self.header = None
        self.skipped = None
        self.failed = None
        self.nonzero = False

    def run_rep(self, bands):
        if self.skipped or self.failed:
            return
        for args in bands:
            try:
                rows, comments, skipped, rc = run(self.cmd + args, self.title)
            except BenchError as e:
                self.failed = str(e)
                return
            if skipped:
                self.skipped = skipped[0]
                return
            self.nonzero |= rc != 0
            if self.header is None and comments:
                self.header = comments[0]
            for size, row in rows.items():
                self.samples.setdefault(size, []).append(row)

    def median(self, np_):
        """Per size, the median time of the repetitions and its bandwidths,
        recomputed unrounded (allreduce: busbw = algbw * 2(n-1)/n)."""
        out = {}
        for size, rows in self.samples.items():
            t = statistics.median(r["time"] for r in rows)
            row = dict(rows[0])
            row["time"] = t
            row["algbw"] = size / t / 1e3 if t else 0.0
            row["busbw"] = row["algbw"] * 2.0 * (np_ - 1) / np_
            wrong = [r["wrong"] for r in rows]
            nums = [int(w) for w in wrong if w.isdigit()]
            row["wrong"] = str(max(nums)) if nums else wrong[0]
            row["n"] = len(rows)
            out[size] = row
        return out


def print_table(runner, reps, np_):
    print("#")
    print("# %s" % runner.title)
    print("# $ %s" % " ".join(runner.cmd))
    if runner.failed:
        print("# FAILED: %s" % runner.failed.replace("\n", "\n#   "))
        return
    if runner.skipped:
        print(runner.skipped)
        return
    print("# median of %d repetitions per size" % reps)
    print("# %10s  %12s  %8s  %7s  %10s  %7s  %7s  %7s" %
          ("size", "count", "type", "redop", "time", "algbw", "busbw",
           "#wrong"))
    print("# %10s  %12s  %8s  %7s  %10s  %7s  %7s  %7s" %
          ("(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
    for size, r in sorted(runner.median(np_).items()):
        print("%12d  %12d  %8s  %7s  %10.2f  %7.2f  %7.2f  %7s" %
              (size, r["count"], r["type"], r["redop"], r["time"],
               r["algbw"], r["busbw"], r["wrong"]))


def ratio(a, b):
    return a / b if b else float("nan")


def main():
    ap = argparse.ArgumentParser(
        description="libhvd allreduce against MPI_Allreduce, same sizes.")
    ap.add_argument("np", nargs="?", type=int,
                    default=int(os.environ.get("HVD_BENCH_NP", "2")),
                    help="number of ranks (default 2)")
    ap.add_argument("--np", dest="np_opt", type=int, help="same as np")
    ap.add_argument("-b", "--minbytes", default="8")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--stepfactor", type=float, default=2.0)
    ap.add_argument("-d", "--dtype", default="float32")
    ap.add_argument("-o", "--op", default="sum")
    ap.add_argument("-n", "--iters", type=int, default=20,
                    help="timed iterations per large size (default 20)")
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("-I", "--inplace", type=int, choices=(0, 1), default=0,
                    help="1: allreduce in place (default 0, out of place)")
    ap.add_argument("--small-max", default="64K",
                    help="largest size run with --small-iters (default 64K)")
    ap.add_argument("--small-iters", type=int, default=500)
    ap.add_argument("--small-warmup", type=int, default=50)
    ap.add_argument("--reps", type=int,
                    default=int(os.environ.get("HVD_BENCH_REPS", "3")),
                    help="repetitions; tables show the median (default 3)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    np_ = a.np_opt or a.np
    minb, maxb = parse_bytes(a.minbytes), parse_bytes(a.maxbytes)
    small_max = parse_bytes(a.small_max)
    if np_ < 1 or minb > maxb or a.stepfactor <= 1 or a.reps < 1:
        ap.error("need np >= 1, minbytes <= maxbytes, stepfactor > 1, "
                 "reps >= 1")

    bd = a.build_dir
    horovodrun = os.environ.get("HVD_HOROVODRUN",
                                os.path.join(bd, "launcher", "horovodrun"))
    hvd_bench = os.environ.get("HVD_BENCH",
                               os.path.join(bd, "tests", "bench", "hvd_bench"))
    mpi_bench = os.environ.get("MPI_BENCH",
                               os.path.join(bd, "tests", "bench", "mpi_bench"))
    mpirun = os.environ.get("HVD_MPIRUN") or shutil.which("mpirun")
    for p in (horovodrun, hvd_bench):
        if not os.access(p, os.X_OK):
            print("allreduce_bench: %s not found; build first or set "
                  "HVD_HOROVODRUN / HVD_BENCH" % p, file=sys.stderr)
            return 1

    # Two bands of one size sequence: many iterations for the small sizes.
    seq = sizes(minb, maxb, a.stepfactor)
    small = [s for s in seq if s <= small_max]
    large = [s for s in seq if s > small_max]
    common = ["-d", a.dtype, "-o", a.op, "-f", repr(a.stepfactor),
              "-I", str(a.inplace)]
    bands = []
    if small:
        bands.append(common + ["-b", str(small[0]), "-e", str(small[-1]),
                               "-n", str(a.small_iters),
                               "-w", str(a.small_warmup)])
    if large:
        bands.append(common + ["-b", str(large[0]), "-e", str(large[-1]),
                               "-n", str(a.iters), "-w", str(a.warmup)])

    runners = [Runner("hvd", "libhvd: hvd_bench under horovodrun (TCP ring)",
                      [horovodrun, "-np", str(np_), hvd_bench])]
    have_mpi = mpirun and os.access(mpi_bench, os.X_OK)
    if have_mpi:
        base = [mpirun, "--oversubscribe", "-np", str(np_)]
        if os.geteuid() == 0:
            base.insert(1, "--allow-run-as-root")
        # pml ob1 makes sure the btl choice is obeyed (UCX would bypass it);
        # lo keeps the traffic on loopback, as libhvd's is on one host.
        tcp = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo"]
        runners.append(Runner("tcp", "MPI_Allreduce over TCP "
                              "(mpirun --mca btl tcp,self): the target's "
                              "reference", base + tcp + [mpi_bench]))
        runners.append(Runner("shm", "MPI_Allreduce, mpirun's default "
                              "transport (vader shared memory): second "
                              "reference only", base + [mpi_bench]))

    print("# allreduce_bench: np %d, %s %s, %s, %s to %s, x%g, %d "
          "repetitions, %d iters (sizes <= %s: %d)" %
          (np_, a.dtype, a.op, "in place" if a.inplace else "out of place",
           human(minb), human(maxb), a.stepfactor, a.reps, a.iters,
           human(small_max), a.small_iters))
    if not have_mpi:
        print("# mpi_bench or mpirun not found: libhvd's table only")
    for rep in range(a.reps):
        # Rotate the order so no program always runs right after another.
        for i in range(len(runners)):
            runners[(rep + i) % len(runners)].run_rep(bands)

    for r in runners:
        print_table(r, a.reps, np_)

    hvd = runners[0]
    status = 0
    if hvd.failed or not hvd.samples:
        print("# hvd_bench failed; no comparison", file=sys.stderr)
        return 1
    hm = hvd.median(np_)
    if any(r["wrong"] not in ("0", "N/A") for r in hm.values()) or \
            hvd.nonzero:
        print("# hvd_bench reported wrong elements or failed", file=sys.stderr)
        status = 1
    refs = [r for r in runners[1:] if r.samples and not r.skipped]
    if not refs:
        print("#\n# no MPI reference ran: no ratios")
        return status

    med = {r.key: r.median(np_) for r in refs}
    print("#")
    print("# busbw ratio per size, hvd/mpi (> 1: libhvd faster)")
    cols = "".join("  %11s  %9s" % ("mpi-%s busbw" % r.key,
                                     "hvd/%s" % r.key) for r in refs)
    print("# %10s  %9s%s" % ("size (B)", "hvd busbw", cols))
    for size in seq:
        if size not in hm:
            continue
        line = "%12d  %9.3f" % (size, hm[size]["busbw"])
        for r in refs:
            m = med[r.key].get(size)
            if m is None:
                line += "  %11s  %9s" % ("-", "-")
            else:
                line += "  %11.3f  %9.2f" % (m["busbw"],
                                             ratio(hm[size]["busbw"],
                                                   m["busbw"]))
        print(line)

    lat = 8 if 8 in hm else min(hm)
    print("#")
    print("# %d-byte allreduce latency (median of %d reps, %d iters):" %
          (lat, a.reps, a.small_iters if lat <= small_max else a.iters))
    print("#   hvd %.2f us" % hm[lat]["time"])
    for r in refs:
        m = med[r.key].get(lat)
        if m:
            print("#   mpi-%s %.2f us, hvd/mpi-%s %.2f" %
                  (r.key, m["time"], r.key, ratio(hm[lat]["time"],
                                                   m["time"])))

    if "tcp" in med:
        tm = med["tcp"]
        big = [s for s in seq if s >= MIB and s in hm and s in tm]
        slow = [(s, ratio(hm[s]["busbw"], tm[s]["busbw"])) for s in big
                if hm[s]["busbw"] < tm[s]["busbw"]]
        print("#")
        if not big:
            print("# target busbw >= MPI tcp at >= 1 MiB: no sizes >= 1 MiB "
                  "measured")
        elif slow:
            print("# target busbw >= MPI tcp at >= 1 MiB: NOT MET at %s" %
                  ", ".join("%s (%.2f)" % (human(s), q) for s, q in slow))
        else:
            print("# target busbw >= MPI tcp at >= 1 MiB: met (min ratio "
                  "%.2f)" % min(ratio(hm[s]["busbw"], tm[s]["busbw"])
                                for s in big))
        if lat in tm:
            q = ratio(hm[lat]["time"], tm[lat]["time"])
            print("# target %d-byte latency <= %gx MPI tcp: %s (%.2fx)" %
                  (lat, LATENCY_TARGET,
                   "met" if q <= LATENCY_TARGET else "NOT MET", q))
    return status


if __name__ == "__main__":
    sys.exit(main())
