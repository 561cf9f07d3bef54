#!/usr/bin/env python3
"""Benchmark (figures, not a test): allreduce latency across many hosts.

What: the time of one allreduce (float32 sum, out of place) of 8 B and of
1 MiB among H hosts of one rank each, for every H of --hosts (default
2,4,8,16), with libhvd (hvd_bench) against Open MPI's MPI_Allreduce over
TCP (mpi_bench), and how each grows with the host count.

How the "hosts" are made on one machine:

  hvd   hvd_bench under `horovodrun -np H`, each rank setting its own
        HOROVOD_HOSTNAME=bench-host<rank> before exec:
          horovodrun -np H sh -c \\
            'HOROVOD_HOSTNAME=bench-host$HOROVOD_RANK exec "$0" "$@"' \\
            hvd_bench ...
        libhvd decides its topology from the ranks' host names, so every
        rank is a host of its own and libhvd runs its TCP ring of H ranks
        over loopback (no shared memory). An 8 B allreduce is gathered
        whole around the ring (from 4 ranks by Bruck's ceil(log2 H)
        steps), 1 MiB is reduce-scattered and allgathered (2(H-1) steps).
        hvd_bench sets HOROVOD_CYCLE_TIME=0 by default; this script sets
        it too. Each run has HOROVOD_LOG_LEVEL=debug, only so that rank 0
        says which transport it chose; the tables list it, and a
        transport other than the TCP ring is flagged as odd.
  mpi   mpi_bench under `mpirun -np H --oversubscribe --bind-to none
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo`:
        MPI over loopback TCP between H processes of this host, the same
        network path as H loopback hosts (ob1 makes sure the btl choice is
        obeyed; lo keeps the traffic on loopback; no binding on either
        side, as horovodrun binds nothing; --oversubscribe because Open
        MPI 4.1 refuses more ranks than cores without it).
  ssh   (only with --ssh) hvd_bench under horovodrun over H real OpenSSH
        servers on 127.0.0.2 ... 127.0.0.(H+1), one slot each
        (tests/lib/sshfix.py's SshCluster, started once for the largest
        H; horovodrun -H 127.0.0.2:1,... -p PORT -i KEY): the full
        multi-host path, launcher and agents included. An extra column;
        optional, since starting the sshd instances costs seconds.

Both programs take the same options and print nccl-tests tables (size,
count, type, redop, time, algbw, busbw, #wrong); rank 0's table is parsed
(horovodrun prefixes its lines with "[0,0]<stdout>:", mpirun adds none).
Both sides run with -R 0 (tests/bench/bench_common.c: rotate buffers over
0 bytes, i.e. one send and one receive buffer reused every iteration, as
nccl-tests and OSU take latency figures), so the figures are network and
protocol latency, not memory traffic; at 16 ranks the default rotation
over 64 MiB per rank would also need 1 GiB.

Repetitions: --reps N (default 3). Within each repetition, for every H
and size, the sides run back to back (hvd, mpi, ssh, the order rotating
from one repetition to the next) so that all see the same load. The
tables give per-size medians over the repetitions, one table per size:

  hosts, hvd time (us), mpi time (us), hvd/mpi (< 1: libhvd faster),
  hvd growth and mpi growth = time(H) / time(2) (or the smallest H run),
  and with --ssh: ssh time, ssh/mpi, ssh growth.

Caveat: every rank runs on this machine; on two cores 4, 8 and 16 ranks
are oversubscribed, time-sliced many to a core, so absolute times mostly
measure the scheduler. Read the ratio and the growth, not the absolute
figures.

This prints figures; it never fails on them. It exits 0 unless hvd_bench
fails or reports wrong elements. A side that fails at a host count is not
run there again: its cells say n/a and the notes under the tables give the
error (its last lines of output). Without mpi_bench or mpirun it says so
and prints libhvd's columns alone; with --ssh but no sshd it says so and
leaves the ssh columns out.

Options:
  --hosts LIST      host counts, comma-separated (default 2,4,8,16)
  --reps N          repetitions; tables show medians (default 3)
  -n/-w N           timed/warm-up iterations at 1 MiB (default 50/5)
  --small-iters N, --small-warmup N
                    timed/warm-up iterations at 8 B (default 200/20)
  --build-dir DIR   where horovodrun, hvd_bench and mpi_bench were built
                    (default ROOT/build)
  --ssh             also run over real loopback SSH hosts (needs
                    /usr/sbin/sshd)
Environment: HVD_HOROVODRUN, HVD_BENCH, MPI_BENCH, HVD_MPIRUN (defaults:
the binaries under --build-dir, and mpirun on PATH), as meson sets them.

Examples:
  meson test -C build --benchmark -v hosts
  python3 tests/bench/hosts_bench.py --build-dir build
  python3 tests/bench/hosts_bench.py --build-dir build --hosts 2,4 --reps 1
  PYTHONPATH=tests/lib python3 tests/bench/hosts_bench.py --hosts 2,4 --ssh \\
      --reps 3
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
SMALL, LARGE = 8, 1 * MIB
RUN_TIMEOUT = 300
PREFIX = "[0,0]<stdout>:"
TRANSPORT_TAG = "[0,0]<stderr>:hvd: debug: rank 0: transport: "
# Every side's program options besides sizes and iterations: float32 sum,
# out of place, one buffer reused (-R 0).
COMMON = ["-d", "float32", "-o", "sum", "-I", "0", "-R", "0"]
# Each rank its own host: libhvd's topology comes from HOROVOD_HOSTNAME.
ONE_HOST_PER_RANK = ["sh", "-c",
                     'HOROVOD_HOSTNAME=bench-host$HOROVOD_RANK '
                     'exec "$0" "$@"']
MPI_TCP = ["--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl",
           "tcp,self", "--mca", "btl_tcp_if_include", "lo"]


def human(n):
    """A byte count as the largest binary unit that divides it."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def parse_hosts(s):
    """'2,4,8' -> [2, 4, 8], sorted, duplicates dropped; each >= 2."""
    out = sorted(set(int(p) for p in s.replace(" ", "").split(",") if p))
    if not out or out[0] < 2:
        raise ValueError("want host counts >= 2")
    return out


