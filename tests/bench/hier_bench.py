"""Benchmark (figures, not a test): hierarchical against flat allreduce.

Runs hvd_bench with -np 4 on two loopback SSH hosts of two ranks each
(127.0.0.2:2,127.0.0.3:2), once with --hierarchical-allreduce (shared
memory within each host, a TCP ring of the two leaders) and once with
--no-hierarchical-allreduce (one TCP ring through all four ranks),
alternating round by round so that drift on a shared machine hits both.
Prints the per-size median time and busbw of each and their ratio: the
figures behind the default (hierarchical on).

All four ranks run on this machine, so "across hosts" here is loopback
TCP, and on two cores -np 4 is oversubscribed: read the ratio, not the
absolute figures.

Environment: HVD_HOROVODRUN, HVD_BENCH (defaults: under build/),
HVD_HIER_BENCH_ROUNDS (default 3). Extra arguments go to hvd_bench
(default: -b 8 -e 64M -f 8).
"""

import os
import statistics
import subprocess
import sys

import sshfix

HERE = os.path.dirname(os.path.abspath(__file__))

ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(ROOT, "build")
HOROVODRUN = os.environ.get("HVD_HOROVODRUN",
                            os.path.join(BUILD, "launcher", "horovodrun"))
BENCH = os.environ.get("HVD_BENCH",
                       os.path.join(BUILD, "tests", "bench", "hvd_bench"))
ROUNDS = int(os.environ.get("HVD_HIER_BENCH_ROUNDS", "3"))
MODES = {"hierarchical": "--hierarchical-allreduce",
         "flat ring": "--no-hierarchical-allreduce"}


def rows(out):
    """{size: (time_us, busbw)} from rank 0's table."""
    got = {}
    for line in out.splitlines():
        if not line.startswith("[0,0]<stdout>:"):
            continue
        f = line.split(":", 1)[1].split()
        if len(f) == 8 and f[0].isdigit():
            if int(f[7]) != 0:
                raise SystemExit("hier_bench: wrong elements:\n" + out)
            got[int(f[0])] = (float(f[4]), float(f[6]))
    return got


def main():
    args = sys.argv[1:] or ["-b", "8", "-e", "64M", "-f", "8"]
    for exe in (HOROVODRUN, BENCH):
        if not os.access(exe, os.X_OK):
            sys.exit("hier_bench: %s not found; build first" % exe)
    results = {m: {} for m in MODES}
    with sshfix.SshCluster(2) as c:
        env = c.env()
        env.pop("CUDA_VISIBLE_DEVICES", None)
        for _ in range(ROUNDS):
            for mode, opt in MODES.items():
                cmd = [HOROVODRUN, "-np", "4", "-H", c.hosts_arg(2), "-p",
                       str(c.port), "-i", c.key, opt, BENCH] + args
                p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True,
                                   timeout=900)
                if p.returncode != 0:
                    raise SystemExit("hier_bench: %s failed (%d):\n%s%s" % (
                        mode, p.returncode, p.stdout, p.stderr))
                for size, v in rows(p.stdout).items():
                    results[mode].setdefault(size, []).append(v)
    print("# hvd_bench -np 4 on 2 loopback SSH hosts x 2 ranks, float32 "
          "sum, median of %d rounds" % ROUNDS)
    print("# %10s %12s %10s %12s %10s %9s" % (
        "size (B)", "hier (us)", "hier busbw", "flat (us)", "flat busbw",
        "flat/hier"))
    hier, flat = results["hierarchical"], results["flat ring"]
    for size in sorted(hier):
        ht = statistics.median(t for t, _ in hier[size])
        hb = statistics.median(b for _, b in hier[size])
        ft = statistics.median(t for t, _ in flat[size])
        fb = statistics.median(b for _, b in flat[size])
        print("  %10d %12.2f %10.3f %12.2f %10.3f %9.2f" % (
            size, ht, hb, ft, fb, ft / ht if ht > 0 else 0))
    print("# flat/hier > 1: hierarchical is faster")


if __name__ == "__main__":
    main()
