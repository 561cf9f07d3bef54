#!/usr/bin/env python3
"""Allreduce benchmark: libhvd (hvd_bench) against MPI_Allreduce (mpi_bench).

One command measures, for every rank count of --np (default 2,4) on this
host and every buffer policy of --policy (default rotated), in the same run:

  hvd   hvd_bench under horovodrun (libhvd's transport for ranks on one
        host: shared memory);
  mpi   mpi_bench under mpirun with Open MPI's defaults, no --mca btl
        restriction: ob1 with the vader shared-memory btl between ranks of
        one host. This is the peer the targets are measured against;
  tcp   (only with --mpi-tcp) mpi_bench under `mpirun --mca pml ob1 --mca
        btl tcp,self`: MPI over loopback TCP, an extra column;
  hvdtcp (only with --mpi-tcp) hvd_bench with HOROVOD_SHM_DISABLE=1:
        libhvd's TCP ring, to set beside tcp;
  stream_probe -n 1,N...: the memory bandwidth of this host, one process
        copying alone and N processes copying at once (only for the rank
        counts that are not "many ranks", below).

Binding (--bind, default user): "user" runs both sides as users run them,
with no binding option: horovodrun's own default (--bind-to auto, an
equal share of the cores per rank) and mpirun's (--bind-to core for two
ranks, socket for more). "core": while the ranks fit the CPUs, one CPU per
rank on both sides (mpirun --bind-to core; horovodrun --bind-to none
under taskset by HOROVOD_LOCAL_RANK). "none": neither side binds
(horovodrun --bind-to none, mpirun --bind-to none); on a two-core machine
an unbound pair of ranks sometimes shares one CPU for a while, which
makes small-message figures bimodal from run to run.

Buffer policies (--policy LIST, comma-separated; every side of a policy is
run with the same buffer options, so its rows compare like with like):

  rotated  the programs' default: each iteration uses the next of a set of
           send/receive buffers that together cover 64 MiB (or as many as
           there are iterations), so that every iteration reads memory, as
           a training step that touches far more data between two
           reductions does, and not a warm cache;
  reused   -R 0: one send and one receive buffer, reused every iteration,
           as most published allreduce figures (nccl-tests, OSU) are taken.

All of these runs happen in turn, repetition by repetition, the order
rotating over every side of every policy and rank count and the probe, so
that all see the same machine load. The tables printed are per-size medians
over --reps repetitions, in the nccl-tests format the programs print (size,
count, type, redop, time, algbw, busbw, #wrong); busbw = algbw x 2(n-1)/n.
Every table header and every ratio and target line names its rank count and
policy ("-np 2, reused"). Small sizes (up to --small-max, 500
iterations) and mid-size ones (up to --mid-max, 200) run with more
iterations than large ones (-n, 20), because a 20-iteration mean of a
10 us operation is mostly noise, and the first iterations of a mid-size
one still fault pages in. 64 MiB, the size of the memory-bandwidth target,
is added to the sizes of -b/-e/-f when it lies between -b and -e and the
step skips it.

Then, per rank count n and policy, a table of busbw ratios hvd/mpi per
size, the 8-byte latencies, and these targets:

  busbw >= 1.3 x MPI's (defaults) at every size >= 1 MiB for n = 2, and
  >= 1.0 x for n >= 3 (the -np 4 target);
  the mid-size target: the same ratios (>= 1.3 x at n = 2, >= 1.0 x at
  n >= 3) at every size from 256 KiB to 4 MiB inclusive;
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
above the last-level cache, and with the rotated policy hvd_bench/mpi_bench
rotate their buffers over at least 64 MiB, so the figure is a memory
figure, not a cache one.

Many ranks: rank counts above --many-above (default: the CPU count, but at
least 4, so that the -np 4 target is still measured at every size on a
two-core host) run time-sliced, many ranks to a core. For them only small
sizes make sense: the sizes of -b/-e/-f are clamped to those <= --many-max
(default 4K), run with --many-iters/--many-warmup iterations (default 200
and 20), and what is printed is, per policy, the time ratio hvd/mpi per
size and the target

  hvd's time at 8 B <= 1.5 x MPI's (defaults).

stream_probe does not run for them (it would start n copiers of 256 MiB
each) and the memory-bandwidth target is skipped, which the output says.
mpirun always gets --oversubscribe, which Open MPI 4.1 needs as soon as the
ranks outnumber the cores (its slots) and which changes nothing below that
(binding included); horovodrun needs no such option.

This prints figures and "target met" / "target NOT met" lines; it is not a
pass/fail test. It exits 0 unless hvd_bench fails or reports wrong
elements. Without mpi_bench or mpirun it says so and prints libhvd's
tables alone; without stream_probe it skips the memory-bandwidth target.

Run it with
  meson test -C build --benchmark -v allreduce
(which runs `allreduce_bench.py --np 2,4 --reps 3 -f 4`), or directly, e.g.
  python3 tests/bench/allreduce_bench.py --build-dir build --reps 3 -f 4
  python3 tests/bench/allreduce_bench.py --build-dir build --reps 1 \\
      -b 8 -e 64M -f 4
  python3 tests/bench/allreduce_bench.py --np 2 --mpi-tcp --reps 5
  python3 tests/bench/allreduce_bench.py --np 2,4 -b 256K -e 4M -f 2 \\
      --policy rotated,reused              # the mid-size target
  python3 tests/bench/allreduce_bench.py --np 64 -b 8 -e 8 --reps 1 \\
      --policy rotated,reused              # many ranks, 8 B
Options: --np LIST (default 2,4; a positional LIST does the same),
--policy LIST (rotated, reused; default rotated), --bind (user, core,
none; default user), --reps (default 3), -b/-e/-f (default 8, 64M, 2), -d, -o,
-n, -w, -I, --small-max/--small-iters/--small-warmup,
--mid-max/--mid-iters/--mid-warmup,
--many-above/--many-max/--many-iters/--many-warmup, --mpi-tcp,
--build-dir.
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
KIB = 1 << 10
MIB = 1 << 20
MEM_SIZE = 64 * MIB        # the size the memory-bandwidth target is read at
MEM_TARGET = 0.5           # hvd algbw >= this x BW / (2n) at MEM_SIZE
RATIO_MIN_SIZE = 1 * MIB   # busbw targets apply at this size and above
MID_RANGE = (256 * KIB, 4 * MIB)  # the mid-size busbw target, inclusive
LAT_SIZE = 8               # the latency line's and many-rank target's size
MANY_TIME_TARGET = 1.5     # many ranks: hvd time <= this x MPI's at 8 B
RUN_TIMEOUT = 900
PREFIX_END = ">:"  # horovodrun prefixes lines with [rank,local]<stdout>:

# Buffer policy -> (options given to every side, what it means).
POLICIES = {
    "rotated": ([], "buffers rotated over 64 MiB (the programs' default)"),
    "reused": (["-R", "0"], "one buffer reused every iteration (-R 0)"),
}


def busbw_target(np_):
    """hvd busbw / MPI busbw wanted at >= 1 MiB and at 256 KiB-4 MiB: 1.3
    at -np 2, else 1.0."""
    return 1.3 if np_ == 2 else 1.0


class BenchError(Exception):
    """A program could not be run, or failed without printing rows."""


def parse_bytes(s):
    """A byte count with an optional K, M or G (binary) suffix."""
    s = s.strip().upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    if mult > 1:
        s = s[:-1]
    return int(s) * mult


def parse_list(s, parse):
    """'a,b' -> [parse(a), parse(b)]; duplicates dropped, order kept."""
    out = []
    for part in str(s).replace(" ", "").split(","):
        if not part:
            continue
        v = parse(part)
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError("empty list")
    return out


def parse_np(s):
    """One rank count, >= 1."""
    n = int(s)
    if n < 1:
        raise ValueError("np must be >= 1")
    return n


def parse_policy(s):
    """One buffer policy name of POLICIES."""
    if s not in POLICIES:
        raise ValueError("unknown policy '%s' (want %s)" %
                         (s, ", ".join(POLICIES)))
    return s


def sizes(minb, maxb, step):
    """The sizes bench_common.c visits, computed the same way."""
    out, b = [], minb
    while b <= maxb:
        out.append(b)
        nb = int(float(b) * step)
        b = nb if nb > b else b + 1
    return out


def human(n):
    """A byte count as the largest binary unit that divides it."""
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
    """Runs argv to its end with a timeout; its CompletedProcess."""
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise BenchError("%s: no exit within %d s" % (label, RUN_TIMEOUT))
    except OSError as e:
        raise BenchError("%s: %s" % (label, e))


def run(argv, label):
    """Runs one band: its rows, comments, skip comments and exit code."""
    r = run_capture(argv, label)
    rows, comments = parse_table(r.stdout)
    if r.returncode != 0 and not rows:
        tail = (r.stderr.strip() or r.stdout.strip())[-2000:]
        raise BenchError("%s exited %d:\n%s" % (label, r.returncode, tail))
    skipped = [c for c in comments if "skipped" in c]
    return rows, comments, skipped, r.returncode


class Plan:
    """The sizes one group visits and the bands (program arguments, one run
    each) that visit them, with the iterations each size runs."""

    def __init__(self):
        self.seq = []
        self.bands = []
        self.iters = {}  # size -> timed iterations

    def add(self, common, band, iters, warmup):
        """Adds one band over the sizes of band (a run of the sequence)."""
        if not band:
            return
        self.bands.append(common + ["-b", str(band[0]), "-e", str(band[-1]),
                                    "-n", str(iters), "-w", str(warmup)])
        self.seq = sorted(set(self.seq) | set(band))
        self.iters.update((s, iters) for s in band)


def full_plan(a, seq, common):
    """Every size: many iterations for the small ones, fewer for the
    mid-size ones, and 64 MiB on its own when the step skips it."""
    p = Plan()
    p.add(common, [s for s in seq if s <= a.small_max], a.small_iters,
          a.small_warmup)
    p.add(common, [s for s in seq if a.small_max < s <= a.mid_max],
          a.mid_iters, a.mid_warmup)
    p.add(common, [s for s in seq if s > max(a.small_max, a.mid_max)],
          a.iters, a.warmup)
    if seq[0] <= MEM_SIZE <= seq[-1] and MEM_SIZE not in seq:
        p.add(common, [MEM_SIZE], a.iters, a.warmup)
    return p


def many_plan(a, seq, common):
    """Many ranks: the sizes <= --many-max only, --many-iters each."""
    p = Plan()
    p.add(common, [s for s in seq if s <= a.many_max], a.many_iters,
          a.many_warmup)
    return p


class Runner:
    """One side (launcher + program) of one group: runs every band of the
    group's plan and collects the rows."""

    def __init__(self, key, group, title, cmd):
        self.key, self.np, self.title, self.cmd = key, group.np, title, cmd
        self.bands = group.plan.bands
        self.label = "%s %s" % (key, group.tag)
        self.samples = {}  # size -> list of rows, one per repetition
        self.skipped = None
        self.failed = None
        self.nonzero = False

    def run_rep(self):
        """One repetition: every band once."""
        if self.skipped or self.failed:
            return
        for args in self.bands:
            try:
                rows, _, skipped, rc = run(self.cmd + args, self.label)
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
        """Whether there are rows to compare."""
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

    def hvd_error(self):
        """Why hvd_bench's results cannot stand, or None."""
        if self.failed or not self.samples:
            return "hvd_bench failed"
        if self.nonzero or any(r["wrong"] not in ("0", "N/A")
                               for r in self.median().values()):
            return "hvd_bench reported wrong elements or failed"
        return None


