"""horovodrun as the users of each cluster manager run it, on hosts made of
network namespaces (tests/lib/nscluster.py): Kubeflow's MPI Operator
v2beta1 (SSH, /etc/mpi/hostfile, read-only keys, workers that come up
late), the training-operator's v1 MPIJob (kubexec.sh named by
OMPI_MCA_plm_rsh_agent), PBS (PBS_NODEFILE), LSF (LSB_MCPU_HOSTS and
blaunch) and an elastic job whose discovery script prints bare names.

Each runs a C rank that checks collectives across hosts against the
serial result, a training example whose ranks must end with equal
weights, a rank killed mid-job (named in the failure summary) and a
SIGKILLed horovodrun (nothing left on any host). Needs root, iproute2,
util-linux and openssh-server; Debian's python3-torch for the PyTorch
example."""

import os
import re
import signal
import subprocess
import time
import unittest

import hvdtest
import nscluster
from tmuxterm import Tmux

HOROVODRUN = hvdtest.HOROVODRUN
COLLCHECK = os.environ["HVD_COLLCHECK"]
TRAIN = os.environ["HVD_TRAIN"]
ELASTICRANK = os.environ["HVD_ELASTICRANK"]
TORCH_PY = os.environ.get("HVD_TORCH_PYTHON", "/usr/bin/python3")
EXAMPLE = os.path.join(hvdtest.ROOT, "examples", "pytorch_train.py")
ERR = hvdtest.ERR_PREFIX
WARN = hvdtest.WARN_PREFIX


def remote_exec(path, c, names, not_found, command, redirect=""):
    """Writes an executable script at path that runs `script HOST ARGS...`
    on the named host of c as a cluster's remote-exec tool does: in the
    host's namespaces, in a session of its own (it outlives the script),
    with no input and the host's environment, not this one's. not_found is
    the shell line for an unknown host; command runs the arguments."""
    arms = "\n".join("%s) PID=%d ;;" % (n, c.host(n).pid) for n in names)
    with open(path, "w") as f:
        f.write("#!/bin/sh\nHOST=$1\nshift\ncase \"$HOST\" in\n%s\n"
                "*) %s ;;\nesac\n"
                "exec nsenter -t \"$PID\" --net --uts --mount -- "
                "setsid -w \\\n"
                "    env -i PATH=\"$PATH\" HOME=/root %s </dev/null %s\n"
                % (arms, not_found, command, redirect))
    os.chmod(path, 0o755)
    return path


# kubexec.sh as the training-operator writes it (kubectl exec POD -- /bin/sh
# -c "$*"), with kubectl exec played by entering the pod's namespaces.
KUBEXEC = ('echo "error: pods \\"$HOST\\" not found" >&2; exit 1',
           '/bin/sh -c "$*"')
# LSF's blaunch HOST COMMAND...
BLAUNCH = ('echo "blaunch: $HOST is not in the job" >&2; exit 1', '"$@"')
# PBS's pbs_tmrsh HOST COMMAND...: its output goes to the job's output
# file, not back (the redirect names that file).
PBS_TMRSH = ('echo "pbs_tmrsh: host \\"$HOST\\" is not a node in job" >&2; '
             'exit 255', '"$@"')


def leftovers(c):
    """Processes on the worker hosts other than each host's holder and
    listening sshd: what a job left behind."""
    keep = set()
    for h in c.hosts:
        keep.add(h.pid)
        if h.sshd is not None:
            keep.add(h.sshd.pid)
    left = []
    for pid in nscluster.netns_pids({h.ino for h in c.hosts}):
        if pid in keep:
            continue
        cmd = hvdtest._read("/proc/%d/cmdline" % pid)
        st = hvdtest.proc_state(pid)
        if cmd and st not in (None, "Z", "X"):
            left.append((pid, cmd.replace(b"\0", b" ").decode()))
    return left


