#!/usr/bin/env python3
"""Benchmark (figures, not a test): launching a job over many hosts.

H hosts of R ranks each (--hosts, default 16,32,64,128; --ranks, default
4) made of network namespaces (tests/lib/nscluster.py: an address on a
bridge with no route out, a host name, a real sshd each) and a "launcher"
host that starts the job. Each rank (tests/bench/manyhosts_rank.c) inits,
runs one 8 B allreduce, then 20 more (warm-up) and --iters (200) timed
ones of the same buffers, checks the sums, shuts down, and prints
CLOCK_REALTIME when init returned and when the first allreduce completed,
and its mean microseconds per timed allreduce. From the start time (taken
just before the launcher is exec'ed) the first table gives: all init and
first allreduce (the latest rank's; every rank prints), whole job (the
launcher's exit, after the ranks' 20 + --iters small allreduces: --iters
0 leaves them out), the launcher's CPU (user + system) and peak RSS with the
children it reaped (mpirun's and Horovod's ssh clients; our horovodrun
speaks SSH itself; os.wait4 on the nsenter child, which exec's the
launcher), and eth0 bytes out/in of the launcher host's own namespace
(/proc/net/dev before and after: its traffic alone). The second table
gives the 8 B allreduce latency: the largest over the ranks of their mean
per timed allreduce, and ours over the others. Each run's line adds how
busy this machine was (/proc/stat) and the packets its backlog dropped
(/proc/net/softnet_stat).

At each H, back to back (the order alternating per rep), on the launcher:
  ours     horovodrun -np H*R -H w0:R,...,w(H-1):R --start-timeout 120
               manyhosts_rank ITERS
           (its default tree launch above 32 hosts: it starts the agents
           of 32 hosts, and each of those the agents of up to 32 more)
  flat     the same with --tree-fanout 0 (--flat): horovodrun starts every
           host's agent itself
  mpirun   mpirun --allow-run-as-root -np H*R -H w0:R,...
               --mca plm_rsh_args '-i KEY ...' -x PMIX_MCA_gds=hash
               manyhosts_mpi_rank ITERS
           (Open MPI's default rsh launch, a tree: mpirun reaches up to
           routed_radix, 64, hosts and their orteds the rest)
  horovod  Horovod 0.28.1's horovodrun --gloo -np H*R -H w0:R,...
               --start-timeout 120 --ssh-identity-file KEY
               python manyhosts_horovod.py ITERS
           (up to --horovod-max-hosts, 32, hosts: its ssh check, its
           task servers on every host to find the common interfaces, then
           one ssh per rank, Gloo; this Horovod is built with MPI too, and
           without --gloo its horovodrun would run mpirun)
Like with like: the same hosts, sshd, key and ~/.ssh (bound over /root/.ssh
everywhere, HOME=/root), the same work in every rank (one file built on
libhvd and on MPI; manyhosts_horovod.py the same steps on horovod.torch,
in Python as Horovod's users run it: its init includes Python's start and
torch's import), the same ranks per host, each launcher as users run it:
its own default binding, transports and cycle time (horovodrun --bind-to
auto; mpirun's defaults, shared memory inside a host; Horovod's Gloo,
whose checks its horovodrun caches in ~/.horovod for an hour, so with
--reps > 1 its later reps skip them), PMIX_MCA_gds=hash being what mpirun
needs to start here. For every side every host gets an empty ~/.bashrc
(they share this machine's /root, whose .bashrc runs `pyenv init`: 0.1 s
of CPU per SSH session, 15 s instead of 1.6 at 128 hosts) and static ARP
entries (static_arp). Everything runs on this machine: on two cores the
figures measure its work for H hosts as much as the launcher; read ratios
and growth. So with the latency: all H*R ranks share the two cores, and
ranks that spin while they wait (Open MPI's default) take the CPU that
the others and the kernel's packet forwarding need: --mpi-yield makes
MPI's ranks yield it while they wait, as ours and Horovod's sleep, which
is how they behave on hosts of their own. A run past --timeout
(300 s) is killed, shows "> timeout", and its side is not run at larger
H; a failed run shows "failed: " and the last line of its output. --reps
N: medians (default 1). Exits 1 only when our side fails or a rank's sum
is wrong, 77 (meson's skip) without root or the cluster's tools; the
other sides' failures are figures.

    meson test -C build --benchmark manyhosts -v   (--iters 0: launch)
    meson test -C build --benchmark manyhosts_allreduce -v
                           (--ranks 1 --iters 200: latency, defaults)
    PYTHONPATH=tests/lib python3 tests/bench/manyhosts_bench.py \\
        --build-dir build --hosts 16,32 --ranks 1,4
Environment: HVD_HOROVODRUN, HVD_MANYHOSTS_RANK, HVD_MANYHOSTS_MPI_RANK,
HVD_MPIRUN (meson sets them; else under --build-dir, and PATH);
HVD_HOROVOD_PYTHON (the venv's python, default build-venv/bin/python, whose
bin/horovodrun is Horovod's launcher). Needs root, iproute2, util-linux,
openssh-server.
"""