class Group:
    """Everything run at one rank count under one buffer policy: the plan
    of sizes and bands, and one Runner per side."""

    def __init__(self, np_, policy, many, plan):
        self.np, self.policy, self.many, self.plan = np_, policy, many, plan
        self.tag = "-np %d, %s" % (np_, policy)
        self.runners = {}  # key -> Runner, hvd first

    def add(self, key, title, cmd):
        """Adds the side key, run as cmd + band + the policy's options."""
        self.runners[key] = Runner(key, self, title, cmd)

    def refs(self):
        """The MPI sides that gave rows: (key, median rows), mpi first."""
        return [(k, r.median()) for k, r in self.runners.items()
                if k in ("mpi", "tcp") and r.ok()]


def binding(np_, bind):
    """horovodrun's options (before the command) and mpirun's for --bind:
    "user", each launcher's own default; "core", while the ranks fit the
    CPUs, each rank bound to one CPU on both sides (mpirun --bind-to core;
    taskset by local rank under horovodrun --bind-to none); otherwise no
    binding on either side."""
    if bind == "user":
        return [], []
    if bind == "core" and np_ <= (os.cpu_count() or 1):
        return (["--bind-to", "none", "sh", "-c",
                 'exec taskset -c "$HOROVOD_LOCAL_RANK" "$0" "$@"'],
                ["--bind-to", "core"])
    return ["--bind-to", "none"], ["--bind-to", "none"]