class ClusterCase(unittest.TestCase):
    """One cluster per class; run() and start() run horovodrun on its
    launcher host."""

    maxDiff = 20000
    cluster = None

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls.cluster.close()

    def setUp(self):
        self.marker = hvdtest.new_marker(self.id().rsplit(".", 1)[-1][:24])
        self.tmp = os.path.join(self.cluster.dir, self.marker)
        os.makedirs(self.tmp)

    def env(self, **extra):
        env = hvdtest.base_env(self.marker, HOME="/root",
                               PYTHONPATH=os.environ.get("HVD_PYTHONPATH"),
                               HVD_LIBRARY=os.environ.get("HVD_LIBRARY"),
                               **extra)
        for k in ("PBS_NODEFILE", "LSB_MCPU_HOSTS", "LSB_HOSTS",
                  "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_agent"):
            if k not in extra:
                env.pop(k, None)
        return env

    def argv(self, args):
        return (["nsenter", "-t", str(self.cluster.launcher.pid), "--net",
                 "--uts", "--mount", "--wd=" + self.tmp, "--", HOROVODRUN] +
                [str(a) for a in args])

    def run_hr(self, *args, timeout=120, **extra):
        return hvdtest.run(self.argv(args), env=self.env(**extra),
                           timeout=timeout, cwd=self.tmp)

    def start(self, *args, **extra):
        job = hvdtest.Job(self.argv(args), env=self.env(**extra),
                          cwd=self.tmp)
        self.addCleanup(job.kill)
        return job

    def assertRc(self, res, rc):
        self.assertEqual(res.rc, rc, res.describe())

    def assertNothingLeft(self):
        left = hvdtest.wait_until(lambda: not leftovers(self.cluster), 10)
        self.assertTrue(left, "left on the hosts: %s" % leftovers(
            self.cluster))

    def check_collectives(self, res, np, hosts):
        """collcheck passed on np ranks, placed on hosts in order."""
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(sorted(per), list(range(np)), res.describe())
        for r in range(np):
            self.assertTrue(any(re.match(r"collcheck: rank %d of %d: \d+ "
                                         r"checks, 0 failures$" % (r, np), t)
                                for _, t in per[r]), res.describe())
        self.assertEqual(len(set(hosts)), 2)

    def check_train(self, res, np):
        """The C example: every rank ends with the same weights."""
        self.assertRc(res, 0)
        sums = re.findall(r"^\[\d+,\d+\]<stdout>:weights checksum: "
                          r"([0-9a-f]{16})$", res.out, re.M)
        self.assertEqual(len(sums), np, res.describe())
        self.assertEqual(len(set(sums)), 1, res.describe())

    def check_torch_example(self, *hosts_args):
        """The PyTorch example: every rank ends with rank 0's weights."""
        res = self.run_hr(*hosts_args, TORCH_PY, EXAMPLE, "--steps", "3",
                          "--batch-size", "8", "--fake-size", "128",
                          "--data-dir", "/nonexistent", timeout=300)
        self.assertRc(res, 0)
        self.assertIn("[0,0]<stdout>:pytorch_train: weights equal on all 4 "
                      "ranks", res.out_lines)

    def check_failures(self, hosts_args, host_of_3, **extra):
        """A rank killed mid-job is named; a SIGKILLed horovodrun leaves
        nothing on any host."""
        job = self.start(*hosts_args, "--kill-grace", "1", TORCH_PY, "-c",
                         hvdtest.READY_DIE, DIE="3", **extra)
        self.assertEqual(job.wait(90), 137, job.describe())
        self.assertRegex(job.err, r"rank 3 \(host %s, local_rank 1\) was "
                         r"killed by signal 9" % re.escape(host_of_3),
                         job.describe())
        self.assertNothingLeft()
        job = self.start(*hosts_args, TORCH_PY, "-c", hvdtest.READY_DIE,
                         **extra)
        job.wait_line(lambda l: l.endswith(">:ready"), count=4, timeout=90)
        self.assertTrue(leftovers(self.cluster))
        job.signal(signal.SIGKILL)
        job.wait(10)
        self.assertNothingLeft()