import argparse
import datetime
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import nscluster

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LINE = re.compile(rb"manyhosts (\d+) (\d+) (\d+) (\d+) ([\d.]+) (.*)")
BASHRC = [("/dev/null", "/root/.bashrc", "ro")] \
    if os.path.exists("/root/.bashrc") else []
# Variables that would change horovodrun's hosts or the ranks' GPUs.
CLEAN = ("SLURM_", "PBS_", "LSB_", "OMPI_MCA_", "CUDA_VISIBLE_DEVICES",
         "HOROVOD_START_TIMEOUT")


def parse_list(s):
    """'16,32' -> [16, 32], sorted, each >= 1."""
    out = sorted(set(int(p) for p in s.split(",") if p.strip()))
    if not out or out[0] < 1:
        raise argparse.ArgumentTypeError("want counts >= 1")
    return out


def net_bytes(c):
    """(tx, rx) bytes of eth0 in the launcher host's network namespace."""
    p = c.run(c.launcher, ["cat", "/proc/net/dev"], capture_output=True,
              text=True, check=True)
    for line in p.stdout.splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "eth0":
            return int(rest.split()[8]), int(rest.split()[0])
    raise RuntimeError("no eth0 in the launcher's /proc/net/dev")


def machine():
    """(busy jiffies, all jiffies, packets the backlog dropped) of this
    machine, every namespace together."""
    with open("/proc/stat") as f:
        t = [int(x) for x in f.readline().split()[1:]]
    with open("/proc/net/softnet_stat") as f:
        drops = sum(int(line.split()[1], 16) for line in f)
    return sum(t) - t[3] - t[4], sum(t), drops


def static_arp(c):
    """Gives every host a permanent neighbour entry for every other. On two
    cores, hundreds of ranks connecting at once broadcast ARP requests that
    the bridge copies to every port, past the kernel's backlog
    (net.core.netdev_max_backlog, 1000): at 128 hosts requests dropped and
    connect failed with "No route to host". A real network has no such
    limit; static entries keep it out of the figures."""
    hosts, macs = c.hosts + [c.launcher], {}
    for h in hosts:
        out = subprocess.run(["ip", "-n", h.ns, "-o", "link", "show", "eth0"],
                             capture_output=True, text=True, check=True)
        macs[h.addr] = re.search(r"link/ether (\S+)", out.stdout).group(1)
    for h in hosts:
        subprocess.run(["ip", "-n", h.ns, "-b", "-"], text=True, check=True,
                       input="".join("neigh replace %s lladdr %s dev eth0 "
                                     "nud permanent\n" % (a, m)
                                     for a, m in macs.items() if a != h.addr))


