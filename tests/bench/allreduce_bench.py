#!/usr/bin/env python3
"""Allreduce benchmark: libhvd (hvd_bench) against MPI_Allreduce (mpi_bench).

One command measures, for every rank count of --np (default 2,4) on this
host, in the same run:

  hvd   hvd_bench under horovodrun (libhvd's transport for ranks on one
        host: shared memory once issue 6 lands, a TCP ring over loopback
        before);
  mpi   mpi_bench under mpirun with Open MPI's defaults, no --mca btl
        restriction: ob1 with the vader shared-memory btl between ranks of
        one host. This is the peer the targets are measured against;
  tcp   (only with --mpi-tcp) mpi_bench under `mpirun --mca pml ob1 --mca
        btl tcp,self`: MPI over loopback TCP, an extra column;
  hvdtcp (only with --mpi-tcp) hvd_bench with HOROVOD_SHM_DISABLE=1:
        libhvd's TCP ring, to set beside tcp;
  stream_probe -n 1,N...: the memory bandwidth of this host, one process
        copying alone and N processes copying at once.

All of these run in turn, repetition by repetition, the order rotating, so
that all see the same machine load. The tables printed are per-size medians
over --reps repetitions, in the nccl-tests format the programs print (size,
count, type, redop, time, algbw, busbw, #wrong); busbw = algbw x 2(n-1)/n.
Small sizes (up to --small-max) run with more iterations than large ones,
because a 20-iteration mean of a 10 us operation is mostly noise. 64 MiB,
the size of the memory-bandwidth target, is added to the sizes of
-b/-e/-f when it lies between -b and -e and the step skips it.

Then, per rank count n, a table of busbw ratios hvd/mpi per size, the
8-byte latencies, and these targets:

  busbw >= 1.3 x MPI's (defaults) at every size >= 1 MiB for n = 2, and
  >= 1.0 x for n >= 3 (the -np 4 target);
  algbw at 64 MiB >= 0.5 x memory bandwidth / (2n).

Why memory bandwidth / (2n): an allreduce of S bytes per rank among n ranks
of one host must at least read every rank's input once and write every
rank's output once, 2nS bytes of memory traffic, so its time is at least
2nS / BW and its algbw (S / time) at most BW / (2n). BW is stream_probe's
best STREAM copy bandwidth (a[i] = b[i], counting bytes read + written as
STREAM does) of n processes copying at once, the aggregate: the n ranks run
at once and share the memory, so what n copiers together can move is the
ceiling they are held to. One copier alone would understate it on hosts
where one core cannot saturate memory; with more ranks than cores (-np 4
on two cores) the n-way figure includes the time-slicing the ranks suffer
too. The memcpy figure (glibc, non-temporal stores for large buffers) and
the single-process one are printed alongside. 64 MiB per rank is far
above the last-level cache, and hvd_bench/mpi_bench rotate their buffers
over at least 64 MiB, so the figure is a memory figure, not a cache one.

This prints figures and "target met" / "target NOT met" lines; it is not a
pass/fail test. It exits 0 unless hvd_bench fails or reports wrong
elements. Without mpi_bench or mpirun it says so and prints libhvd's
tables alone; without stream_probe it skips the memory-bandwidth target.

Run it with
  meson test -C build --benchmark -v allreduce
(which runs `allreduce_bench.py --reps 3 -f 4`), or directly, e.g.
  python3 tests/bench/allreduce_bench.py --build-dir build --reps 3 -f 4
  python3 tests/bench/allreduce_bench.py --build-dir build --reps 1 \\
      -b 8 -e 64M -f 4
  python3 tests/bench/allreduce_bench.py --np 2 --mpi-tcp --reps 5
Options: --np LIST (default 2,4; a positional LIST does the same), --reps
(default 3), -b/-e/-f (default 8, 64M, 2), -d, -o, -n, -w, -I,
--small-max/--small-iters/--small-warmup, --mpi-tcp, --build-dir.
Environment: HVD_HOROVODRUN, HVD_BENCH, MPI_BENCH, HVD_MPIRUN,
HVD_STREAM_PROBE (defaults: the binaries under --build-dir, and mpirun on
PATH); HVD_BENCH_NP and HVD_BENCH_REPS give the defaults of --np and
--reps.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
MEM_SIZE = 64 * MIB        # the size the memory-bandwidth target is read at
MEM_TARGET = 0.5           # hvd algbw >= this x BW / (2n) at MEM_SIZE
RATIO_MIN_SIZE = 1 * MIB   # busbw targets apply at this size and above
RUN_TIMEOUT = 900
PREFIX_END = ">:"  # horovodrun prefixes lines with [rank,local]<stdout>:


def busbw_target(np_):
    """hvd busbw / MPI busbw wanted at >= 1 MiB: 1.3 at -np 2, else 1.0."""
    return 1.3 if np_ == 2 else 1.0


class BenchError(Exception):
    pass


def parse_bytes(s):
    """A byte count with an optional K, M or G (binary) suffix."""
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    if mult > 1:
        s = s[:-1]
    return int(s) * mult


def parse_np_list(s):
    """'2,4' -> [2, 4]; duplicates dropped, order kept."""
    out = []
    for part in str(s).replace(" ", "").split(","):
        if not part:
            continue
        n = int(part)
        if n < 1:
            raise ValueError("np must be >= 1")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("empty np list")
    return out


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


def run_capture(argv, label):
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise BenchError("%s: no exit within %d s" % (label, RUN_TIMEOUT))
    except OSError as e:
        raise BenchError("%s: %s" % (label, e))


def run(argv, label):
    r = run_capture(argv, label)
    rows, comments = parse_table(r.stdout)
    if r.returncode != 0 and not rows:
        tail = (r.stderr.strip() or r.stdout.strip())[-2000:]
        raise BenchError("%s exited %d:\n%s" % (label, r.returncode, tail))
    skipped = [c for c in comments if "skipped" in c]
    return rows, comments, skipped, r.returncode


class Runner:
    """One launcher + program at one rank count: runs every band and
    collects the rows."""

    def __init__(self, key, np_, title, cmd):
        self.key, self.np, self.title, self.cmd = key, np_, title, cmd
        self.samples = {}  # size -> list of rows, one per repetition
        self.skipped = None
        self.failed = None
        self.nonzero = False

    def run_rep(self, bands):
        if self.skipped or self.failed:
            return
        for args in bands:
            try:
                rows, _, skipped, rc = run(self.cmd + args,
                                           "%s -np %d" % (self.key, self.np))
            except BenchError as e:
                self.failed = str(e)
                return
            if skipped:
                self.skipped = skipped[0]
                return
            self.nonzero |= rc != 0
            for size, row in rows.items():
                self.samples.setdefault(size, []).append(row)

    def ok(self):
        return bool(self.samples) and not self.skipped and not self.failed

    def median(self):
        """Per size, the median time of the repetitions and its bandwidths,
        recomputed unrounded (allreduce: busbw = algbw * 2(n-1)/n)."""
        out = {}
        for size, rows in self.samples.items():
            t = statistics.median(r["time"] for r in rows)
            row = dict(rows[0])
            row["time"] = t
            row["algbw"] = size / t / 1e3 if t else 0.0
            row["busbw"] = row["algbw"] * 2.0 * (self.np - 1) / self.np
            wrong = [r["wrong"] for r in rows]
            nums = [int(w) for w in wrong if w.isdigit()]
            row["wrong"] = str(max(nums)) if nums else wrong[0]
            row["n"] = len(rows)
            out[size] = row
        return out


class StreamProbe:
    """stream_probe -n 1,N...: best GB/s per (kernel, workers) over reps."""

    def __init__(self, cmd):
        self.cmd = cmd
        self.best = {}  # (kernel, workers) -> GB/s
        self.header = []
        self.failed = None

    def run_rep(self):
        if self.failed:
            return
        try:
            r = run_capture(self.cmd, "stream_probe")
        except BenchError as e:
            self.failed = str(e)
            return
        if r.returncode != 0:
            self.failed = "stream_probe exited %d: %s" % (
                r.returncode, (r.stderr.strip() or r.stdout.strip())[-500:])
            return
        comments = []
        for line in r.stdout.splitlines():
            if line.startswith("#"):
                if len(comments) < 3:
                    comments.append(line)
                continue
            f = line.split()
            if len(f) != 5:
                continue
            try:
                key, gbs = (f[0], int(f[1])), float(f[2])
            except ValueError:
                continue
            self.best[key] = max(gbs, self.best.get(key, 0.0))
        self.header = self.header or comments

    def get(self, kernel, workers):
        return self.best.get((kernel, workers))


def mpi_default_transport(base, mpi_bench):
    """What mpirun's defaults pick here, from one tiny verbose run: the pml
    selected and the btls that initialised. Best effort; None if unknown."""
    argv = base + ["-np", "2", "--mca", "pml_base_verbose", "10",
                   "--mca", "btl_base_verbose", "10",
                   mpi_bench, "-b", "8", "-e", "8", "-n", "1", "-w", "0"]
    try:
        r = run_capture(argv, "mpirun (transport check)")
    except BenchError:
        return None
    text = r.stdout + r.stderr
    pml = re.findall(r"selected (\w+) best priority", text)
    btls = []
    for b in re.findall(r"init of component (\w+) returned success", text):
        if b not in btls:
            btls.append(b)
    if not pml and not btls:
        return None
    desc = "pml %s" % (pml[0] if pml else "?")
    if btls:
        desc += ", btls %s" % " ".join(btls)
    if "vader" in btls or "sm" in btls:
        desc += " (vader/sm: shared memory between ranks of one host)"
    return desc


def load_line():
    """The load average against the CPU count: MPI's ranks, bound to cores
    and polling, suffer far more from other work on the host than libhvd's,
    so a loaded host skews the ratios; this says when to repeat the run."""
    try:
        l1, l5, _ = os.getloadavg()
    except OSError:
        return "load average: unknown"
    cpus = os.cpu_count() or 1
    text = "load average before the run: %.2f (1 min), %.2f (5 min) on " \
           "%d CPUs" % (l1, l5, cpus)
    if l1 > 0.5 * cpus:
        text += "; other work is running: figures are noisy, repeat"
    return text


def print_table(runner, reps):
    print("#")
    print("# -np %d %s" % (runner.np, runner.title))
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
    for size, r in sorted(runner.median().items()):
        print("%12d  %12d  %8s  %7s  %10.2f  %7.3f  %7.3f  %7s" %
              (size, r["count"], r["type"], r["redop"], r["time"],
               r["algbw"], r["busbw"], r["wrong"]))


def ratio(a, b):
    return a / b if b else float("nan")


def verdict(ok):
    return "target met" if ok else "target NOT met"


def report_np(np_, runners, probe, seq, a, small_max):
    """Ratio table, latency, memory bandwidth and targets for one np.
    Returns the target lines, for the summary at the end."""
    hvd, mpi, tcp = runners.get("hvd"), runners.get("mpi"), runners.get("tcp")
    targets = []
    tag = "-np %d" % np_
    if not hvd.ok():
        line = "# %s: hvd_bench gave no rows: no comparison" % tag
        print("#")
        print(line)
        return [line]
    hm = hvd.median()
    refs = [r for r in (mpi, tcp) if r is not None and r.ok()]
    med = {r.key: r.median() for r in refs}
    want = busbw_target(np_)

    print("#")
    print("# %s: busbw ratio per size, hvd / mpi (mpirun defaults); > 1: "
          "libhvd faster; target >= %.1f at sizes >= %s" %
          (tag, want, human(RATIO_MIN_SIZE)))
    head = "# %10s  %9s" % ("size (B)", "hvd busbw")
    for r in refs:
        head += "  %11s  %9s" % ("%s busbw" % r.key, "hvd/%s" % r.key)
    print(head + "  %s" % ("target" if "mpi" in med else ""))
    for size in seq:
        if size not in hm:
            continue
        line = "%12d  %9.3f" % (size, hm[size]["busbw"])
        for r in refs:
            m = med[r.key].get(size)
            if m is None:
                line += "  %11s  %9s" % ("-", "-")
            else:
                line += "  %11.3f  %9.2f" % (
                    m["busbw"], ratio(hm[size]["busbw"], m["busbw"]))
        if "mpi" in med and size >= RATIO_MIN_SIZE and size in med["mpi"]:
            q = ratio(hm[size]["busbw"], med["mpi"][size]["busbw"])
            line += "  %s" % ("met" if q >= want else "NOT met")
        print(line)

    lat = 8 if 8 in hm else min(hm)
    line = "# %s: time at %s (median of %d reps, %d iters): hvd " \
           "%.2f us" % (tag, human(lat), a.reps,
                        a.small_iters if lat <= small_max else a.iters,
                        hm[lat]["time"])
    for r in refs:
        m = med[r.key].get(lat)
        if m:
            line += ", %s %.2f us (hvd/%s %.2f)" % (
                r.key, m["time"], r.key, ratio(hm[lat]["time"], m["time"]))
    print("#")
    print(line)
    ht = runners.get("hvdtcp")
    if ht is not None and ht.ok() and "tcp" in med and \
            lat in ht.median() and lat in med["tcp"]:
        t, m = ht.median()[lat]["time"], med["tcp"][lat]["time"]
        print("# %s: time at %s over TCP: hvd %.2f us, MPI %.2f us "
              "(hvd/tcp %.2f)" % (tag, human(lat), t, m, ratio(t, m)))

    # busbw against MPI's defaults at >= 1 MiB.
    name = "%s: hvd busbw >= %.1fx MPI (mpirun defaults) at sizes >= %s" % (
        tag, want, human(RATIO_MIN_SIZE))
    if "mpi" not in med:
        targets.append("# %s: not measured (%s)" % (
            name, "MPI failed" if mpi is not None else "no MPI"))
    else:
        mm = med["mpi"]
        big = [s for s in seq if s >= RATIO_MIN_SIZE and s in hm and s in mm]
        if not big:
            targets.append("# %s: not measured (no sizes >= %s)" %
                           (name, human(RATIO_MIN_SIZE)))
        else:
            qs = [(s, ratio(hm[s]["busbw"], mm[s]["busbw"])) for s in big]
            low = min(qs, key=lambda x: x[1])
            slow = [s for s, q in qs if not q >= want]
            text = "# %s: %s (lowest %.2f at %s" % (
                name, verdict(not slow), low[1], human(low[0]))
            if slow:
                text += "; below at %d of %d sizes" % (len(slow), len(big))
            targets.append(text + ")")

    # algbw at 64 MiB against memory bandwidth / (2n).
    name = "%s: hvd algbw at %s >= %.1f x BW/(2n)" % (
        tag, human(MEM_SIZE), MEM_TARGET)
    bw = probe.get("copy", np_) if probe else None
    msize = MEM_SIZE if MEM_SIZE in hm else max(hm)
    if bw is None:
        why = probe.failed if probe and probe.failed else "no stream_probe"
        targets.append("# %s: not measured (%s)" % (name, why.split("\n")[0]))
    else:
        one = probe.get("copy", 1)
        mc = probe.get("memcpy", np_)
        bound = bw / (2.0 * np_)
        print("#")
        print("# %s: memory bandwidth BW = %.2f GB/s, STREAM copy by %d "
              "processes at once (aggregate, best of reps); 1 process %s; "
              "memcpy by %d %s" %
              (tag, bw, np_, "%.2f" % one if one else "-", np_,
               "%.2f" % mc if mc else "-"))
        print("# %s: BW/(2n) = %.3f GB/s, the algbw ceiling of a "
              "shared-memory allreduce (2n x size bytes of traffic)" %
              (tag, bound))
        line = "# %s: algbw at %s: hvd %.3f GB/s = %.2f x BW/(2n)" % (
            tag, human(msize), hm[msize]["algbw"],
            hm[msize]["algbw"] / bound)
        for r in refs:
            m = med[r.key].get(msize)
            if m:
                line += ", %s %.3f GB/s = %.2f" % (r.key, m["algbw"],
                                                   m["algbw"] / bound)
        if mc:
            line += " (against memcpy's BW: hvd %.2f)" % (
                hm[msize]["algbw"] / (mc / (2.0 * np_)))
        print(line)
        if msize != MEM_SIZE:
            targets.append("# %s: not measured (%s not run; largest "
                           "size %s: %.2f)" %
                           (name, human(MEM_SIZE), human(msize),
                            hm[msize]["algbw"] / bound))
        else:
            q = hm[msize]["algbw"] / bound
            targets.append("# %s: %s (%.2f)" % (name, verdict(q >= MEM_TARGET),
                                                q))
    print("#")
    for t in targets:
        print(t)
    return targets


def main():
    ap = argparse.ArgumentParser(
        description="libhvd allreduce against MPI_Allreduce (mpirun "
                    "defaults) and against this host's memory bandwidth.")
    ap.add_argument("np", nargs="?", default=None, metavar="LIST",
                    help="same as --np")
    ap.add_argument("--np", dest="np_opt", default=None, metavar="LIST",
                    help="rank counts, comma-separated (default 2,4, or "
                         "HVD_BENCH_NP)")
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
    ap.add_argument("--mpi-tcp", action="store_true",
                    help="also run MPI over --mca btl tcp,self (loopback) "
                         "as an extra column")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    try:
        nps = parse_np_list(a.np_opt or a.np or
                            os.environ.get("HVD_BENCH_NP", "2,4"))
    except ValueError as e:
        ap.error("--np: %s" % e)
    minb, maxb = parse_bytes(a.minbytes), parse_bytes(a.maxbytes)
    small_max = parse_bytes(a.small_max)
    if minb > maxb or a.stepfactor <= 1 or a.reps < 1:
        ap.error("need minbytes <= maxbytes, stepfactor > 1, reps >= 1")

    bd = a.build_dir
    horovodrun = os.environ.get("HVD_HOROVODRUN",
                                os.path.join(bd, "launcher", "horovodrun"))
    hvd_bench = os.environ.get("HVD_BENCH",
                               os.path.join(bd, "tests", "bench", "hvd_bench"))
    mpi_bench = os.environ.get("MPI_BENCH",
                               os.path.join(bd, "tests", "bench", "mpi_bench"))
    stream = os.environ.get("HVD_STREAM_PROBE",
                            os.path.join(bd, "tests", "bench",
                                         "stream_probe"))
    mpirun = os.environ.get("HVD_MPIRUN") or shutil.which("mpirun")
    for p in (horovodrun, hvd_bench):
        if not os.access(p, os.X_OK):
            print("allreduce_bench: %s not found; build first or set "
                  "HVD_HOROVODRUN / HVD_BENCH" % p, file=sys.stderr)
            return 1

    # Bands of one size sequence: many iterations for the small sizes, and
    # 64 MiB on its own when the step skips it.
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
    if minb <= MEM_SIZE <= maxb and MEM_SIZE not in seq:
        seq = sorted(seq + [MEM_SIZE])
        bands.append(common + ["-b", str(MEM_SIZE), "-e", str(MEM_SIZE),
                               "-n", str(a.iters), "-w", str(a.warmup)])

    have_mpi = bool(mpirun) and os.access(mpirun, os.X_OK) and \
        os.access(mpi_bench, os.X_OK)
    base = []
    if have_mpi:
        base = [mpirun, "--oversubscribe"]
        if os.geteuid() == 0:
            base.append("--allow-run-as-root")
    # per np: {key: Runner}; jobs: everything a repetition runs, in order.
    by_np, jobs = {}, []
    for np_ in nps:
        rs = {"hvd": Runner("hvd", np_, "libhvd: hvd_bench under horovodrun",
                            [horovodrun, "-np", str(np_), hvd_bench])}
        if have_mpi:
            rs["mpi"] = Runner(
                "mpi", np_, "MPI_Allreduce under mpirun with its defaults "
                "(the target's peer)",
                base + ["-np", str(np_), mpi_bench])
            if a.mpi_tcp:
                rs["hvdtcp"] = Runner(
                    "hvdtcp", np_, "libhvd over its TCP ring "
                    "(HOROVOD_SHM_DISABLE=1): extra column",
                    ["env", "HOROVOD_SHM_DISABLE=1", horovodrun, "-np",
                     str(np_), hvd_bench])
                # pml ob1 makes sure the btl choice is obeyed (UCX would
                # bypass it); lo keeps the traffic on loopback.
                rs["tcp"] = Runner(
                    "tcp", np_, "MPI_Allreduce over TCP (mpirun --mca btl "
                    "tcp,self): extra column",
                    base + ["-np", str(np_), "--mca", "pml", "ob1",
                            "--mca", "btl", "tcp,self",
                            "--mca", "btl_tcp_if_include", "lo", mpi_bench])
        by_np[np_] = rs
        jobs += [(lambda r=r: r.run_rep(bands)) for r in rs.values()]
    probe = None
    if os.access(stream, os.X_OK):
        workers = sorted(set([1] + nps))
        probe = StreamProbe([stream, "-n", ",".join(map(str, workers))])
        jobs.append(probe.run_rep)

    print("# allreduce_bench: np %s, %s %s, %s, %s to %s, x%g%s, %d "
          "repetitions, %d iters (sizes <= %s: %d)" %
          (",".join(map(str, nps)), a.dtype, a.op,
           "in place" if a.inplace else "out of place",
           human(minb), human(maxb), a.stepfactor,
           " (+64 MiB)" if len(bands) > (bool(small) + bool(large)) else "",
           a.reps, a.iters, human(small_max), a.small_iters))
    print("# %s" % load_line())
    if have_mpi:
        tr = mpi_default_transport(base, mpi_bench)
        print("# mpirun defaults here: %s" % (tr or "could not tell"))
    else:
        print("# mpi_bench or mpirun not found: libhvd's tables only")
    if probe is None:
        print("# %s not found: no memory-bandwidth figure" % stream)
    sys.stdout.flush()

    for rep in range(a.reps):
        # Rotate the order so no program always runs right after another.
        for i in range(len(jobs)):
            jobs[(rep + i) % len(jobs)]()

    if probe:
        print("#")
        print("# memory bandwidth: %s" % " ".join(probe.cmd))
        if probe.failed:
            print("# FAILED: %s" % probe.failed.replace("\n", "\n#   "))
        else:
            for h in probe.header:
                print(h)
            print("# %8s  %7s  %12s  (best over %d runs)" %
                  ("kernel", "workers", "GB/s", a.reps))
            for (k, w), gbs in sorted(probe.best.items(),
                                      key=lambda x: (x[0][1], x[0][0])):
                print("%10s  %7d  %12.3f" % (k, w, gbs))

    status = 0
    summary = []
    for np_ in nps:
        rs = by_np[np_]
        for r in rs.values():
            print_table(r, a.reps)
        hvd = rs["hvd"]
        if hvd.failed or not hvd.samples:
            print("# -np %d: hvd_bench failed" % np_, file=sys.stderr)
            status = 1
        elif hvd.nonzero or any(r["wrong"] not in ("0", "N/A")
                                for r in hvd.median().values()):
            print("# -np %d: hvd_bench reported wrong elements or failed" %
                  np_, file=sys.stderr)
            status = 1
        summary += report_np(np_, rs, probe, seq, a, small_max)

    print("#")
    print("# summary")
    for t in summary:
        print(t)
    return status


if __name__ == "__main__":
    sys.exit(main())