def parse_rows(text, prefixed):
    """Rank 0's table: {size: (time_us, wrong)}. With prefixed, only the
    lines horovodrun tags as rank 0's stdout count."""
    rows = {}
    for line in text.splitlines():
        if prefixed:
            if not line.startswith(PREFIX):
                continue
            line = line[len(PREFIX):]
        f = line.split()
        if len(f) != 8 or not f[0].isdigit():
            continue
        try:
            rows[int(f[0])] = (float(f[4]), f[7])
        except ValueError:
            continue
    return rows


def transport(text):
    """The transport rank 0 of libhvd reported, or None."""
    for line in text.splitlines():
        if line.startswith(TRANSPORT_TAG):
            return line[len(TRANSPORT_TAG):].strip()
    return None


class Side:
    """One launcher + program: its command per host count, and its
    samples {(hosts, size): [time_us, ...]}."""

    def __init__(self, key, prefixed, env, make_cmd):
        self.key, self.prefixed, self.env = key, prefixed, env
        self.make_cmd = make_cmd  # hosts -> argv before the options
        self.samples = {}
        self.errors = {}      # hosts -> first failure message
        self.wrong = False    # some row had wrong elements
        self.transports = {}  # hosts -> set of transports rank 0 named

    def run(self, hosts, size, iters, warmup):
        """One run at one size; records its time or its failure."""
        if hosts in self.errors:
            return
        argv = self.make_cmd(hosts) + COMMON + [
            "-b", str(size), "-e", str(size), "-n", str(iters),
            "-w", str(warmup)]
        label = "%s -np %d, %s" % (self.key, hosts, human(size))
        try:
            p = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.errors[hosts] = "%s: no exit within %d s" % (label,
                                                              RUN_TIMEOUT)
            return
        except OSError as e:
            self.errors[hosts] = "%s: %s" % (label, e)
            return
        rows = parse_rows(p.stdout, self.prefixed)
        tp = transport(p.stdout + "\n" + p.stderr)
        if tp:
            self.transports.setdefault(hosts, set()).add(tp)
        if p.returncode != 0 or size not in rows:
            tail = (p.stderr.strip() or p.stdout.strip())[-1500:]
            self.errors[hosts] = "%s exited %d%s:\n%s" % (
                label, p.returncode, "" if size in rows else ", no row",
                tail)
            return
        t, wrong = rows[size]
        if wrong not in ("0", "N/A"):
            self.wrong = True
            self.errors[hosts] = "%s: %s wrong elements" % (label, wrong)
            return
        self.samples.setdefault((hosts, size), []).append(t)

    def median(self, hosts, size):
        """The median time over the repetitions, or None."""
        s = self.samples.get((hosts, size))
        return statistics.median(s) if s else None


