"""Benchmark (figures, not a test): launching over SSH.

Times `horovodrun -np 4 -H 127.0.0.2:1,...,127.0.0.5:1 -i KEY true` (four
remote hosts, one rank each, every rank `true`) against the plain SSH round
trip measured in the same run: four OpenSSH `ssh ... host true` started in
parallel, waited for together. The two alternate, round after round, so
that drift on a shared machine hits both; the figures are medians and their
ratio (target: horovodrun within 1.5x of plain ssh).

Environment: HVD_HOROVODRUN (the horovodrun to time), HVD_SSH_BENCH_ROUNDS
(default 15), HVD_SSH_BENCH_HOSTS (default 4).
"""

import os
import statistics
import subprocess
import sys
import time

import sshfix

HERE = os.path.dirname(os.path.abspath(__file__))

ROOT = os.path.dirname(os.path.dirname(HERE))
HOROVODRUN = os.environ.get("HVD_HOROVODRUN",
                            os.path.join(ROOT, "build", "launcher",
                                         "horovodrun"))
ROUNDS = int(os.environ.get("HVD_SSH_BENCH_ROUNDS", "15"))
NHOSTS = int(os.environ.get("HVD_SSH_BENCH_HOSTS", "4"))


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    if not os.access(sshfix.SSHD, os.X_OK):
        sys.exit("ssh_launch_bench: %s is missing; install openssh-server "
                 "and openssh-client" % sshfix.SSHD)
    if not os.access(HOROVODRUN, os.X_OK):
        sys.exit("ssh_launch_bench: horovodrun not found at %s" % HOROVODRUN)
    with sshfix.SshCluster(NHOSTS) as c:
        env = c.env()
        env.pop("CUDA_VISIBLE_DEVICES", None)
        hr = [HOROVODRUN, "-np", str(NHOSTS), "-H", c.hosts_arg(1),
              "-p", str(c.port), "-i", c.key, "true"]

        def run_hr():
            p = subprocess.run(hr, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise SystemExit("horovodrun failed (%d):\n%s%s" % (
                    p.returncode, p.stdout, p.stderr))

        ssh_argvs = [c.ssh_argv(h, "true") for h in c.hosts]

        def run_ssh():
            ps = [subprocess.Popen(a, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                  for a in ssh_argvs]
            for p in ps:
                _, err = p.communicate(timeout=120)
                if p.returncode != 0:
                    raise SystemExit("ssh failed (%d): %s" % (
                        p.returncode, err.decode(errors="replace")))

        # Warm up both (page cache, sshd's first fork).
        run_hr()
        run_ssh()
        t_hr, t_ssh = [], []
        for i in range(ROUNDS):
            if i % 2:
                t_ssh.append(timed(run_ssh))
                t_hr.append(timed(run_hr))
            else:
                t_hr.append(timed(run_hr))
                t_ssh.append(timed(run_ssh))
        m_hr = statistics.median(t_hr)
        m_ssh = statistics.median(t_ssh)
        ssh_v = subprocess.run([sshfix.SSH, "-V"], capture_output=True,
                               text=True).stderr.strip()
        print("SSH launch: %d hosts x 1 rank running `true`, %d rounds, "
              "alternating" % (NHOSTS, ROUNDS))
        print("  %-44s %8s %8s %8s" % ("", "median", "min", "max"))
        print("  %-44s %7.1fms %7.1fms %7.1fms" % (
            "horovodrun -np %d -H ... -i KEY true" % NHOSTS, m_hr * 1e3,
            min(t_hr) * 1e3, max(t_hr) * 1e3))
        print("  %-44s %7.1fms %7.1fms %7.1fms" % (
            "%d x ssh host true in parallel" % NHOSTS,
            m_ssh * 1e3, min(t_ssh) * 1e3, max(t_ssh) * 1e3))
        print("  (ssh: %s; sshd: the same package, one per host)" %
              ssh_v.split(",")[0])
        ratio = m_hr / m_ssh
        print("  ratio horovodrun / ssh: %.2fx (target <= 1.5x): %s" % (
            ratio, "ok" if ratio <= 1.5 else "OVER TARGET"))


if __name__ == "__main__":
    main()