def add_sides(g, tools, base, mpi_tcp, bind):
    """The sides of group g: hvd, then mpi, hvdtcp and tcp where wanted."""
    horovodrun, hvd_bench, mpi_bench = tools
    n = ["-np", str(g.np)]
    wrap, mpi_bind = binding(g.np, bind)
    hvd = n + wrap + [hvd_bench]
    g.add("hvd", "libhvd: hvd_bench under horovodrun",
          [horovodrun] + hvd)
    if not base:
        return
    base = base + mpi_bind
    g.add("mpi", "MPI_Allreduce under mpirun with its defaults (the "
          "target's peer)", base + n + [mpi_bench])
    if not mpi_tcp:
        return
    g.add("hvdtcp", "libhvd over its TCP ring (HOROVOD_SHM_DISABLE=1): "
          "extra column",
          ["env", "HOROVOD_SHM_DISABLE=1", horovodrun] + hvd)
    # pml ob1 makes sure the btl choice is obeyed (UCX would bypass it);
    # lo keeps the traffic on loopback.
    g.add("tcp", "MPI_Allreduce over TCP (mpirun --mca btl tcp,self): "
          "extra column",
          base + n + ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                      "--mca", "btl_tcp_if_include", "lo", mpi_bench])


class StreamProbe:
    """stream_probe -n 1,N...: best GB/s per (kernel, workers) over reps."""

    def __init__(self, cmd):
        self.cmd = cmd
        self.best = {}  # (kernel, workers) -> GB/s
        self.header = []
        self.failed = None

    def run_rep(self):
        """One run of the probe; keeps the best figure of each row."""
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
        """Best GB/s of kernel with this many workers, or None."""
        return self.best.get((kernel, workers))

    def print(self, reps):
        """The probe's table."""
        print("#")
        print("# memory bandwidth: %s" % " ".join(self.cmd))
        if self.failed:
            print("# FAILED: %s" % self.failed.replace("\n", "\n#   "))
            return
        for h in self.header:
            print(h)
        print("# %8s  %7s  %12s  (best over %d runs)" %
              ("kernel", "workers", "GB/s", reps))
        for (k, w), gbs in sorted(self.best.items(),
                                  key=lambda x: (x[0][1], x[0][0])):
            print("%10s  %7d  %12.3f" % (k, w, gbs))


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


