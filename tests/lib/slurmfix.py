"""A real two-node Slurm cluster on this machine, for tests.

SlurmCluster starts Debian's munged, slurmctld and two slurmd (slurm-wlm
22.05) from a throwaway directory: its own munge key and socket, its own
slurm.conf (passed to clients as SLURM_CONF), state and spool directories,
and free TCP ports on loopback. Each daemon runs in a UTS namespace of its
own (unshare -u) with the host name of the node it plays, hvdnode1 or
hvdnode2, so slurmd finds its node by host name and every process of a job
step (slurmstepd, hvd-agent, the ranks) sees that name: to horovodrun the
nodes are two machines. The names resolve to 127.0.0.1 through a marked
line added to /etc/hosts while the cluster runs. Nothing leaves loopback.
Needs root (slurmd starts steps as the submitting user). Standard library
only.

    with SlurmCluster() as c:
        subprocess.run(["sbatch", "--wait", "job.sh"], env=c.env(os.environ))
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

NODES = ("hvdnode1", "hvdnode2")
CONTROLLER = "hvdctl"
CPUS = 4  # per node; more than the machine has (config_overrides)
HOSTS_FILE = "/etc/hosts"
HOSTS_TAG = "# hvdtest-slurm"
JOB_VARS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_TASKS_PER_NODE",
            "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_NTASKS",
            "SLURM_NPROCS", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
DAEMONS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "squeue",
           "scancel", "sbatch", "salloc", "srun", "unshare")


class FixtureError(RuntimeError):
    """The cluster could not be set up; the message says what is wrong."""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find(name):
    for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def _tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no %s)\n" % path


def _pids_named(comm):
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % name) as f:
                if f.read().strip() == comm:
                    found.add(int(name))
        except OSError:
            pass
    return found


class SlurmCluster:
    def __init__(self):
        self.dir = None
        self.procs = []
        self.bin = {}
        self.hosts_added = False
        self.stepds_before = set()

    # --- setup -------------------------------------------------------

    def start(self):
        if os.geteuid() != 0:
            raise FixtureError("the Slurm tests need root (slurmd starts "
                               "job steps as the submitting user)")
        for name in DAEMONS:
            self.bin[name] = _find(name)
        missing = [n for n, p in self.bin.items() if p is None]
        if missing:
            raise FixtureError("missing %s; run scripts/install-deps.sh "
                               "(packages slurmctld slurmd slurm-client "
                               "munge)" % ", ".join(missing))
        self.stepds_before = _pids_named("slurmstepd")
        self.dir = tempfile.mkdtemp(prefix="hvdslurm-")
        os.chmod(self.dir, 0o755)
        for sub in ("munge", "state", "spool", "log"):
            os.mkdir(os.path.join(self.dir, sub), 0o755)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self._start_munge()
        self._write_conf()
        self._add_hosts()
        self._spawn(CONTROLLER, [self.bin["slurmctld"], "-D", "-i", "-f",
                                 self.conf], "slurmctld")
        for node in NODES:
            self._spawn(node, [self.bin["slurmd"], "-D", "-f", self.conf],
                        "slurmd-" + node)
        self._wait_idle()
        return self

    def _path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _start_munge(self):
        key = self._path("munge", "key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self.munge_socket = self._path("munge", "socket")
        self._popen([self.bin["munged"], "-F", "-f",
                     "--socket=" + self.munge_socket, "--key-file=" + key,
                     "--log-file=" + self._path("log", "munged.log"),
                     "--pid-file=" + self._path("munge", "pid"),
                     "--seed-file=" + self._path("munge", "seed")], "munged")
        self._wait(lambda: os.path.exists(self.munge_socket), 10,
                   "munged did not create its socket",
                   self._path("log", "munged.log"))

    def _write_conf(self):
        d = self.dir
        lines = [
            "ClusterName=hvdtest",
            "SlurmctldHost=%s(127.0.0.1)" % CONTROLLER,
            "SlurmctldPort=%d" % _free_port(),
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s" % self.munge_socket,
            "StateSaveLocation=%s/state" % d,
            "SlurmdSpoolDir=%s/spool/%%n" % d,
            "SlurmctldPidFile=%s/slurmctld.pid" % d,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % d,
            "SlurmctldLogFile=%s/log/slurmctld.log" % d,
            "SlurmdLogFile=%s/log/slurmd-%%n.log" % d,
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            "KillWait=5",
            "MinJobAge=600",
        ]
        for node in NODES:
            lines.append("NodeName=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d "
                         "State=UNKNOWN" % (node, _free_port(), CPUS))
        lines.append("PartitionName=hvd Nodes=ALL Default=YES "
                     "MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _add_hosts(self):
        try:
            missing = [n for n in NODES + (CONTROLLER,)
                       if socket.gethostbyname(n) != "127.0.0.1"]
        except OSError:
            missing = list(NODES + (CONTROLLER,))
        if not missing:
            return
        try:
            with open(HOSTS_FILE, "a") as f:
                f.write("127.0.0.1 %s %s\n" % (" ".join(NODES + (CONTROLLER,)),
                                               HOSTS_TAG))
        except OSError as e:
            raise FixtureError("cannot add the test nodes to %s: %s" %
                               (HOSTS_FILE, e))
        self.hosts_added = True

    def _popen(self, args, log):
        out = open(self._path("log", log + ".out"), "wb")
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, env=self.env(os.environ))
        out.close()
        self.procs.append((log, p))
        return p

    def _spawn(self, hostname, args, log):
        """Runs args in a new UTS namespace whose host name is hostname."""
        self._popen([self.bin["unshare"], "-u", "/bin/sh", "-c",
                     'hostname "$0" && exec "$@"', hostname] + args, log)

    def _wait(self, pred, timeout, what, log=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            for name, p in self.procs:
                if p.poll() is not None:
                    raise FixtureError("%s exited with %d:\n%s%s" % (
                        name, p.returncode,
                        _tail(self._path("log", name + ".out")),
                        _tail(self._path("log", name + ".log"))))
            time.sleep(0.1)
        raise FixtureError("%s within %d s\n%s" % (what, timeout,
                                                   _tail(log) if log else ""))

    def _wait_idle(self):
        def idle():
            p = subprocess.run([self.bin["sinfo"], "-h", "-N", "-o", "%T"],
                               capture_output=True, text=True,
                               env=self.env(os.environ))
            states = p.stdout.split()
            return len(states) == len(NODES) and all(
                s == "idle" for s in states)
        self._wait(idle, 60, "the nodes did not come up idle",
                   self._path("log", "slurmctld.log"))

    # --- use ---------------------------------------------------------

    def env(self, base):
        """base (a mapping) with this cluster's SLURM_CONF and without the
        variables of any allocation around the tests."""
        env = dict(base)
        for k in JOB_VARS:
            env.pop(k, None)
        if self.dir is not None:
            env["SLURM_CONF"] = self.conf
        return env

    def job_info(self, job_id):
        """scontrol's key=value fields of a job, as a dict."""
        p = subprocess.run([self.bin["scontrol"], "-o", "show", "job",
                            str(job_id)], capture_output=True, text=True,
                           env=self.env(os.environ))
        info = {}
        for field in p.stdout.split():
            k, _, v = field.partition("=")
            info[k] = v
        return info

    def jobs(self):
        p = subprocess.run([self.bin["squeue"], "-h", "-o", "%i"],
                           capture_output=True, text=True,
                           env=self.env(os.environ))
        return p.stdout.split()

    def logs(self):
        """The tails of the daemons' logs, for a failure message."""
        return "".join("--- %s\n%s" % (n, _tail(self._path("log", n)))
                       for n in ["slurmctld.log"] +
                       ["slurmd-%s.log" % n for n in NODES])

    # --- teardown ----------------------------------------------------

    def stop(self):
        if self.dir is None:
            return
        env = self.env(os.environ)
        if self.bin.get("scancel") and self.jobs():
            subprocess.run([self.bin["scancel"], "--full", "--user=root"],
                           env=env, capture_output=True)
            deadline = time.monotonic() + 15
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for _, p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in _pids_named("slurmstepd") - self.stepds_before:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.hosts_added:
            with open(HOSTS_FILE) as f:
                kept = [l for l in f if not l.rstrip().endswith(HOSTS_TAG)]
            with open(HOSTS_FILE, "w") as f:
                f.writelines(kept)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
