"""Integration tests: horovodrun --mpi, the job run by Open MPI's mpirun.

The ranks run inside hvd-mpi-rank under mpirun; horovodrun must keep its
own output format, --output-filename layout, exit codes and failure
summary. With the MPI backend in the build (HVD_HAVE_MPI), collcheck runs
through MPI as well. Also prints a launch-time figure against plain
mpirun. Exits 77 (skipped) when there is no mpirun on PATH.
"""

import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

import hvdtest
import mpienv
from launchmode import have_mpi_backend
import sshfix
from hvdtest import py, sh

ERR = hvdtest.ERR_PREFIX
MPIRUN = shutil.which("mpirun")
ENVDEMO = hvdtest.ENVDEMO
COLLCHECK = os.environ.get("HVD_COLLCHECK",
                           os.path.join(hvdtest.BUILD, "tests", "runtime",
                                        "collcheck"))
AS_ROOT = os.geteuid() == 0
VERBOSE_CMD = "horovodrun: mpirun command: "
DONE_RE = re.compile(r"collcheck: rank (\d+) of (\d+): (\d+) checks, "
                     r"(\d+) failures")


def mpirun_command(res):
    """mpirun's argv from horovodrun --verbose's stderr."""
    for line in res.err_lines:
        if line.startswith(VERBOSE_CMD):
            return shlex.split(line[len(VERBOSE_CMD):])
    raise AssertionError("no mpirun command in --verbose output\n" +
                         res.describe())


def has_pair(argv, a, b):
    return any(argv[i] == a and argv[i + 1] == b
               for i in range(len(argv) - 1))