class MpiOperatorTest(ClusterCase):
    """MPI Operator v2beta1: hostfile in /etc/mpi, keys read-only in
    /root/.ssh with StrictHostKeyChecking no, names as the operator
    writes them."""

    W = ["job-worker-0.job.default.svc", "job-worker-1.job.default.svc"]

    @classmethod
    def setUpClass(cls):
        # The operator's key: ECDSA P-521 in PEM.
        c = cls.cluster = nscluster.NsCluster(2, names=cls.W,
                                              key_type="ecdsa")
        ssh = c.ssh_dir(os.path.join(c.dir, "ssh"), config=(
            "Host *\n    StrictHostKeyChecking no\n"
            "    UserKnownHostsFile /dev/null\n"))
        os.unlink(os.path.join(ssh, "known_hosts"))
        # The operator's Secret names its ECDSA key id_rsa.
        for ext in ("", ".pub"):
            os.rename(os.path.join(ssh, "id_ecdsa" + ext),
                      os.path.join(ssh, "id_rsa" + ext))
        cls.etc = os.path.join(c.dir, "etc-mpi")
        os.makedirs(cls.etc)
        c.bind(c.launcher, ssh, "/root/.ssh", ro=True)
        c.bind(c.launcher, cls.etc, "/etc/mpi", ro=True)

    def hostfile(self, fmt):
        with open(os.path.join(self.etc, "hostfile"), "w") as f:
            f.write("".join(fmt % w for w in self.W))

    def test_open_mpi_hostfile_and_collectives(self):
        self.hostfile("%s slots=2\n")
        res = self.run_hr("-np", "4", "--hostfile", "/etc/mpi/hostfile",
                          COLLCHECK)
        self.check_collectives(res, 4, self.W)
        # One line says that host keys are not checked, for all hosts.
        warns = res.warning_lines()
        self.assertEqual(len(warns), 1, res.describe())
        self.assertIn("host keys are not checked (StrictHostKeyChecking no "
                      "in /root/.ssh/config)", warns[0])

    def test_intel_hostfile_and_pytorch_example(self):
        self.hostfile("%s:2\n")
        self.check_torch_example("-np", "4", "--hostfile",
                                 "/etc/mpi/hostfile")

    def test_no_np_with_the_default_hostfile(self):
        self.hostfile("%s slots=2\n")
        res = self.run_hr(COLLCHECK, OMPI_MCA_orte_default_hostfile=(
            "/etc/mpi/hostfile"))
        self.check_collectives(res, 4, self.W)

    def test_workers_that_come_up_late(self):
        # Both workers' names and sshd appear 3 s after horovodrun starts.
        c = self.cluster
        self.hostfile("%s slots=2\n")
        for w in self.W:
            c.stop_sshd(w)
            c.remove_name(w)
        try:
            t0 = time.monotonic()
            job = self.start("-np", "4", "--hostfile", "/etc/mpi/hostfile",
                             COLLCHECK)
            time.sleep(3)
            self.assertTrue(job.alive(), job.describe())
        finally:
            for w in self.W:
                c.add_name(w, w)
                c.start_sshd(w)
        self.assertEqual(job.wait(120), 0, job.describe())
        self.assertGreater(time.monotonic() - t0, 3)
        self.assertEqual(len(re.findall(r"collcheck: rank \d of 4: \d+ "
                                        r"checks, 0 failures", job.out)), 4,
                         job.describe())

    def test_startup_line_names_hosts_not_up(self):
        # On a terminal: a name that does not resolve, a host without sshd.
        c = self.cluster
        c.stop_sshd(self.W[1])
        self.addCleanup(c.start_sshd, self.W[1])
        t = Tmux(self, self.argv(["-np", "2", "-H", "job-worker-9:1,%s:1" %
                                  self.W[1], "--start-timeout", "4", "true"]),
                 self.env())
        want = ("horovodrun: 0/2 hosts ready; waiting for job-worker-9 "
                "(unresolved), %s (no sshd yet)" % self.W[1])
        t.wait(lambda rows: want in rows, timeout=20)
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertEqual(t.exit_code(rows), 255, rows)
        self.assertTrue(any("host job-worker-9: timed out after 4 s while "
                            "trying again: cannot resolve the name" in r
                            for r in rows), rows)

    def test_failures(self):
        self.hostfile("%s slots=2\n")
        self.check_failures(["-np", "4", "--hostfile", "/etc/mpi/hostfile"],
                            self.W[1])