def parse_args():
    """The options, checked."""
    ap = argparse.ArgumentParser(
        description="libhvd allreduce latency across H loopback hosts of "
                    "one rank each, against Open MPI over TCP.")
    ap.add_argument("--hosts", default="2,4,8,16", metavar="LIST",
                    help="host counts, comma-separated (default 2,4,8,16)")
    ap.add_argument("--reps", type=int, default=3,
                    help="repetitions; tables show medians (default 3)")
    ap.add_argument("-n", "--iters", type=int, default=50,
                    help="timed iterations at 1 MiB (default 50)")
    ap.add_argument("-w", "--warmup", type=int, default=5,
                    help="warm-up iterations at 1 MiB (default 5)")
    ap.add_argument("--small-iters", type=int, default=200,
                    help="timed iterations at 8 B (default 200)")
    ap.add_argument("--small-warmup", type=int, default=20,
                    help="warm-up iterations at 8 B (default 20)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ssh", action="store_true",
                    help="also run over real loopback SSH hosts "
                         "(tests/lib/sshfix.py; needs sshd)")
    a = ap.parse_args()
    try:
        a.host_counts = parse_hosts(a.hosts)
    except ValueError as e:
        ap.error("--hosts: %s" % e)
    if a.reps < 1 or min(a.iters, a.small_iters) < 1 or \
            min(a.warmup, a.small_warmup) < 0:
        ap.error("need reps >= 1, iterations >= 1, warm-up >= 0")
    return a


def tool_paths(a):
    """horovodrun, hvd_bench, mpi_bench and mpirun."""
    bench = os.path.join(a.build_dir, "tests", "bench")
    return (os.environ.get("HVD_HOROVODRUN",
                           os.path.join(a.build_dir, "launcher",
                                        "horovodrun")),
            os.environ.get("HVD_BENCH", os.path.join(bench, "hvd_bench")),
            os.environ.get("MPI_BENCH", os.path.join(bench, "mpi_bench")),
            os.environ.get("HVD_MPIRUN") or shutil.which("mpirun"))