def print_table(g, runner, reps):
    """One side's nccl-tests table of medians."""
    print("#")
    print("# %s: %s" % (g.tag, runner.title))
    print("# buffers: %s" % POLICIES[g.policy][1])
    print("# $ %s [band options]" % " ".join(runner.cmd +
                                             POLICIES[g.policy][0]))
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
    """a / b, NaN when b is 0."""
    return a / b if b else float("nan")


def verdict(ok):
    """The words of a target line."""
    return "target met" if ok else "target NOT met"


def in_busbw_target(size):
    """Whether a busbw target (>= 1 MiB, or the mid-size one) covers size."""
    return size >= RATIO_MIN_SIZE or MID_RANGE[0] <= size <= MID_RANGE[1]


def print_ratio_table(g, hm, refs, field, better):
    """Per size, hvd's figure of field beside each MPI side's and the ratio
    hvd/side; the last column says whether mpi's ratio meets the target
    that covers the size, where one does (better(size, q) -> bool, or None
    when no target covers size)."""
    head = "# %10s  %9s" % ("size (B)", "hvd " + field)
    for key, _ in refs:
        head += "  %11s  %9s" % ("%s %s" % (key, field), "hvd/%s" % key)
    print(head + ("  target" if refs and refs[0][0] == "mpi" else ""))
    fmt = "%.2f" if field == "time" else "%.3f"
    for size in g.plan.seq:
        if size not in hm:
            continue
        line = "%12d  %9s" % (size, fmt % hm[size][field])
        q_mpi = None
        for key, med in refs:
            m = med.get(size)
            if m is None:
                line += "  %11s  %9s" % ("-", "-")
                continue
            q = ratio(hm[size][field], m[field])
            line += "  %11s  %9.2f" % (fmt % m[field], q)
            if key == "mpi":
                q_mpi = q
        ok = better(size, q_mpi) if q_mpi is not None else None
        if ok is not None:
            line += "  %s" % ("met" if ok else "NOT met")
        print(line)


