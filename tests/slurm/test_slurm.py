"""End to end on a real Slurm: sbatch and salloc jobs that call horovodrun.

The cluster (slurmfix.py) is two nodes, hvdnode1 and hvdnode2, each a
slurmd in a UTS namespace of its own on this machine. A batch script runs
on hvdnode1: horovodrun starts that node's agent itself and hvdnode2's
through srun. salloc runs its command here, on the "login node", so both
agents go through srun; with --tree-fanout 1, hvdnode2's srun is run by
hvdnode1's agent. Each test checks the hosts and slots taken from
the allocation, where the ranks ran and who started them, the output and
horovodrun's and Slurm's exit codes; and that nothing is left running.
Exits 77 (skipped) when not run as root.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import hvdtest
import slurmfix

ERR = hvdtest.ERR_PREFIX
TRAIN = os.environ.get("HVD_TRAIN",
                       os.path.join(hvdtest.BUILD, "examples", "train"))
COLLCHECK = os.environ.get("HVD_COLLCHECK",
                           os.path.join(hvdtest.BUILD, "tests", "runtime",
                                        "collcheck"))
README = os.path.join(hvdtest.ROOT, "README.md")
CLUSTER = None

# A rank that records where it runs and who started it, as
# DIR/rank.<rank>.json.
WHERE = r"""
import json, os, socket, sys
def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()
def ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
def environ(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return dict(v.decode().partition("=")[::2]
                    for v in f.read().split(b"\0") if v)
agent = os.getppid()
rec = {"env": dict(os.environ), "uts": socket.gethostname(),
       "parent": comm(agent), "grandparent": comm(ppid(agent)),
       "agent_step": environ(agent).get("SLURM_STEP_ID")}
with open(os.path.join(sys.argv[1], "rank.%s.json"
                       % os.environ["HOROVOD_RANK"]), "w") as f:
    json.dump(rec, f)
print("rank %s of %s on %s" % (os.environ["HOROVOD_RANK"],
                               os.environ["HOROVOD_SIZE"], rec["uts"]))
"""


def setUpModule():
    global CLUSTER
    try:
        CLUSTER = slurmfix.SlurmCluster().start()
    except slurmfix.FixtureError as e:
        if os.geteuid() != 0:
            sys.stderr.write("SKIP: %s\n" % e)
            sys.exit(77)
        raise


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


def readme_job_script():
    """The job script the README shows (its indented block with #SBATCH
    lines), as its lines."""
    with open(README) as f:
        text = f.read()
    for block in re.findall(r"\n\n((?:    .*\n)+)", text):
        if "#SBATCH" in block:
            return [l[4:] for l in block.splitlines()]
    raise AssertionError("README.md shows no job script (an indented block "
                         "with #SBATCH lines)")


class RealSlurm(hvdtest.TestCase):
    def slurm_env(self):
        env = CLUSTER.env(self.env())
        env["PATH"] = (os.path.dirname(hvdtest.HOROVODRUN) + os.pathsep +
                       env.get("PATH", "/usr/bin:/bin"))
        return env

    def script(self, body, directives):
        path = os.path.join(self.tmp, "job.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + "".join("#SBATCH %s\n" % d
                                            for d in directives) + body)
        os.chmod(path, 0o755)
        return path

    def sbatch(self, script, wait=True, timeout=120):
        """Submits script; returns (rc, job id, output path)."""
        out = os.path.join(self.tmp, "job.out")
        args = [CLUSTER.bin["sbatch"], "--parsable", "--output=" + out]
        if wait:
            args.append("--wait")
        p = subprocess.run(args + [script], env=self.slurm_env(),
                           cwd=self.tmp, capture_output=True, text=True,
                           timeout=timeout)
        job = p.stdout.strip().split(";")[0]
        self.assertRegex(job, r"^\d+$", "sbatch: %s%s" % (p.stderr,
                                                          CLUSTER.logs()))
        return p.returncode, job, out

    def read(self, path):
        with open(path, errors="replace") as f:
            return f.read()

    def where(self, d, n):
        recs = {}
        for r in range(n):
            with open(os.path.join(d, "rank.%d.json" % r)) as f:
                recs[r] = json.load(f)
        return recs

    def assertLeftNothing(self, comms=None):
        def left():
            return [p for p in hvdtest.marked_procs(self.marker)
                    if comms is None or p[1] in comms]
        hvdtest.wait_until(lambda: not left(), 15)
        self.assertEqual(left(), [])

    def test_readme_job_script(self):
        # The README's job script as it stands, with horovodrun on PATH and
        # ./train the example: two nodes of four tasks.
        lines = readme_job_script()
        self.assertEqual(lines[0], "#!/bin/sh")
        path = os.path.join(self.tmp, "job.sh")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.symlink(TRAIN, os.path.join(self.tmp, "train"))
        rc, job, out = self.sbatch(path, timeout=180)
        text = self.read(out)
        self.assertEqual(rc, 0, text + CLUSTER.logs())
        sums = dict(re.findall(r"^\[(\d+),\d+\]<stdout>:weights checksum: "
                               r"(\w+)$", text, re.M))
        self.assertEqual(sorted(sums, key=int), [str(r) for r in range(8)],
                         text)
        self.assertEqual(len(set(sums.values())), 1, text)
        self.assertIn("[0,0]<stdout>:final test accuracy:", text)
        self.assertIn("8 rank(s)", text)
        for r in range(8):
            self.assertRegex(text, r"\[%d,%d\]<stdout>:rank %d of 8, local "
                             r"rank %d of 4" % (r, r % 4, r, r % 4))
        info = CLUSTER.job_info(job)
        self.assertEqual((info.get("JobState"), info.get("ExitCode")),
                         ("COMPLETED", "0:0"), info)
        self.assertLeftNothing()

    def test_batch_hosts_from_allocation_ranks_through_srun(self):
        # No -np, no -H: four ranks, two per node, from the allocation.
        d = os.path.join(self.tmp, "where")
        os.mkdir(d)
        script = self.script(
            'horovodrun %s -c \'%s\' %s\necho "horovodrun exit $?"\n'
            % (hvdtest.PYTHON, WHERE.replace("'", "'\\''"), d),
            ["--nodes=2", "--ntasks-per-node=2"])
        rc, job, out = self.sbatch(script)
        text = self.read(out)
        self.assertEqual(rc, 0, text + CLUSTER.logs())
        self.assertIn("horovodrun exit 0", text)
        recs = self.where(d, 4)
        for r, rec in recs.items():
            env = rec["env"]
            node = slurmfix.NODES[r // 2]
            self.assertIn("[%d,%d]<stdout>:rank %d of 4 on %s" %
                          (r, r % 2, r, node), text)
            self.assertEqual((env["HOROVOD_SIZE"], env["HOROVOD_LOCAL_RANK"],
                              env["HOROVOD_LOCAL_SIZE"],
                              env["HOROVOD_HOSTNAME"], rec["uts"]),
                             ("4", str(r % 2), "2", node, node), rec)
            self.assertEqual(rec["parent"], "hvd-agent", rec)
            if node == slurmfix.NODES[0]:
                # The batch script's own node: its agent is horovodrun's
                # child, inside the batch step.
                self.assertEqual(rec["grandparent"], "horovodrun", rec)
            else:
                # The other node's agent is a job step of its own.
                self.assertEqual(rec["grandparent"], "slurmstepd", rec)
                self.assertRegex(rec["agent_step"] or "", r"^\d+$", rec)
        info = CLUSTER.job_info(job)
        self.assertEqual((info.get("JobState"), info.get("ExitCode")),
                         ("COMPLETED", "0:0"), info)
        self.assertLeftNothing()

    def test_salloc_collectives_and_output_files(self):
        # From the login node every agent is a job step; allreduce and the
        # rest across the two nodes match the serial reference.
        files = os.path.join(self.tmp, "logs")
        res = hvdtest.run([CLUSTER.bin["salloc"], "-Q", "--nodes=2",
                           "--ntasks-per-node=2", hvdtest.HOROVODRUN, "--log-level",
                           "debug", "--output-filename", files, COLLCHECK],
                          env=self.slurm_env(), cwd=self.tmp, timeout=300)
        self.assertEqual(res.rc, 0, res.describe() + CLUSTER.logs())
        done = re.findall(r"^\[(\d+),(\d+)\]<stdout>:collcheck: rank (\d+) "
                          r"of 4: (\d+) checks, (\d+) failures$", res.out,
                          re.M)
        self.assertEqual(sorted(int(r) for r, _, _, _, _ in done),
                         [0, 1, 2, 3], res.describe())
        for r, lr, r2, checks, failures in done:
            self.assertEqual((r, int(lr)), (r2, int(r) % 2))
            self.assertGreater(int(checks), 150)
            self.assertEqual(int(failures), 0, res.describe())
        for r in range(4):
            self.assertIn("[%d,%d]<stderr>:hvd: debug: rank %d: transport: "
                          "hierarchical (2 hosts;" % (r, r % 2, r), res.err)
            with open(os.path.join(files, "rank.%d" % r, "stdout")) as f:
                self.assertRegex(f.read(), r"collcheck: rank %d of 4: \d+ "
                                 r"checks, 0 failures" % r)
        self.assertLeftNothing()

    def test_tree_through_srun(self):
        # --tree-fanout 1: horovodrun starts hvdnode1's agent through srun,
        # and that agent starts hvdnode2's as a job step of its own.
        base = [CLUSTER.bin["salloc"], "-Q", "--nodes=2",
                "--ntasks-per-node=2", hvdtest.HOROVODRUN, "--verbose",
                "--tree-fanout", "1"]
        res = hvdtest.run(base + [COLLCHECK], env=self.slurm_env(),
                          cwd=self.tmp, timeout=300)
        self.assertEqual(res.rc, 0, res.describe() + CLUSTER.logs())
        self.assertIn("tree launch: horovodrun starts the agents of 1 hosts, "
                      "which start those of the other 1 (--tree-fanout 1)",
                      res.err)
        for r in range(4):
            self.assertRegex(res.out, r"collcheck: rank %d of 4: \d+ checks, "
                             r"0 failures" % r, res.describe())
            # The agents carry the ranks' rendezvous, through two sruns
            # for hvdnode2's.
            self.assertIn("rendezvous: rank %d registered from host "
                          "hvdnode%d, through its agent" % (r, 1 + r // 2),
                          res.err)
        # While the ranks run: one srun is horovodrun's, the other the
        # agent's (each srun also has a helper child of its own); a
        # SIGKILL of horovodrun leaves nothing.
        job = hvdtest.Job(base + ["sh", "-c", "echo up; exec sleep 120"],
                          env=self.slurm_env(), cwd=self.tmp)
        job.wait_line(lambda l: l.endswith("<stdout>:up"), count=4,
                      timeout=60)
        parents = sorted(
            hvdtest._read("/proc/%d/comm" % int(
                hvdtest._read("/proc/%d/stat" % pid).rsplit(b")", 1)[1]
                .split()[1])).decode().strip()
            for pid, comm, _ in hvdtest.marked_procs(self.marker)
            if comm == "srun")
        self.assertEqual([p for p in parents if p != "srun"],
                         ["horovodrun", "hvd-agent"], job.describe())
        hr = [pid for pid, comm, _ in hvdtest.marked_procs(self.marker)
              if comm == "horovodrun"]
        self.assertEqual(len(hr), 1)
        os.kill(hr[0], signal.SIGKILL)
        self.assertLeftNothing(("sleep", "hvd-agent", "horovodrun", "srun"))
        job.wait(30)

    def test_failing_rank_fails_the_job(self):
        # Rank 3 (on hvdnode2, through srun) exits 3 while the others
        # sleep: the job stops at once with horovodrun's code and summary,
        # and Slurm records the failure.
        script = self.script(
            "horovodrun sh -c 'echo up; if [ $HOROVOD_RANK = 3 ]; then "
            "sleep 0.5; exit 3; fi; exec sleep 120'\nrc=$?\n"
            'echo "horovodrun exit $rc"\nexit $rc\n',
            ["--nodes=2", "--ntasks-per-node=2"])
        t0 = time.monotonic()
        rc, job, out = self.sbatch(script)
        elapsed = time.monotonic() - t0
        text = self.read(out)
        self.assertEqual(rc, 3, text + CLUSTER.logs())
        self.assertLess(elapsed, 60, text)
        self.assertIn("horovodrun exit 3", text)
        self.assertIn(ERR + "rank 3 (host hvdnode2, local_rank 1) exited with "
                      "code 3; the job was stopped", text)
        info = CLUSTER.job_info(job)
        self.assertEqual((info.get("JobState"), info.get("ExitCode")),
                         ("FAILED", "3:0"), info)
        self.assertLeftNothing()

    def test_scancel_stops_everything(self):
        script = self.script(
            "horovodrun sh -c 'echo up; exec sleep 120'\n",
            ["--nodes=2", "--ntasks-per-node=2"])
        rc, job, out = self.sbatch(script, wait=False)
        self.assertEqual(rc, 0)
        up = hvdtest.wait_until(
            lambda: os.path.exists(out) and self.read(out).count(
                "<stdout>:up") == 4, 60)
        self.assertTrue(up, (self.read(out) if os.path.exists(out) else "") +
                        CLUSTER.logs())
        subprocess.run([CLUSTER.bin["scancel"], job], env=self.slurm_env(),
                       check=True)
        self.assertLeftNothing()
        state = hvdtest.wait_until(
            lambda: CLUSTER.job_info(job).get("JobState") == "CANCELLED", 15)
        self.assertTrue(state, CLUSTER.job_info(job))

    def test_agent_killed_in_its_step(self):
        # An agent dies (SIGKILL) inside its srun step: srun ends the step,
        # horovodrun names the host and stops the job.
        job = hvdtest.Job([CLUSTER.bin["salloc"], "-Q", "--nodes=2",
                           "--ntasks-per-node=2", hvdtest.HOROVODRUN, "sh",
                           "-c", "echo up; exec sleep 120"],
                          env=self.slurm_env(), cwd=self.tmp)
        job.wait_line(lambda l: l.endswith("<stdout>:up"), count=4,
                      timeout=60)
        agents = {}
        for pid, comm, _ in hvdtest.marked_procs(self.marker):
            if comm == "hvd-agent":
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = dict(v.partition(b"=")[::2]
                               for v in f.read().split(b"\0"))
                agents[env.get(b"SLURMD_NODENAME", b"").decode()] = pid
        self.assertEqual(sorted(agents), list(slurmfix.NODES), agents)
        os.kill(agents["hvdnode2"], signal.SIGKILL)
        rc = job.wait(30)
        self.assertEqual(rc, 1, job.describe())
        self.assertRegex(job.err, ERR + r"host hvdnode2: hvd-agent exited "
                         r"with status \d+ with 2 ranks still running")
        self.assertLeftNothing()

    def test_sigkill_horovodrun_in_salloc(self):
        # horovodrun killed with SIGKILL: its srun children lose their
        # stdin, the agents see the channel close and stop their ranks.
        pidfile = os.path.join(self.tmp, "hr.pid")
        job = hvdtest.Job([CLUSTER.bin["salloc"], "-Q", "--nodes=2",
                           "--ntasks-per-node=2", "sh", "-c",
                           'horovodrun sh -c "echo up; exec sleep 120" & '
                           'echo $! > %s; wait' % pidfile],
                          env=self.slurm_env(), cwd=self.tmp)
        job.wait_line(lambda l: l.endswith("<stdout>:up"), count=4,
                      timeout=60)
        with open(pidfile) as f:
            os.kill(int(f.read()), signal.SIGKILL)
        self.assertLeftNothing(("sleep", "hvd-agent", "horovodrun"))
        job.wait(30)


if __name__ == "__main__":
    hvdtest.main()