def hvd_env(base=None):
    """The environment of an hvd run: no batching wait, and rank 0 names
    its transport."""
    env = dict(os.environ if base is None else base)
    env["HOROVOD_CYCLE_TIME"] = "0"
    env["HOROVOD_LOG_LEVEL"] = "debug"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def mpi_version(mpirun):
    """'Open MPI 4.1.4' or the like, or '?'."""
    try:
        p = subprocess.run([mpirun, "--version"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    first = p.stdout.strip().splitlines()[:1]
    return first[0] if first else "?"


def load_line():
    """The CPU count and load average, for the header."""
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        load = "?"
    return "%d CPUs, load average %s" % (os.cpu_count() or 0, load)


def fmt(v, spec, width):
    """v formatted, or n/a right-aligned in width."""
    return (spec % v) if v is not None else "%*s" % (width, "n/a")


def quot(a, b):
    """a / b, or None when either is missing or b is 0."""
    return a / b if a is not None and b else None


def print_table(size, iters, warmup, sides, a):
    """One size's table: time per side per host count, hvd/mpi, growth."""
    base_h = a.host_counts[0]
    hvd, mpi, ssh = sides.get("hvd"), sides.get("mpi"), sides.get("ssh")
    print("#")
    print("# allreduce %s (%d float32, sum), %d iters + %d warm-up, -R 0 "
          "on every side; time (us): median of %d reps; hvd/mpi < 1: "
          "libhvd faster; growth = time(H) / time(%d)" %
          (human(size), size // 4, iters, warmup, a.reps, base_h))
    cols = ["%6s" % "hosts", "%11s" % "hvd (us)", "%11s" % "mpi (us)",
            "%8s" % "hvd/mpi", "%10s" % "hvd growth", "%10s" % "mpi growth"]
    if ssh:
        cols += ["%11s" % "ssh (us)", "%8s" % "ssh/mpi", "%10s" % "ssh growth"]
    print("# " + " ".join(cols)[1:])
    for h in a.host_counts:
        ht = hvd.median(h, size)
        mt = mpi.median(h, size) if mpi else None
        hb = hvd.median(base_h, size)
        mb = mpi.median(base_h, size) if mpi else None
        f = ["%6d" % h, fmt(ht, "%11.2f", 11), fmt(mt, "%11.2f", 11),
             fmt(quot(ht, mt), "%8.2f", 8), fmt(quot(ht, hb), "%10.2f", 10),
             fmt(quot(mt, mb), "%10.2f", 10)]
        if ssh:
            st, sb = ssh.median(h, size), ssh.median(base_h, size)
            f += [fmt(st, "%11.2f", 11), fmt(quot(st, mt), "%8.2f", 8),
                  fmt(quot(st, sb), "%10.2f", 10)]
        print(" " + " ".join(f))


def print_notes(sides, a):
    """Transports rank 0 named, failures, and anything odd."""
    print("#")
    for key in ("hvd", "ssh"):
        side = sides.get(key)
        if side is None:
            continue
        for h in a.host_counts:
            tps = sorted(side.transports.get(h, ()))
            odd = key == "hvd" and tps and \
                any(not t.startswith("TCP ring") for t in tps)
            print("# %s -np %d: libhvd transport: %s%s" % (
                key, h, ", ".join(tps) or "not reported",
                "  (odd: expected the TCP ring)" if odd else ""))
    for key, side in sides.items():
        for h in sorted(side.errors):
            print("# %s -np %d FAILED: %s" % (
                key, h, side.errors[h].replace("\n", "\n#   ")))


def start_ssh(a, horovodrun, hvd_bench, stack):
    """The ssh side over one SshCluster of the largest host count, or
    None (with the reason printed)."""
    try:
        import sshfix
    except ImportError as e:
        print("# --ssh: cannot import sshfix (%s; run with "
              "PYTHONPATH=tests/lib): no ssh columns" % e)
        return None
    t0 = time.monotonic()
    try:
        c = sshfix.SshCluster(a.host_counts[-1])
        c.start()
    except (RuntimeError, OSError) as e:
        print("# --ssh: no loopback SSH hosts (%s): no ssh columns" % e)
        return None
    stack.append(c)
    print("# ssh: %d sshd on %s..%s port %d, started in %.1f s" % (
        len(c.hosts), c.hosts[0], c.hosts[-1], c.port,
        time.monotonic() - t0))

    def cmd(h):
        return [horovodrun, "-np", str(h), "-H",
                c.hosts_arg(1, hosts=c.hosts[:h]), "-p", str(c.port),
                "-i", c.key, hvd_bench]
    return Side("ssh", True, hvd_env(c.env()), cmd)


def main():
    """Runs every side at every host count and size, prints the tables."""
    a = parse_args()
    horovodrun, hvd_bench, mpi_bench, mpirun = tool_paths(a)
    for p in (horovodrun, hvd_bench):
        if not os.access(p, os.X_OK):
            print("hosts_bench: %s not found; build first or set "
                  "HVD_HOROVODRUN / HVD_BENCH" % p, file=sys.stderr)
            return 1
    t_start = time.monotonic()
    sides = {"hvd": Side("hvd", True, hvd_env(),
                         lambda h: [horovodrun, "-np", str(h)] +
                         ONE_HOST_PER_RANK + [hvd_bench])}
    have_mpi = bool(mpirun and os.access(mpirun, os.X_OK) and
                    os.access(mpi_bench, os.X_OK))
    print("# hosts_bench: allreduce float32 sum, out of place, %s and %s, "
          "hosts %s, %d reps, -R 0 (one send and one receive buffer reused "
          "every iteration) on every side" %
          (human(SMALL), human(LARGE),
           ",".join(map(str, a.host_counts)), a.reps))
    print("# hvd: horovodrun -np H, rank r with HOROVOD_HOSTNAME=bench-host"
          "r (one host per rank): libhvd's TCP ring over loopback, "
          "HOROVOD_CYCLE_TIME=0")
    if have_mpi:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        mpi_base = [mpirun, "--oversubscribe"] + root + MPI_TCP
        sides["mpi"] = Side("mpi", False, dict(os.environ),
                            lambda h: mpi_base + ["-np", str(h), mpi_bench])
        print("# mpi: mpirun -np H --oversubscribe %s (%s): MPI over "
              "loopback TCP" % (" ".join(MPI_TCP), mpi_version(mpirun)))
    else:
        print("# mpi_bench or mpirun not found: libhvd's columns only")
    print("# %s; ranks beyond the CPU count are time-sliced: read the "
          "ratios and growth, not absolute times" % load_line())
    sys.stdout.flush()

    clusters = []
    try:
        if a.ssh:
            s = start_ssh(a, horovodrun, hvd_bench, clusters)
            if s:
                sides["ssh"] = s
            sys.stdout.flush()
        order = list(sides.values())
        bands = [(SMALL, a.small_iters, a.small_warmup),
                 (LARGE, a.iters, a.warmup)]
        for rep in range(a.reps):
            for h in a.host_counts:
                for size, iters, warmup in bands:
                    # Back to back, the first side rotating per rep.
                    for i in range(len(order)):
                        order[(rep + i) % len(order)].run(h, size, iters,
                                                          warmup)
    finally:
        for c in clusters:
            c.stop()

    for size, iters, warmup in bands:
        print_table(size, iters, warmup, sides, a)
    print_notes(sides, a)
    print("# wall time: %.0f s" % (time.monotonic() - t_start))
    bad = sides["hvd"].wrong or sides["hvd"].errors or \
        ("ssh" in sides and sides["ssh"].wrong)
    if bad:
        print("hosts_bench: hvd_bench failed or reported wrong elements",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