def busbw_range_target(g, hm, mm, lo, hi):
    """The target line: hvd busbw >= busbw_target x MPI's at every size of
    lo..hi (hi None: no upper bound)."""
    want = busbw_target(g.np)
    where = "sizes >= %s" % human(lo) if hi is None else \
        "sizes %s to %s" % (human(lo), human(hi))
    name = "%s: hvd busbw >= %.1fx MPI (mpirun defaults) at %s" % (
        g.tag, want, where)
    if mm is None:
        return "# %s: not measured (%s)" % (
            name, "MPI failed" if "mpi" in g.runners else "no MPI")
    band = [s for s in g.plan.seq if s >= lo and (hi is None or s <= hi)
            and s in hm and s in mm]
    if not band:
        return "# %s: not measured (no %s run)" % (name, where)
    qs = [(s, ratio(hm[s]["busbw"], mm[s]["busbw"])) for s in band]
    low = min(qs, key=lambda x: x[1])
    slow = [s for s, q in qs if not q >= want]
    text = "# %s: %s (lowest %.2f at %s" % (
        name, verdict(not slow), low[1], human(low[0]))
    if slow:
        text += "; below at %d of %d sizes" % (len(slow), len(band))
    return text + ")"


def print_latency(g, hm, refs):
    """The time at 8 B (or the smallest size) of every side."""
    lat = LAT_SIZE if LAT_SIZE in hm else min(hm)
    line = "# %s: time at %s (median, %d iters): hvd %.2f us" % (
        g.tag, human(lat), g.plan.iters[lat], hm[lat]["time"])
    for key, med in refs:
        m = med.get(lat)
        if m:
            line += ", %s %.2f us (hvd/%s %.2f)" % (
                key, m["time"], key, ratio(hm[lat]["time"], m["time"]))
    print("#")
    print(line)
    ht = g.runners.get("hvdtcp")
    tm = dict(refs).get("tcp", {}).get(lat)
    if ht is not None and ht.ok() and tm and lat in ht.median():
        t = ht.median()[lat]["time"]
        print("# %s: time at %s over TCP: hvd %.2f us, MPI %.2f us "
              "(hvd/tcp %.2f)" % (g.tag, human(lat), t, tm["time"],
                                  ratio(t, tm["time"])))


def memory_target(g, hm, refs, probe):
    """Prints the memory-bandwidth figures; returns the target line."""
    name = "%s: hvd algbw at %s >= %.1f x BW/(2n)" % (
        g.tag, human(MEM_SIZE), MEM_TARGET)
    np_ = g.np
    bw = probe.get("copy", np_) if probe else None
    if bw is None:
        why = probe.failed if probe and probe.failed else "no stream_probe"
        return "# %s: not measured (%s)" % (name, why.split("\n")[0])
    msize = MEM_SIZE if MEM_SIZE in hm else max(hm)
    one, mc = probe.get("copy", 1), probe.get("memcpy", np_)
    bound = bw / (2.0 * np_)
    q = hm[msize]["algbw"] / bound
    print("#")
    print("# %s: memory bandwidth BW = %.2f GB/s, STREAM copy by %d "
          "processes at once (aggregate, best of reps); 1 process %s; "
          "memcpy by %d %s" %
          (g.tag, bw, np_, "%.2f" % one if one else "-", np_,
           "%.2f" % mc if mc else "-"))
    print("# %s: BW/(2n) = %.3f GB/s, the algbw ceiling of a "
          "shared-memory allreduce (2n x size bytes of traffic)" %
          (g.tag, bound))
    line = "# %s: algbw at %s: hvd %.3f GB/s = %.2f x BW/(2n)" % (
        g.tag, human(msize), hm[msize]["algbw"], q)
    for key, med in refs:
        m = med.get(msize)
        if m:
            line += ", %s %.3f GB/s = %.2f" % (key, m["algbw"],
                                               m["algbw"] / bound)
    if mc:
        line += " (against memcpy's BW: hvd %.2f)" % (
            hm[msize]["algbw"] / (mc / (2.0 * np_)))
    print(line)
    if msize != MEM_SIZE:
        return "# %s: not measured (%s not run; largest size %s: %.2f)" % (
            name, human(MEM_SIZE), human(msize), q)
    return "# %s: %s (%.2f)" % (name, verdict(q >= MEM_TARGET), q)


