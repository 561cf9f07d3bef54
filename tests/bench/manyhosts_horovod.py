"""The rank of tests/bench/manyhosts_bench.py on real Horovod (horovod.torch).

The work of manyhosts_rank.c, the same steps and sizes: hvd.init, one
allreduce of a float32 tensor of 2 (8 B, op=hvd.Sum), WARMUP more and
ITERS timed ones of the same tensor (ITERS: argv[1], default 200; 0:
none of them), the first sum and the last checked, hvd.shutdown, and the
same line:

    manyhosts RANK SIZE INIT_NS ALLREDUCE_NS US_PER_OP ok|wrong|ERROR

Run with the Python of the venv that scripts/install-horovod.sh builds.
"""

import os
import sys
import time

WARMUP = 20


def main():
    """Runs the work and prints the line; 0 when the sums were right."""
    rank, size = os.environ.get("HOROVOD_RANK", "0"), 0
    try:
        import torch
        import horovod.torch as hvd
        iters = max(0, int(sys.argv[1])) if len(sys.argv) > 1 else 200
        hvd.init()
        t_init = time.time_ns()
        rank, size = hvd.rank(), hvd.size()
        buf = torch.tensor([float(rank), 1.0], dtype=torch.float32)
        want = torch.tensor([size * (size - 1) / 2.0, float(size)])
        out = hvd.allreduce(buf, op=hvd.Sum)
        t_ar = time.time_ns()
        right = torch.equal(out, want)
        us = 0
        if iters:
            for i in range(WARMUP + iters):
                if i == WARMUP:
                    t0 = time.monotonic_ns()
                out = hvd.allreduce(buf, op=hvd.Sum)
            us = (time.monotonic_ns() - t0) / 1e3 / iters
        right = right and torch.equal(out, want)
        status = "ok" if right else "wrong"
    except Exception as e:  # any failure goes in the line
        t_init = t_ar = us = 0
        status = ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")
    print("manyhosts %s %d %d %d %.2f %s" % (rank, size, t_init, t_ar, us,
                                             status), flush=True)
    if status != "ok":
        return 1
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
