"""horovod.torch allreduce against hvd_bench (libhvd's C API), the same
sizes and policy in one run (figures, not pass/fail).

Both sides: float32 sum, in place, one reused buffer per size (hvd_bench
-I 1 -R 0), HOROVOD_CYCLE_TIME=0, warm-up then timed iterations, the
slowest rank's mean time per call, under our horovodrun. Prints each side
in nccl-tests' format (size, count, type, redop, time, algbw, busbw,
#wrong), then the time horovod.torch adds per call and its busbw as a
fraction of the C figure.

    PYTHONPATH=tests/lib python3 tests/bench/torch_allreduce_bench.py [--np 2,4]

Run with --rank-side under horovodrun, it is the Python side itself.
Environment: HVD_HOROVODRUN, HVD_BENCH, HVD_LIBRARY, HVD_PYTHONPATH,
HVD_TORCH_PYTHON.
"""

import argparse
import os
import re
import subprocess
import sys
import time

from torchenv import BUILD, HOROVODRUN, LIB, PY, PYPATH

HVD_BENCH = os.environ.get("HVD_BENCH",
                           os.path.join(BUILD, "tests", "bench", "hvd_bench"))
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+float32\s+sum\s+([\d.]+)\s+([\d.]+)\s+"
                 r"([\d.]+)\s+(\S+)\s*$")
SMALL = 64 * 1024


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def iters_for(nbytes, a):
    return (a.small_iters, a.small_warmup) if nbytes <= SMALL else \
        (a.iters, a.warmup)


def rank_side(a):
    """One rank of the Python side: prints rows as hvd_bench does."""
    import torch
    import horovod.torch as hvd
    torch.set_num_threads(1)
    hvd.init()
    n = hvd.size()
    for nbytes in sizes(a.minbytes, a.maxbytes, a.stepfactor):
        iters, warmup = iters_for(nbytes, a)
        t = torch.ones(nbytes // 4)
        for _ in range(warmup):
            hvd.allreduce_(t, op=hvd.Sum)
        hvd.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            hvd.allreduce_(t, op=hvd.Sum)
        mine = (time.perf_counter() - t0) / iters
        slowest = hvd.allreduce(torch.tensor([mine], dtype=torch.float64),
                                op=hvd.Max).item()
        algbw = nbytes / slowest / 1e9
        if hvd.rank() == 0:
            print("%12d  %12d   float32      sum  %10.2f  %7.2f  %7.2f  %7s"
                  % (nbytes, nbytes // 4, slowest * 1e6, algbw,
                     algbw * 2.0 * (n - 1) / n, "N/A"), flush=True)
    hvd.shutdown()


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=1800)
    rows = {}
    for line in r.stdout.splitlines():
        line = re.sub(r"^\[\d+,\d+\]<stdout>:", "", line)
        m = ROW.match(line)
        if m:
            rows[int(m.group(1))] = (float(m.group(3)), float(m.group(5)),
                                     line)
    if r.returncode != 0 or not rows:
        raise RuntimeError("%s failed (rc %s):\n%s\n%s" % (
            " ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--np", default="2,4")
    p.add_argument("-b", "--minbytes", type=int, default=8)
    p.add_argument("-e", "--maxbytes", type=int, default=64 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--small-iters", type=int, default=500)
    p.add_argument("--small-warmup", type=int, default=50)
    p.add_argument("--rank-side", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank_side:
        return rank_side(a)
    env = dict(os.environ, HOROVOD_CYCLE_TIME="0", PYTHONPATH=PYPATH,
               HVD_LIBRARY=LIB)
    size_args = ["-b", str(a.minbytes), "-e", str(a.maxbytes), "-f",
                 str(a.stepfactor)]
    print("# float32 sum, in place, one reused buffer per size, "
          "HOROVOD_CYCLE_TIME=0; %d iterations (%d up to 64 KiB) after "
          "%d (%d) warm-up; slowest rank's mean" % (
              a.iters, a.small_iters, a.warmup, a.small_warmup))
    for np_ in [int(x) for x in a.np.split(",")]:
        hr = [HOROVODRUN, "-np", str(np_)]
        c_rows, py_rows = {}, {}
        # hvd_bench takes one iteration count: run it per regime, on the
        # same sizes as the Python side.
        grid = sizes(a.minbytes, a.maxbytes, a.stepfactor)
        for part in ([s for s in grid if s <= SMALL],
                     [s for s in grid if s > SMALL]):
            if not part:
                continue
            lo, hi = part[0], part[-1]
            its, wu = iters_for(lo, a)
            c_rows.update(run(hr + [HVD_BENCH, "-I", "1", "-R", "0", "-c",
                                    "0", "-n", str(its), "-w", str(wu),
                                    "-b", str(lo), "-e", str(hi), "-f",
                                    str(a.stepfactor)], env))
        py_rows.update(run(hr + [PY, os.path.abspath(__file__),
                                 "--rank-side"] + size_args +
                           ["--iters", str(a.iters), "--warmup",
                            str(a.warmup), "--small-iters",
                            str(a.small_iters), "--small-warmup",
                            str(a.small_warmup)], env))
        for title, rows in (("libhvd C API (hvd_bench)", c_rows),
                            ("horovod.torch (hvd.allreduce_)", py_rows)):
            print("# -np %d %s" % (np_, title))
            print("#%11s  %12s  %8s  %7s  %10s  %7s  %7s  %7s" % (
                "size", "count", "type", "redop", "time", "algbw", "busbw",
                "#wrong"))
            for s in sorted(rows):
                print(rows[s][2].rstrip())
        print("# -np %d: horovod.torch against the C API" % np_)
        print("#%11s  %14s  %16s" % ("size", "added (us)", "busbw py/C"))
        for s in sorted(set(c_rows) & set(py_rows)):
            (ct, cb, _), (pt, pb, _) = c_rows[s], py_rows[s]
            print("%12d  %14.2f  %16.2f" % (s, pt - ct,
                                           pb / cb if cb > 0 else 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