class RsaKeyTest(ClusterCase):
    """An RSA user key against a current OpenSSH server, which takes only
    rsa-sha2 signatures: where libssh2 cannot make them, the error says
    so and what to do, and --rsh-agent ssh (OpenSSH's client) works."""

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(2, key_type="rsa")
        c.bind(c.launcher, c.ssh_dir(os.path.join(c.dir, "ssh")),
               "/root/.ssh", ro=True)

    def test_rsa_key(self):
        res = self.run_hr("-np", "2", "-H", "w0,w1", "hostname")
        if res.rc == 0:
            # A libssh2 with rsa-sha2 (1.11 and later).
            self.assertEqual(sorted(res.out_lines),
                             ["[0,0]<stdout>:w0", "[1,0]<stdout>:w1"])
        else:
            self.assertRc(res, 255)
            self.assertIn(ERR + "host w0: authentication failed for user "
                          "root; tried: /root/.ssh/id_rsa (rejected: this "
                          "libssh2 signs RSA keys with SHA-1, which OpenSSH "
                          "8.8 and later refuse; use an ed25519 or ECDSA "
                          "key, or --rsh-agent ssh)", res.err_lines)
        res = self.run_hr("-np", "2", "-H", "w0,w1", "--rsh-agent",
                          "ssh -o BatchMode=yes", COLLCHECK)
        self.check_collectives(res, 2, ["w0", "w1"])


class TrainingOperatorTest(ClusterCase):
    """training-operator v1 MPIJob: no sshd; pods reached with kubexec.sh
    (OMPI_MCA_plm_rsh_agent) by pod names that do not resolve."""

    W = ["job-worker-0", "job-worker-1"]

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(2, names=cls.W, hidden=cls.W)
        for w in cls.W:
            c.stop_sshd(w)
        etc = os.path.join(c.dir, "etc-mpi")
        os.makedirs(etc)
        remote_exec(os.path.join(etc, "kubexec.sh"), c, cls.W, *KUBEXEC)
        with open(os.path.join(etc, "hostfile"), "w") as f:
            f.write("".join("%s slots=2\n" % w for w in cls.W))
        c.bind(c.launcher, etc, "/etc/mpi", ro=True)

    def env(self, **extra):
        extra.setdefault("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh")
        return super().env(**extra)

    def test_collectives_and_pytorch_example(self):
        res = self.run_hr("-np", "4", "--hostfile", "/etc/mpi/hostfile",
                          COLLCHECK)
        self.check_collectives(res, 4, self.W)
        self.check_torch_example("-np", "4", "--hostfile",
                                 "/etc/mpi/hostfile")

    def test_pod_not_found(self):
        with open(os.path.join(self.tmp, "hosts"), "w") as f:
            f.write("job-worker-0 slots=1\njob-worker-9 slots=1\n")
        res = self.run_hr("-np", "2", "--hostfile", "hosts", "true")
        self.assertRc(res, 255)
        self.assertIn('error: pods "job-worker-9" not found', res.err)
        self.assertIn(ERR + "host job-worker-9: the rsh agent "
                      "'/etc/mpi/kubexec.sh' exited with status 1 before "
                      "hvd-agent there connected back", res.err)
        self.assertNothingLeft()

    def test_failures(self):
        self.check_failures(["-np", "4", "--hostfile", "/etc/mpi/hostfile"],
                            self.W[1])