def sweep(c, grace=3.0):
    """Waits up to grace seconds for what a job left on the hosts (all but
    the holders and listening sshds) to go, then kills it; returns the
    names of what was still there."""
    hosts = c.hosts + [c.launcher]
    keep = {h.pid for h in hosts} | {h.sshd.pid for h in hosts if h.sshd}
    deadline, names = time.monotonic() + grace, set()
    while True:
        pids = [p for p in nscluster.netns_pids({h.ino for h in hosts})
                if p not in keep]
        if not pids:
            return sorted(names)
        if time.monotonic() > deadline:
            for p in pids:
                try:
                    with open("/proc/%d/comm" % p) as f:
                        names.add(f.read().strip())
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.05)


class Run:
    """One launcher run: its figures (seconds, bytes) or its error."""
    error = init = ar = us = wall = cpu = rss = tx = rx = None
    timed_out, left, busy, drops, why = False, (), 0.0, 0, ""


def run_job(c, argv, env, nranks, timeout, tmp):
    """Runs argv on the launcher host, timed; parses the ranks' lines."""
    r = Run()
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    (tx0, rx0), s0 = net_bytes(c), machine()
    t0, m0 = time.time(), time.monotonic()
    p = subprocess.Popen(
        ["nsenter", "-t", str(c.launcher.pid), "--net", "--uts", "--mount",
         "--wd=" + tmp, "--"] + argv, env=env, stdin=subprocess.DEVNULL,
        stdout=out, stderr=err, start_new_session=True)
    fired = threading.Event()

    def kill():
        fired.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    timer = threading.Timer(timeout, kill)
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    r.wall = time.monotonic() - m0
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    r.cpu, r.rss = ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0
    (tx1, rx1), s1 = net_bytes(c), machine()
    r.tx, r.rx = tx1 - tx0, rx1 - rx0
    r.busy = (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
    r.drops = s1[2] - s0[2]
    r.left = sweep(c)
    with out, err:
        text, etext = out.seek(0) or out.read(), err.seek(0) or err.read()
    ranks = {int(m.group(1)): (int(m.group(3)), int(m.group(4)),
                               float(m.group(5)), m.group(6))
             for m in LINE.finditer(text)}
    bad = [b"rank %d: %s" % (k, v[3]) for k, v in sorted(ranks.items())
           if v[3] != b"ok"]
    if fired.is_set():
        r.timed_out = True
        r.error = "no exit within %d s (%d of %d ranks printed)" % (
            timeout, len(ranks), nranks)
    elif p.returncode != 0 or len(ranks) != nranks or bad:
        tail = b"\n".join(bad[:3] + [(etext or text).strip()[-1500:]])
        r.error = "exit %d, %d of %d ranks printed, %d not ok:\n%s" % (
            p.returncode, len(ranks), nranks, len(bad),
            tail.decode(errors="replace"))
        r.why = r.error.strip().splitlines()[-1][-80:].replace("|", "/")
    else:
        r.init = max(v[0] for v in ranks.values()) / 1e9 - t0
        r.ar = max(v[1] for v in ranks.values()) / 1e9 - t0
        r.us = max(v[2] for v in ranks.values())
    return r


def describe(r):
    """One run in a line."""
    if r.error is not None:
        return "FAILED: " + r.error.replace("\n", "\n#   ")
    return "whole job %.2f s, all init %.2f s, first allreduce %.2f s, CPU " \
        "%.2f s%s; machine busy %.0f%%, backlog drops %d%s" % (
            r.wall, r.init, r.ar, r.cpu,
            ", 8 B allreduce %.1f us" % r.us if r.us else "",
            100 * r.busy, r.drops,
            "; left and killed: " + " ".join(r.left) if r.left else "")


def med(runs, field):
    """Median of a field over the runs that succeeded, or None."""
    v = [getattr(r, field) for r in runs if r.error is None]
    return statistics.median(v) if v else None


def cell(runs, field, spec="%.2f", why=False):
    """A table cell: the median, '> timeout', 'failed' (with why, 'failed:
    ' and the last failure's last line) or 'not run'."""
    v = med(runs, field)
    if v is None:
        if not runs:
            return "not run"
        if any(r.timed_out for r in runs):
            return "> timeout"
        return "failed: " + runs[-1].why if why else "failed"
    if field in ("tx", "rx"):
        return "%.1f MiB" % (v / 1048576.0) if v >= 1048576 else \
            "%.0f KiB" % (v / 1024.0)
    return spec % v


def ratio(a, b):
    """a / b to two places, or n/a."""
    return "%.2f" % (a / b) if a is not None and b else "n/a"


# Our launcher's sides: with its default tree launch, and flat.
OURS = ("ours", "flat")
# Each side's table header: what its init is called, and its launcher.
NAMES = {"ours": ("ours: all hvd_init", "horovodrun"),
         "flat": ("flat: all hvd_init", "horovodrun --tree-fanout 0"),
         "mpirun": ("mpirun: all MPI_Init", "mpirun"),
         "horovod": ("horovod: all hvd.init", "Horovod's horovodrun")}


def markdown(head, rows):
    """Prints a markdown table."""
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def side_head(s):
    """The launch table's columns of side s."""
    return [NAMES[s][0] + " (s)", "first allreduce (s)", "whole job (s)",
            NAMES[s][1] + " CPU (s)"] + \
        (["peak RSS (MiB)"] if s in OURS else []) + \
        ["launcher bytes out/in"] + \
        (["ours/%s (whole job)" % s] if s != "ours" else [])


def side_row(res, s, H, R):
    """The launch table's cells of side s at H x R."""
    runs = res.get((s, H, R), [])
    row = [cell(runs, "init", why=True)] + [
        cell(runs, k) for k in ("ar", "wall", "cpu")]
    if s in OURS:
        row.append(cell(runs, "rss", "%.1f"))
    row.append("%s / %s" % (cell(runs, "tx"), cell(runs, "rx")))
    if s != "ours":
        row.append(ratio(med(res.get(("ours", H, R), []), "wall"),
                         med(runs, "wall")))
    return row


def print_table(R, a, res, sides):
    """The launch table for R ranks per host, then the growth lines."""
    print("\n#### %d rank(s) per host, %s\n" % (
        R, "median of %d reps" % a.reps if a.reps > 1 else "one run each"))
    markdown(["hosts x ranks"] + sum((side_head(s) for s in sides), []),
             [["%d x %d" % (H, R)] + sum((side_row(res, s, H, R)
                                          for s in sides), [])
              for H in a.hosts])
    print()
    for s in sides:
        capped = [str(H) for H in a.hosts
                  if s == "horovod" and H > a.horovod_max_hosts]
        skipped = [str(H) for H in a.hosts
                   if not res.get((s, H, R)) and str(H) not in capped]
        if capped:
            print("%s: not run at %s hosts, above --horovod-max-hosts %d" % (
                s, ",".join(capped), a.horovod_max_hosts))
        if skipped:
            print("%s: not run at %s hosts, after a timeout at fewer" % (
                s, ",".join(skipped)))
    for lo, hi in zip(a.hosts, a.hosts[1:]):
        parts = []
        for s in sides:
            lo_r, hi_r = res.get((s, lo, R), []), res.get((s, hi, R), [])
            parts.append("%s: %s" % (s, ", ".join(
                "%s x%s" % (f, ratio(med(hi_r, k), med(lo_r, k)))
                for f, k in (("all init", "init"), ("whole job", "wall"),
                             ("CPU", "cpu"), ("bytes out", "tx")))))
        print("growth %d -> %d hosts: %s" % (lo, hi, "; ".join(parts)))
    for H in a.hosts:
        w = med(res.get(("ours", H, R), []), "wall")
        if w is not None:
            print("ours at %d hosts: %.1f ms of whole job per host" % (
                H, w * 1e3 / H))


def print_latency(R, a, res, sides):
    """The 8 B allreduce latency table for R ranks per host: each side's
    median of the largest mean over the ranks, and ours over the others."""
    print("\n8 B allreduce, %d rank(s) per host: mean us per allreduce over "
          "%d after 20 of warm-up, the largest over the ranks\n" % (
              R, a.iters))
    rows = []
    for H in a.hosts:
        us = [med(res.get((s, H, R), []), "us") for s in sides]
        rows.append(["%d x %d" % (H, R)] + [
            cell(res.get((s, H, R), []), "us", "%.1f", why=True)
            for s in sides] + [ratio(us[0], u) for u in us[1:]])
    markdown(["hosts x ranks"] + ["%s (us)" % s for s in sides] +
             ["ours/%s" % s for s in sides[1:]], rows)


def tools(a):
    """The programs as absolute paths: hr (our horovodrun), rank and mrank
    (the rank on libhvd and on MPI), py (Horovod's venv python), mpirun
    (None if not found), theirs (Horovod's horovodrun), script (its rank)."""
    b, t = os.path.abspath(a.build_dir), argparse.Namespace()
    for k, var, default in (
            ("hr", "HVD_HOROVODRUN", (b, "launcher", "horovodrun")),
            ("rank", "HVD_MANYHOSTS_RANK",
             (b, "tests", "bench", "manyhosts_rank")),
            ("mrank", "HVD_MANYHOSTS_MPI_RANK",
             (b, "tests", "bench", "manyhosts_mpi_rank")),
            ("py", "HVD_HOROVOD_PYTHON",
             (ROOT, "build-venv", "bin", "python"))):
        setattr(t, k, os.path.abspath(os.environ.get(var) or
                                      os.path.join(*default)))
    t.mpirun = os.environ.get("HVD_MPIRUN") or shutil.which("mpirun")
    t.theirs = os.path.join(os.path.dirname(t.py), "horovodrun")
    t.script = os.path.join(HERE, "manyhosts_horovod.py")
    return t


def version(argv):
    """The first line argv prints, or '?'."""
    p = subprocess.run(argv, capture_output=True, text=True)
    return (p.stdout.strip().splitlines() or ["?"])[0]


def header(a, cmd, sides, t, n, t_up):
    """The machine, the sizes and each side's command line."""
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("# manyhosts_bench %s: %d CPUs, load %s, %d hosts + launcher up "
          "in %.1f s; hosts %s x ranks %s, %d rep(s), timeout %d s, %d "
          "timed allreduces" % (
              datetime.date.today(), os.cpu_count(), load, n, t_up,
              ",".join(map(str, a.hosts)), ",".join(map(str, a.ranks)),
              a.reps, a.timeout, a.iters))
    for s in sides:
        argv = cmd(s, 2, a.ranks[0])
        argv[argv.index("-H") + 1] = "w0:%d,w1:%d,..." % ((a.ranks[0],) * 2)
        argv[argv.index("-np") + 1] = "H*R"
        print("# %s (on the launcher host): %s" % (
            s, subprocess.list2cmdline(argv)))
    if "mpirun" in sides:
        print("# mpirun: %s" % version([t.mpirun, "--version"]))
    if "horovod" in sides:
        print("# horovod: Horovod %s, up to %d hosts" % (
            version([t.theirs, "--version"]), a.horovod_max_hosts))
    sys.stdout.flush()


def main():
    """Starts the cluster, runs every side at every size, prints tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=parse_list, default=[16, 32, 64, 128])
    ap.add_argument("--ranks", type=parse_list, default=[4])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds per run, either side (default 300)")
    ap.add_argument("--iters", type=int, default=200,
                    help="timed 8 B allreduces per rank (default 200; 0: "
                    "none, nor the warm-up: launch figures alone)")
    ap.add_argument("--horovod-max-hosts", type=int, default=32,
                    help="Horovod's side up to so many hosts (default 32)")
    ap.add_argument("--mpi-yield", action="store_true",
                    help="MPI ranks yield the CPU while they wait (--mca "
                    "mpi_yield_when_idle 1), as ours and Horovod's ranks "
                    "do: on a machine whose cores every host shares, ranks "
                    "that spin starve the others")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--no-horovod", action="store_true")
    ap.add_argument("--flat", action="store_true",
                    help="also our horovodrun with --tree-fanout 0: every "
                    "host's agent started by horovodrun itself")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    if a.iters < 0:
        ap.error("--iters: want a count >= 0")
    t = tools(a)
    for p in (t.hr, t.rank):
        if not os.access(p, os.X_OK):
            sys.exit("manyhosts_bench: %s not found: build first" % p)
    sides = ["ours"] + (["flat"] if a.flat else [])
    if not a.no_mpi and t.mpirun and os.access(t.mrank, os.X_OK):
        sides.append("mpirun")
    else:
        print("# mpirun: not run (--no-mpi, or no mpirun or "
              "manyhosts_mpi_rank)")
    if not a.no_horovod and os.access(t.theirs, os.X_OK):
        sides.append("horovod")
    else:
        print("# horovod: not run (--no-horovod, or no %s: "
              "scripts/install-horovod.sh, HVD_HOROVOD_PYTHON)" % t.theirs)

    t_all, n = time.monotonic(), a.hosts[-1]
    sshdir = tempfile.mkdtemp(prefix="hvdmh-ssh-")
    binds = {nm: [(sshdir, "/root/.ssh", "ro")] + BASHRC
             for nm in ["w%d" % i for i in range(n)] + ["launcher"]}
    try:
        c = nscluster.NsCluster(n, binds=binds)
    except nscluster.FixtureError as e:
        shutil.rmtree(sshdir, ignore_errors=True)
        print("manyhosts_bench: skipped, no cluster: %s" % e)
        return 77
    fail = False
    try:
        c.ssh_dir(sshdir)  # seen through the binds on every host
        static_arp(c)
        env = dict(os.environ, HOME="/root", HVD_TEST_GPU_COUNT="0",
                   PMIX_MCA_gds="hash")
        for k in [k for k in env if k.startswith(CLEAN)]:
            del env[k]
        rsh = ("-i %s -o IdentitiesOnly=yes -o BatchMode=yes -o "
               "UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o "
               "LogLevel=ERROR" % (c.key, c.known_hosts))

        def cmd(side, H, R):
            hl = ",".join("w%d:%d" % (i, R) for i in range(H))
            job = ["-np", str(H * R), "-H", hl]
            if side in OURS:
                flat = ["--tree-fanout", "0"] if side == "flat" else []
                return [t.hr] + job + flat + ["--start-timeout", "120",
                                              t.rank, str(a.iters)]
            if side == "horovod":
                return [t.theirs, "--gloo"] + job + [
                    "--start-timeout", "120", "--ssh-identity-file", c.key,
                    t.py, t.script, str(a.iters)]
            yld = ["--mca", "mpi_yield_when_idle", "1"] if a.mpi_yield else []
            return [t.mpirun, "--allow-run-as-root"] + job + yld + [
                "--mca", "plm_rsh_args", rsh, "-x", "PMIX_MCA_gds=hash",
                t.mrank, str(a.iters)]

        header(a, cmd, sides, t, n, time.monotonic() - t_all)
        res, dead = {}, set()
        tmp = os.path.join(c.dir, "runs")
        os.makedirs(tmp)
        for R in a.ranks:
            for H in a.hosts:
                for rep in range(a.reps):
                    for s in sides if rep % 2 == 0 else sides[::-1]:
                        if (s, R) in dead or (
                                s == "horovod" and H > a.horovod_max_hosts):
                            continue
                        r = run_job(c, cmd(s, H, R), env, H * R, a.timeout,
                                    tmp)
                        res.setdefault((s, H, R), []).append(r)
                        print("# %s %d x %d rep %d: %s" % (
                            s, H, R, rep + 1, describe(r)))
                        sys.stdout.flush()
                        fail = fail or (r.error is not None and s in OURS)
                        if r.timed_out:
                            dead.add((s, R))
            print_table(R, a, res, sides)
            if a.iters:
                print_latency(R, a, res, sides)
    finally:
        c.close()
        shutil.rmtree(sshdir, ignore_errors=True)
    print("\n# wall time: %.0f s" % (time.monotonic() - t_all))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