def report_full(g, hm, refs, probe):
    """Busbw ratios, latency, memory bandwidth and targets of a group with
    no more ranks than --many-above. Returns the target lines."""
    want = busbw_target(g.np)
    print("#")
    print("# %s: busbw ratio per size, hvd / mpi (mpirun defaults); > 1: "
          "libhvd faster; target >= %.1f at sizes %s to %s and >= %s" %
          (g.tag, want, human(MID_RANGE[0]), human(MID_RANGE[1]),
           human(RATIO_MIN_SIZE)))
    print_ratio_table(g, hm, refs, "busbw",
                      lambda s, q: q >= want if in_busbw_target(s) else None)
    print_latency(g, hm, refs)
    mm = dict(refs).get("mpi")
    return [busbw_range_target(g, hm, mm, RATIO_MIN_SIZE, None),
            busbw_range_target(g, hm, mm, MID_RANGE[0], MID_RANGE[1]),
            memory_target(g, hm, refs, probe)]


def many_time_target(g, hm, mm):
    """The many-rank target line: hvd's time at 8 B <= 1.5 x MPI's."""
    name = "%s: hvd time at %s <= %.1fx MPI's (mpirun defaults)" % (
        g.tag, human(LAT_SIZE), MANY_TIME_TARGET)
    if mm is None:
        return "# %s: not measured (%s)" % (
            name, "MPI failed" if "mpi" in g.runners else "no MPI")
    if LAT_SIZE not in hm or LAT_SIZE not in mm:
        return "# %s: not measured (%s not run)" % (name, human(LAT_SIZE))
    t, m = hm[LAT_SIZE]["time"], mm[LAT_SIZE]["time"]
    q = ratio(t, m)
    return "# %s: %s (%.2f: hvd %.2f us, mpi %.2f us)" % (
        name, verdict(q <= MANY_TIME_TARGET), q, t, m)


def report_many(g, hm, refs, a):
    """Time ratios and the 8-byte target of a group with more ranks than
    --many-above. Returns the target lines."""
    print("#")
    print("# %s: more ranks than --many-above (%d): sizes <= %s only, %d "
          "iters; time (us) ratio per size, hvd / mpi (mpirun defaults); < 1: "
          "libhvd faster; target <= %.1f at %s" %
          (g.tag, a.many_above, human(a.many_max), a.many_iters,
           MANY_TIME_TARGET, human(LAT_SIZE)))
    print_ratio_table(g, hm, refs, "time",
                      lambda s, q: q <= MANY_TIME_TARGET
                      if s == LAT_SIZE else None)
    return [many_time_target(g, hm, dict(refs).get("mpi")),
            "# %s: hvd algbw at %s >= %.1f x BW/(2n): skipped (more ranks "
            "than --many-above %d: no sizes above %s, no stream_probe)" %
            (g.tag, human(MEM_SIZE), MEM_TARGET, a.many_above,
             human(a.many_max))]


def report_group(g, probe, a):
    """Prints one group's comparison; returns its target lines."""
    hvd = g.runners["hvd"]
    if not hvd.ok():
        line = "# %s: hvd_bench gave no rows: no comparison" % g.tag
        print("#")
        print(line)
        return [line]
    hm, refs = hvd.median(), g.refs()
    lines = report_many(g, hm, refs, a) if g.many else \
        report_full(g, hm, refs, probe)
    print("#")
    for t in lines:
        print(t)
    return lines