class MpiLaunchTest(hvdtest.TestCase):

    def env(self, **extra):
        # An outer job's variables must not leak into these.
        for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "HOROVOD_CONTROLLER", "HOROVOD_RANK", "HOROVOD_SIZE"):
            extra.setdefault(k, None)
        return hvdtest.base_env(self.marker, **extra)

    def run_mpi(self, *args, **kw):
        return self.run_hr("--mpi", *args, **kw)

    # ------------------------------------------------------ env and output

    def check_envdemo(self, np):
        res = self.run_mpi("-np", np, ENVDEMO, timeout=60)
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(sorted(per), list(range(np)))
        ports = set()
        for r in range(np):
            lines = per[r]
            self.assertTrue(all(lr == r for lr, _ in lines),
                            "rank %d: wrong local_rank in a prefix" % r)
            self.assertRegex(lines[0][1], r"^hello from rank %d of %d " %
                             (r, np))
            env = dict(t.strip().split("=", 1) for _, t in lines[1:]
                       if "=" in t)
            want = {
                "HOROVOD_RANK": str(r), "HOROVOD_SIZE": str(np),
                "HOROVOD_LOCAL_RANK": str(r), "HOROVOD_LOCAL_SIZE": str(np),
                "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
                "HOROVOD_HOSTNAME": "localhost",
                "RANK": str(r), "WORLD_SIZE": str(np),
                "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(np),
                "MASTER_ADDR": "localhost",
                # No rendezvous under mpirun.
                "HOROVOD_RENDEZVOUS_ADDR": "(unset)",
                "HOROVOD_RENDEZVOUS_PORT": "(unset)",
            }
            for k, v in want.items():
                self.assertEqual(env.get(k), v, "rank %d: %s" % (r, k))
            self.assertRegex(env["MASTER_PORT"], r"^[1-9]\d*$")
            ports.add(env["MASTER_PORT"])
            self.assertIn("  HOROVOD_SECRET_KEY is missing",
                          [t for _, t in lines])
        self.assertEqual(len(ports), 1, "ranks got different MASTER_PORTs")
        self.assertEqual(res.err, "")

    def test_envdemo_np2(self):
        self.check_envdemo(2)

    def test_envdemo_np4(self):
        self.check_envdemo(4)

    def check_streams(self, np):
        n = 400
        out = os.path.join(self.tmp, "logs")
        res = self.run_mpi("-np", np, "--output-filename", out,
                           *py("N = %d\n" % n + hvdtest.ORDERED), timeout=90)
        self.assertRc(res, 0)
        for stream, per in self.assertOrderedStreams(res, np, n).items():
            # The file holds the same lines, raw.
            for r in range(np):
                with open(os.path.join(out, "rank.%d" % r, stream)) as f:
                    raw = f.read()
                self.assertEqual(raw, "".join(t + "\n" for _, t in per[r]))

    def test_streams_np2(self):
        self.check_streams(2)

    def test_streams_np4(self):
        self.check_streams(4)

    def test_long_partial_and_cr_lines(self):
        script = r"""
import os
r = int(os.environ["HOROVOD_RANK"])
c = "AB"[r].encode()
# Text that looks like mpirun's own tags must stay text.
os.write(1, b"before [1,0]<stdout>: 100% [x]\n")
data = c * (1 << 20) + b"\n"
for i in range(0, len(data), 70000):
    os.write(1, data[i:i + 70000])
os.write(2, c * (1 << 20) + b"\nafter-err\n")
os.write(1, b"cr\rcrlf\r\nno newline")
"""
        out = os.path.join(self.tmp, "logs")
        res = self.run_mpi("-np", "2", "--output-filename", out, *py(script))
        self.assertRc(res, 0)
        for r, c in ((0, "A"), (1, "B")):
            p = "[%d,%d]" % (r, r)
            mine = [l for l in res.out_lines if l.startswith(p)]
            self.assertEqual(mine, [
                p + "<stdout>:before [1,0]<stdout>: 100% [x]",
                p + "<stdout>:" + c * (1 << 20),
                p + "<stdout>:cr", p + "<stdout>:crlf",
                p + "<stdout>:no newline"])
            mine = [l for l in res.err_lines if l.startswith(p)]
            self.assertEqual(mine, [p + "<stderr>:" + c * (1 << 20),
                                    p + "<stderr>:after-err"])
            with open(os.path.join(out, "rank.%d" % r, "stdout"), "rb") as f:
                self.assertEqual(f.read(), b"before [1,0]<stdout>: 100% [x]\n"
                                 + c.encode() * (1 << 20) +
                                 b"\ncr\rcrlf\r\nno newline")
            with open(os.path.join(out, "rank.%d" % r, "stderr"), "rb") as f:
                self.assertEqual(f.read(), c.encode() * (1 << 20) +
                                 b"\nafter-err\n")

    def test_gpu_pinning(self):
        script = 'echo "${CUDA_VISIBLE_DEVICES:-unset}"'
        res = self.run_mpi("-np", "3", *sh(script),
                           env=self.env(HVD_TEST_GPU_COUNT=2))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:0", "[1,1]<stdout>:1", "[2,2]<stdout>:0"])
        res = self.run_mpi("--no-gpu-pinning", "-np", "2", *sh(script),
                           env=self.env(HVD_TEST_GPU_COUNT=2))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:unset", "[1,1]<stdout>:unset"])

    # ---------------------------------------------------------- failures

    def test_command_not_found(self):
        res = self.run_mpi("-np", "2", "hvd-no-such-command")
        self.assertRc(res, 127)
        self.assertEqual(len(res.error_lines()), 1, res.describe())
        self.assertRegex(res.error_lines()[0],
                         r"rank \d on localhost: cannot execute "
                         r"'hvd-no-such-command': No such file or directory")

    def test_mpirun_failure_is_shown(self):
        res = self.run_mpi("--mpi-args", "--no-such-mpirun-option", "-np",
                           "2", "true")
        self.assertRc(res, 255)
        self.assertIn("--no-such-mpirun-option", res.err)
        self.assertRegex(res.error_lines()[-1],
                         r"mpirun exited with status \d+ before any rank "
                         r"started; its messages are above")

    # -------------------------------------------------- the command line

    def test_verbose_command(self):
        secret = "5ec7e7" * 10 + "abcd"
        key = os.path.join(self.tmp, "id_test")
        res = self.run_mpi(
            "--verbose", "-np", "2", "-p", "2222", "-i", key,
            "--ssh-accept-new", "--fusion-threshold-mb", "32",
            "--cycle-time-ms", "2", "--cache-capacity", "0",
            "--stall-check-warning-time-seconds", "7", "--no-stall-check",
            "--timeline-filename", os.path.join(self.tmp, "tl.json"),
            "--hierarchical-allreduce", "--log-level", "info",
            *sh('echo "c=$HOROVOD_CONTROLLER f=$HOROVOD_FUSION_THRESHOLD '
                't=$HOROVOD_CYCLE_TIME l=$HOROVOD_LOG_LEVEL '
                's=${HOROVOD_SECRET_KEY:-none} u=$HVDT_USER"'),
            env=self.env(HOROVOD_SECRET_KEY=secret, HVDT_USER="x"))
        self.assertRc(res, 0)
        argv = mpirun_command(res)
        self.assertEqual(os.path.basename(argv[0]), "mpirun")
        self.assertEqual("--allow-run-as-root" in argv, AS_ROOT)
        self.assertIn("--tag-output", argv)
        self.assertTrue(has_pair(argv, "-np", "2"), argv)
        self.assertTrue(has_pair(argv, "-H", "localhost:2"), argv)
        self.assertTrue(has_pair(argv, "--bind-to", "none"), argv)
        self.assertTrue(has_pair(argv, "--map-by", "slot"), argv)
        self.assertIn(["--mca", "plm_rsh_args",
                       "-p 2222 -i %s -o StrictHostKeyChecking=accept-new" %
                       key],
                      [argv[i:i + 3] for i in range(len(argv))])
        exported = [argv[i + 1] for i in range(len(argv) - 1)
                    if argv[i] == "-x"]
        for name in ("HOROVOD_CONTROLLER", "HOROVOD_FUSION_THRESHOLD",
                     "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
                     "HOROVOD_STALL_CHECK_TIME_SECONDS",
                     "HOROVOD_STALL_CHECK_DISABLE", "HOROVOD_TIMELINE",
                     "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_LOG_LEVEL",
                     "MASTER_ADDR", "MASTER_PORT", "PYTHONUNBUFFERED",
                     "PATH"):
            self.assertIn(name, exported)
        # Names only, never values; no secret, no per-rank variables.
        self.assertTrue(all("=" not in n for n in exported), exported)
        for name in ("HOROVOD_SECRET_KEY", "HOROVOD_RANK", "HOROVOD_SIZE",
                     "HVDT_USER"):
            self.assertNotIn(name, exported)
        self.assertNotIn(secret, res.err + res.out)
        i = argv.index("--")
        self.assertTrue(argv[i - 3].endswith("/hvd-mpi-rank"), argv)
        self.assertEqual(argv[i - 2:i], ["--plan", "localhost:2"])
        self.assertEqual(argv[i + 1:i + 3], ["sh", "-c"])
        self.assertEqual(sorted(res.out_lines), [
            "[%d,%d]<stdout>:c=mpi f=%d t=2 l=info s=none u=x" %
            (r, r, 32 << 20) for r in range(2)])

    def test_mpi_args_split_like_a_shell(self):
        res = self.run_mpi(
            "--verbose", "--mpi-args",
            "--mca btl_base_verbose 0 -x 'HVDT_A' -x \"HVDT_B\" "
            "--map-by core",
            "-np", "2", *sh('echo "$HVDT_A $HVDT_B"'),
            env=self.env(HVDT_A="a b", HVDT_B="c"))
        self.assertRc(res, 0)
        argv = mpirun_command(res)
        self.assertTrue(has_pair(argv, "-x", "HVDT_A"), argv)
        self.assertTrue(has_pair(argv, "-x", "HVDT_B"), argv)
        self.assertTrue(has_pair(argv, "btl_base_verbose", "0"), argv)
        # The user's mapping replaces ours.
        self.assertTrue(has_pair(argv, "--map-by", "core"), argv)
        self.assertFalse(has_pair(argv, "--map-by", "slot"), argv)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:a b c", "[1,1]<stdout>:a b c"])
        bad = self.run_mpi("--mpi-args", "-x 'HVDT_A", "-np", "2", "true")
        self.assertRc(bad, 2)
        self.assertEqual(bad.error_lines(), [
            ERR + "--mpi-args has an unclosed ' quote: -x 'HVDT_A"])

    def test_hostfile(self):
        hostfile = os.path.join(self.tmp, "hosts")
        with open(hostfile, "w") as f:
            f.write("# comment\nlocalhost slots=4   # four\n")
        tmpdir = os.path.join(self.tmp, "t")
        os.mkdir(tmpdir)
        res = self.run_mpi("--verbose", "--hostfile", hostfile, "-np", "3",
                           *sh('echo "$HOROVOD_LOCAL_RANK/'
                               '$HOROVOD_LOCAL_SIZE"'),
                           env=self.env(TMPDIR=tmpdir))
        self.assertRc(res, 0)
        argv = mpirun_command(res)
        i = argv.index("--hostfile")
        self.assertTrue(argv[i + 1].startswith(tmpdir + "/"), argv)
        self.assertEqual(os.listdir(tmpdir), [], "hostfile left behind")
        self.assertEqual(sorted(res.out_lines), [
            "[%d,%d]<stdout>:%d/3" % (r, r, r) for r in range(3)])

    def test_usage_errors(self):
        res = self.run_hr("--mpi", "--gloo", "-np", "2", "true")
        self.assertRc(res, 2)
        self.assertEqual(res.error_lines(), [
            ERR + "--mpi and --gloo cannot be used together; pick one"])
        res = self.run_hr("--mpi-args", "-v", "-np", "2", "true")
        self.assertRc(res, 2)
        self.assertEqual(res.error_lines(), [ERR + "--mpi-args needs --mpi"])
        # --gloo names the default launcher.
        res = self.run_hr("--gloo", "-np", "2", *sh("echo $HOROVOD_RANK"))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:0", "[1,1]<stdout>:1"])

    def test_no_mpirun_on_path(self):
        empty = os.path.join(self.tmp, "bin")
        os.mkdir(empty)
        res = self.run_mpi("-np", "2", "/bin/true",
                           env=self.env(PATH=empty))
        self.assertRc(res, 2)
        self.assertEqual(res.error_lines(), [
            ERR + "--mpi needs Open MPI's mpirun, and there is none on PATH; "
            "install Open MPI or drop --mpi"])
        self.assertEqual(len(res.err_lines), 1, res.describe())

    def test_remote_hosts_over_ssh(self):
        """Two loopback sshd hosts: -p and -i reach the ssh that starts
        Open MPI's daemons, and the plan, prefixes and summary name the
        remote hosts."""
        try:
            cluster = sshfix.SshCluster(2)
            cluster.start()
        except sshfix.FixtureError as e:
            self.skipTest(str(e))
        self.addCleanup(cluster.stop)
        cluster.fresh_known_hosts()
        # OpenSSH reads ~/.ssh of the user's real home, not $HOME: a config
        # file points it at the cluster's known_hosts instead.
        cfg = os.path.join(self.tmp, "ssh_config")
        with open(cfg, "w") as f:
            f.write("UserKnownHostsFile %s\nGlobalKnownHostsFile /dev/null\n"
                    "StrictHostKeyChecking yes\nIdentitiesOnly yes\n"
                    "BatchMode yes\nLogLevel ERROR\n" % cluster.known_hosts)
        # Remote ranks get only the -x variables: the marker rides on the
        # command line instead.
        script = ('echo "$HOROVOD_LOCAL_RANK $HOROVOD_CROSS_RANK '
                  '$HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME $HOROVOD_CONTROLLER";'
                  ' if [ "$HOROVOD_RANK" = 3 ]; then sleep 0.5; exit 5; fi;'
                  ' sleep 60 # %s' % self.marker)
        res = self.run_mpi(
            "--verbose", "-np", "4", "-H", cluster.hosts_arg(2),
            "-p", cluster.port, "-i", cluster.key,
            "--mpi-args", "--mca plm_rsh_agent 'ssh -F %s'" % cfg,
            *sh(script), env=cluster.env(self.env()), timeout=120)
        self.assertRc(res, 5)
        argv = mpirun_command(res)
        self.assertTrue(has_pair(argv, "plm_rsh_args", "-p %d -i %s" % (
            cluster.port, cluster.key)), argv)
        a, b = cluster.hosts
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(per, {
            0: [(0, "0 0 2 %s mpi" % a)], 1: [(1, "1 0 2 %s mpi" % a)],
            2: [(0, "0 1 2 %s mpi" % b)], 3: [(1, "1 1 2 %s mpi" % b)]})
        self.assertEqual(res.error_lines(), [
            ERR + "rank 3 (host %s, local_rank 1) exited with code 5; the "
            "job was stopped" % b])
        self.assertNoneLeft(timeout=10)

    # --------------------------------------------------- the MPI backend

    def check_collcheck(self, np):
        if not have_mpi_backend():
            self.skipTest("this build has no MPI backend (HVD_HAVE_MPI 0)")
        # These runs start MPI: Open MPI's own sanitizer reports are
        # suppressed.
        env = mpienv.add_openmpi_suppressions(self.env())
        res = self.run_mpi("-np", np, "--log-level", "debug", COLLCHECK,
                           env=env, timeout=240)
        self.assertRc(res, 0)
        done = {}
        for line in res.out_lines:
            m = DONE_RE.search(line)
            if m:
                done[int(m.group(1))] = (int(m.group(2)), int(m.group(3)),
                                         int(m.group(4)))
        self.assertEqual(sorted(done), list(range(np)), res.describe())
        for r, (size, checks, failures) in done.items():
            self.assertEqual((size, failures), (np, 0), "rank %d" % r)
            self.assertGreater(checks, 50)
        transports = [l for l in res.err_lines if "transport:" in l]
        self.assertEqual(len(transports), np, res.describe())
        self.assertTrue(all("transport: MPI" in l for l in transports),
                        transports)

    def test_collcheck_np2(self):
        self.check_collcheck(2)

    def test_collcheck_np4(self):
        self.check_collcheck(4)

    # ----------------------------------------------------------- figure

    def test_launch_time(self):
        """horovodrun --mpi -np 4 true against mpirun -np 4 true."""
        env = self.env()
        plain = [MPIRUN] + (["--allow-run-as-root"] if AS_ROOT else []) + [
            "-np", "4", "-H", "localhost:4", "true"]
        ours = hvdtest.hr_args("--mpi", "-np", "4", "true")

        def once(argv):
            t0 = time.monotonic()
            p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=60)
            dt = time.monotonic() - t0
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            return dt

        times = {"mpirun": [], "horovodrun --mpi": []}
        for _ in range(10):  # interleaved, so that load hits both alike
            times["mpirun"].append(once(plain))
            times["horovodrun --mpi"].append(once(ours))
        med = {k: statistics.median(v) for k, v in times.items()}
        sys.stderr.write(
            "\nlaunch time, -np 4 true, median of 10: mpirun %.1f ms, "
            "horovodrun --mpi %.1f ms (%.2fx, +%.1f ms)\n" % (
                med["mpirun"] * 1e3, med["horovodrun --mpi"] * 1e3,
                med["horovodrun --mpi"] / med["mpirun"],
                (med["horovodrun --mpi"] - med["mpirun"]) * 1e3))


if __name__ == "__main__":
    if MPIRUN is None:
        print("skipped: no mpirun on PATH (install Open MPI to test "
              "horovodrun --mpi)")
        sys.exit(77)
    hvdtest.main()