class PbsTest(ClusterCase):
    """PBS: PBS_NODEFILE lists each host once per slot; hosts over SSH."""

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(2)
        c.bind(c.launcher, c.ssh_dir(os.path.join(c.dir, "ssh")),
               "/root/.ssh", ro=True)
        cls.nodefile = os.path.join(c.dir, "nodefile")
        with open(cls.nodefile, "w") as f:
            f.write("w0\nw0\nw1\nw1\n")
        cls.tmrsh = remote_exec(os.path.join(c.dir, "pbs_tmrsh"), c,
                                ["w0", "w1"], *PBS_TMRSH,
                                ">>%s 2>&1" % os.path.join(c.dir, "job.o1"))

    def test_collectives_and_training(self):
        res = self.run_hr(COLLCHECK, PBS_NODEFILE=self.nodefile)
        self.check_collectives(res, 4, ["w0", "w1"])
        res = self.run_hr(TRAIN, "--epochs", "2", PBS_NODEFILE=self.nodefile)
        self.check_train(res, 4)

    def test_failures(self):
        self.check_failures([], "w1", PBS_NODEFILE=self.nodefile)

    def test_pbs_tmrsh(self):
        # The agents' output does not come back through pbs_tmrsh: they
        # read the job's token in the (shared) working directory and send
        # everything on their connection.
        res = self.run_hr("--rsh-agent", self.tmrsh, COLLCHECK,
                          PBS_NODEFILE=self.nodefile)
        self.check_collectives(res, 4, ["w0", "w1"])
        self.check_failures(["--rsh-agent", self.tmrsh], "w1",
                            PBS_NODEFILE=self.nodefile)


class LsfTest(ClusterCase):
    """LSF: LSB_MCPU_HOSTS, and blaunch as the rsh agent (no sshd)."""

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(2, names=["lsf1", "lsf2"])
        for h in c.hosts:
            c.stop_sshd(h)
        cls.bin = os.path.join(c.dir, "lsf-bin")
        os.makedirs(cls.bin)
        remote_exec(os.path.join(cls.bin, "blaunch"), c, ["lsf1", "lsf2"],
                    *BLAUNCH)

    def env(self, **extra):
        return super().env(LSB_MCPU_HOSTS="lsf1 2 lsf2 2",
                           PATH=self.bin + ":" + os.environ["PATH"], **extra)

    def test_collectives_and_training(self):
        res = self.run_hr("--rsh-agent", "blaunch", COLLCHECK)
        self.check_collectives(res, 4, ["lsf1", "lsf2"])
        res = self.run_hr("--rsh-agent", "blaunch", TRAIN, "--epochs", "2")
        self.check_train(res, 4)

    def test_failures(self):
        self.check_failures(["--rsh-agent", "blaunch"], "lsf2")


class ElasticClusterTest(ClusterCase):
    """Elastic: a discovery script that prints bare names, as the MPI
    Operator v2beta1's /etc/mpi/discover_hosts.sh does, --slots-per-host,
    and a worker host deleted mid-training."""

    W = ["job-worker-0.job.default.svc", "job-worker-1.job.default.svc"]

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(2, names=cls.W)
        c.bind(c.launcher, c.ssh_dir(os.path.join(c.dir, "ssh")),
               "/root/.ssh", ro=True)
        cls.listing = os.path.join(c.dir, "workers")
        cls.script = os.path.join(c.dir, "discover_hosts.sh")
        with open(cls.script, "w") as f:
            f.write("#!/bin/sh\ncat %s\n" % cls.listing)
        os.chmod(cls.script, 0o755)

    def test_worker_deleted_mid_training(self):
        c = self.cluster
        with open(self.listing, "w") as f:
            f.write("".join(w + "\n" for w in self.W))
        job = self.start("-np", "4", "--min-np", "2", "--slots-per-host",
                         "2", "--host-discovery-script", self.script,
                         ELASTICRANK, "400", ER_STEP_MS="10")
        job.wait_line(lambda l: "ready" in l or "step" in l, count=1,
                      timeout=90)
        time.sleep(1)
        # The pod is deleted: the operator's script stops listing it.
        with open(self.listing, "w") as f:
            f.write(self.W[0] + "\n")
        c.remove_host(self.W[1])
        self.assertEqual(job.wait(180), 0, job.describe())
        done = re.findall(r"elasticrank: start (\d+) rank (\d+) of (\d+): "
                          r"(\d+) steps.*weight (\d+)", job.out)
        self.assertEqual(sorted((int(r), int(n), int(k), int(w))
                                for _, r, n, k, w in done),
                         [(0, 2, 400, 80200), (1, 2, 400, 80200)],
                         job.describe())
        self.assertNothingLeft()


if __name__ == "__main__":
    unittest.main()