def parse_args():
    """The options, checked, with byte counts and lists parsed."""
    ap = argparse.ArgumentParser(
        description="libhvd allreduce against MPI_Allreduce (mpirun "
                    "defaults) and against this host's memory bandwidth.")
    ap.add_argument("np", nargs="?", default=None, metavar="LIST",
                    help="same as --np")
    ap.add_argument("--np", dest="np_opt", default=None, metavar="LIST",
                    help="rank counts, comma-separated (default 2,4, or "
                         "HVD_BENCH_NP)")
    ap.add_argument("--policy", default="rotated", metavar="LIST",
                    help="buffer policies, comma-separated: rotated (the "
                         "programs' default) and/or reused (-R 0); default "
                         "rotated")
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
    ap.add_argument("--mid-max", default="4M",
                    help="largest size above --small-max run with "
                    "--mid-iters (default 4M)")
    ap.add_argument("--mid-iters", type=int, default=200)
    ap.add_argument("--mid-warmup", type=int, default=20)
    ap.add_argument("--many-above", type=int,
                    default=max(os.cpu_count() or 1, 4),
                    help="rank counts above this are 'many ranks': sizes "
                         "<= --many-max only, time ratios (default: the "
                         "CPU count, at least 4)")
    ap.add_argument("--many-max", default="4K",
                    help="largest size run with many ranks (default 4K)")
    ap.add_argument("--many-iters", type=int, default=200)
    ap.add_argument("--many-warmup", type=int, default=20)
    ap.add_argument("--reps", type=int,
                    default=int(os.environ.get("HVD_BENCH_REPS", "3")),
                    help="repetitions; tables show the median (default 3)")
    ap.add_argument("--bind", choices=("user", "core", "none"),
                    default="user",
                    help="user (default): each launcher's own default, as "
                    "users run them; core: while the ranks fit the CPUs, "
                    "one CPU per rank on both sides; none: no binding")
    ap.add_argument("--mpi-tcp", action="store_true",
                    help="also run MPI over --mca btl tcp,self (loopback) "
                         "as an extra column")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    try:
        a.nps = parse_list(a.np_opt or a.np or
                           os.environ.get("HVD_BENCH_NP", "2,4"), parse_np)
    except ValueError as e:
        ap.error("--np: %s" % e)
    try:
        a.policies = parse_list(a.policy, parse_policy)
    except ValueError as e:
        ap.error("--policy: %s" % e)
    try:
        a.minb, a.maxb = parse_bytes(a.minbytes), parse_bytes(a.maxbytes)
        a.small_max = parse_bytes(a.small_max)
        a.mid_max = parse_bytes(a.mid_max)
        a.many_max = parse_bytes(a.many_max)
    except ValueError as e:
        ap.error("bad byte count: %s" % e)
    if a.minb > a.maxb or a.stepfactor <= 1 or a.reps < 1:
        ap.error("need minbytes <= maxbytes, stepfactor > 1, reps >= 1")
    return a


def tool_paths(a):
    """horovodrun, hvd_bench, mpi_bench, stream_probe and mpirun."""
    bd = a.build_dir
    bench = os.path.join(bd, "tests", "bench")
    return (os.environ.get("HVD_HOROVODRUN",
                           os.path.join(bd, "launcher", "horovodrun")),
            os.environ.get("HVD_BENCH", os.path.join(bench, "hvd_bench")),
            os.environ.get("MPI_BENCH", os.path.join(bench, "mpi_bench")),
            os.environ.get("HVD_STREAM_PROBE",
                           os.path.join(bench, "stream_probe")),
            os.environ.get("HVD_MPIRUN") or shutil.which("mpirun"))


def mpirun_base(mpirun, mpi_bench):
    """mpirun and the options every MPI run gets, or [] without MPI.
    --oversubscribe always: Open MPI 4.1 refuses more ranks than slots
    (cores, not hardware threads) without it, and it changes nothing,
    binding included, when the ranks fit."""
    if not (mpirun and os.access(mpirun, os.X_OK) and
            os.access(mpi_bench, os.X_OK)):
        return []
    base = [mpirun, "--oversubscribe"]
    if os.geteuid() == 0:
        base.append("--allow-run-as-root")
    return base


def make_groups(a, tools, base):
    """One Group per (rank count, policy), its plan and sides set up."""
    seq = sizes(a.minb, a.maxb, a.stepfactor)
    common = ["-d", a.dtype, "-o", a.op, "-f", repr(a.stepfactor),
              "-I", str(a.inplace)]
    groups = []
    for np_ in a.nps:
        many = np_ > a.many_above
        for policy in a.policies:
            opts = common + POLICIES[policy][0]
            plan = many_plan(a, seq, opts) if many else \
                full_plan(a, seq, opts)
            g = Group(np_, policy, many, plan)
            add_sides(g, tools, base, a.mpi_tcp, a.bind)
            groups.append(g)
    return groups


def print_header(a, groups, base, mpi_bench, probe, stream):
    """What runs, the load, and what mpirun's defaults pick here."""
    full = [g for g in groups if not g.many]
    many = sorted(set(g.np for g in groups if g.many))
    stepped = set(sizes(a.minb, a.maxb, a.stepfactor))
    added = any(set(g.plan.seq) - stepped for g in full)
    print("# allreduce_bench: np %s, policies %s, %s %s, %s, %s to %s, "
          "x%g%s, %d repetitions, %d iters (sizes <= %s: %d, <= %s: %d)" %
          (",".join(map(str, a.nps)), ",".join(a.policies), a.dtype, a.op,
           "in place" if a.inplace else "out of place",
           human(a.minb), human(a.maxb), a.stepfactor,
           " (+64 MiB)" if added else "",
           a.reps, a.iters, human(a.small_max), a.small_iters,
           human(a.mid_max), a.mid_iters))
    for p in a.policies:
        print("# policy %s: %s" % (p, POLICIES[p][1]))
    if many:
        print("# many ranks (np %s > --many-above %d): sizes <= %s, %d "
              "iters, %d warmup; no stream_probe" %
              (",".join(map(str, many)), a.many_above, human(a.many_max),
               a.many_iters, a.many_warmup))
    print("# %s" % load_line())
    if base:
        tr = mpi_default_transport(base, mpi_bench)
        print("# mpirun defaults here: %s" % (tr or "could not tell"))
    else:
        print("# mpi_bench or mpirun not found: libhvd's tables only")
    if probe is None and full:
        print("# %s not found: no memory-bandwidth figure" % stream)
    sys.stdout.flush()


def main():
    """Runs every group and the probe, prints the tables and targets."""
    a = parse_args()
    horovodrun, hvd_bench, mpi_bench, stream, mpirun = tool_paths(a)
    for p in (horovodrun, hvd_bench):
        if not os.access(p, os.X_OK):
            print("allreduce_bench: %s not found; build first or set "
                  "HVD_HOROVODRUN / HVD_BENCH" % p, file=sys.stderr)
            return 1
    base = mpirun_base(mpirun, mpi_bench)
    groups = make_groups(a, (horovodrun, hvd_bench, mpi_bench), base)
    # Groups without sizes (many ranks, -b above --many-max) run nothing.
    jobs = [r.run_rep for g in groups if g.plan.bands
            for r in g.runners.values()]
    probe = None
    full_nps = sorted(set(g.np for g in groups if not g.many))
    if full_nps and os.access(stream, os.X_OK):
        probe = StreamProbe([stream, "-n", ",".join(
            map(str, sorted(set([1] + full_nps))))])
        jobs.append(probe.run_rep)
    print_header(a, groups, base, mpi_bench, probe, stream)

    for rep in range(a.reps):
        # Rotate the order so no program always runs right after another.
        for i in range(len(jobs)):
            jobs[(rep + i) % len(jobs)]()
    if probe:
        probe.print(a.reps)

    status = 0
    summary = []
    for g in groups:
        if not g.plan.bands:
            line = "# %s: no sizes <= --many-max %s: nothing run" % (
                g.tag, human(a.many_max))
            print("#")
            print(line)
            summary.append(line)
            continue
        for r in g.runners.values():
            print_table(g, r, a.reps)
        err = g.runners["hvd"].hvd_error()
        if err:
            print("# %s: %s" % (g.tag, err), file=sys.stderr)
            status = 1
        summary += report_group(g, probe, a)

    print("#")
    print("# summary")
    for t in summary:
        print(t)
    return status


if __name__ == "__main__":
    sys.exit(main())
