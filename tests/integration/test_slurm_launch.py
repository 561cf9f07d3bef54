"""Integration tests: horovodrun inside a (fake) Slurm allocation.

A fake srun, first on PATH, checks the arguments horovodrun gives it,
records them and runs the agent here, as srun would on the named node.
The allocation names 127.0.0.2 and 127.0.0.3: horovodrun counts them as
other hosts, so their agents go through srun, yet all runs on this machine.
"""

import json
import os
import stat
import sys

import hvdtest
from hvdtest import py

ERR = hvdtest.ERR_PREFIX

FAKE_SRUN = r"""#!%s
import json, os, sys
args = sys.argv[1:]
need = ["--nodes=1", "--ntasks=1", "--export=ALL", "--kill-on-bad-exit=1",
        "--whole", "--overlap", "--unbuffered"]
nodes = [a[len("--nodelist="):] for a in args if a.startswith("--nodelist=")]
prog = args[-1] if args else ""
if (any(n not in args for n in need) or len(nodes) != 1 or
        not os.path.isabs(prog) or not os.access(prog, os.X_OK) or
        any(not a.startswith("--") for a in args[:-1])):
    sys.stderr.write("fake srun: bad arguments %%r\n" %% (args,))
    sys.exit(1)
with open(os.environ["FAKE_SRUN_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
with open("/proc/%%d/comm" %% os.getppid()) as f:
    parent = f.read().strip()
with open(os.environ["FAKE_SRUN_LOG"] + ".parents", "a") as f:
    f.write("%%s %%s\n" %% (nodes[0], parent))
os.environ.update(SLURM_PROCID="0", SLURM_NTASKS="1", SLURM_STEP_ID="0",
                  SLURMD_NODENAME=nodes[0])
os.execv(prog, [prog])
""" % sys.executable

# A rank that writes its environment to DIR/env.<rank>.json.
DUMP = r"""
import json, os, sys
out = os.path.join(sys.argv[1], "env.%s.json" % os.environ["HOROVOD_RANK"])
with open(out, "w") as f:
    json.dump(dict(os.environ), f)
print("rank %s on %s" % (os.environ["HOROVOD_RANK"],
                         os.environ["HOROVOD_HOSTNAME"]))
"""

class SlurmLaunch(hvdtest.TestCase):
    def setUp(self):
        super().setUp()
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        srun = os.path.join(self.bin, "srun")
        with open(srun, "w") as f:
            f.write(FAKE_SRUN)
        os.chmod(srun, stat.S_IRWXU)
        self.log = os.path.join(self.tmp, "srun.log")

    def alloc_env(self, nodes="127.0.0.[2-3]", tasks="2,1",
                  var="SLURM_JOB_NODELIST", path=None, **extra):
        env = self.env(**extra)  # without any allocation around the tests
        if nodes is not None:
            env[var] = nodes
        if tasks is not None:
            env["SLURM_TASKS_PER_NODE"] = tasks
        env["FAKE_SRUN_LOG"] = self.log
        env["PATH"] = path if path is not None else (
            self.bin + os.pathsep + env.get("PATH", "/usr/bin:/bin"))
        return env

    def srun_calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(l) for l in f]

    def nodelists(self):
        return sorted(a[len("--nodelist="):] for c in self.srun_calls()
                      for a in c if a.startswith("--nodelist="))

    def envs(self, n):
        out = []
        for r in range(n):
            with open(os.path.join(self.tmp, "env.%d.json" % r)) as f:
                out.append(json.load(f))
        return out

    def test_hosts_and_slots_from_allocation(self):
        # No -H and no -np: the allocation's 2+1 tasks.
        res = self.run_hr(*py(DUMP), self.tmp, env=self.alloc_env())
        self.assertEqual(res.rc, 0, res.describe())
        envs = self.envs(3)
        got = [(e["HOROVOD_HOSTNAME"], e["HOROVOD_SIZE"],
                e["HOROVOD_LOCAL_RANK"], e["HOROVOD_LOCAL_SIZE"],
                e["HOROVOD_CROSS_RANK"]) for e in envs]
        self.assertEqual(got, [("127.0.0.2", "3", "0", "2", "0"),
                               ("127.0.0.2", "3", "1", "2", "0"),
                               ("127.0.0.3", "3", "0", "1", "1")])
        # Each remote agent went through srun, once, on its own node; the
        # agent is the hvd-agent next to horovodrun.
        self.assertEqual(self.nodelists(), ["127.0.0.2", "127.0.0.3"])
        agent = os.path.realpath(hvdtest.HVD_AGENT)
        for c in self.srun_calls():
            self.assertEqual(os.path.realpath(c[-1]), agent)
        # Ranks get horovodrun's environment, not that of the agent's step.
        self.assertEqual([e.get("SLURMD_NODENAME") for e in envs],
                         [None, None, None])
        self.assertEqual([e.get("SLURM_JOB_NODELIST") for e in envs],
                         ["127.0.0.[2-3]"] * 3)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(per, {0: [(0, "rank 0 on 127.0.0.2")],
                               1: [(1, "rank 1 on 127.0.0.2")],
                               2: [(0, "rank 2 on 127.0.0.3")]})
        self.assertEqual(res.error_lines(), [], res.describe())

    def test_np_and_old_nodelist_name_and_local_host(self):
        # SLURM_NODELIST (older Slurm); this host runs its agent directly;
        # -np 2 fills localhost's slot and one of 127.0.0.2's.
        res = self.run_hr("-np", 2, *py(DUMP), self.tmp,
                          env=self.alloc_env(nodes="localhost,127.0.0.2",
                                             tasks="1(x2)",
                                             var="SLURM_NODELIST"))
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual([e["HOROVOD_HOSTNAME"] for e in self.envs(2)],
                         ["localhost", "127.0.0.2"])
        self.assertEqual(self.nodelists(), ["127.0.0.2"])

    def elastic_job(self, *opts):
        """-np 4 --min-np 2 on the allocation's two hosts (a fixed set of
        hosts that tolerates faults): the process that started as rank 3
        dies on 127.0.0.3, and the ranks of 127.0.0.2 reset and finish at
        size 2. Returns which process ran each host's srun."""
        res = self.run_hr("-np", "4", "--min-np", "2", *opts,
                          os.environ["HVD_ELASTICRANK"], "300",
                          env=self.alloc_env(tasks="2(x2)",
                                             ER_FAIL="3:20:kill",
                                             ER_STEP_MS="2"),
                          timeout=120)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(self.nodelists(), ["127.0.0.2", "127.0.0.3"])
        for start in (0, 1):
            self.assertIn("elasticrank: start %d rank %d of 2: 300 steps"
                          % (start, start), res.out, res.describe())
        self.assertIn("host 127.0.0.3 is blacklisted", res.err,
                      res.describe())
        with open(self.log + ".parents") as f:
            return sorted(f.read().splitlines())

    def test_elastic_job_over_srun(self):
        self.assertEqual(self.elastic_job(), ["127.0.0.2 horovodrun",
                                              "127.0.0.3 horovodrun"])

    def test_elastic_job_through_the_tree(self):
        # --tree-fanout 1: horovodrun runs 127.0.0.2's srun, and that
        # agent runs 127.0.0.3's.
        self.assertEqual(self.elastic_job("--tree-fanout", "1"),
                         ["127.0.0.2 horovodrun", "127.0.0.3 hvd-agent"])

    def test_np_over_allocation(self):
        res = self.run_hr("-np", 4, "true", env=self.alloc_env())
        self.assertEqual(res.rc, 2, res.describe())
        self.assertIn("-np 4 is more than the 3 slots", res.err)
        self.assertEqual(self.srun_calls(), [])

    def test_failing_rank_summary(self):
        script = ("import os, sys\n"
                  "sys.exit(7 if os.environ['HOROVOD_RANK'] == '2' else 0)")
        res = self.run_hr(*py(script), env=self.alloc_env())
        self.assertEqual(res.rc, 7, res.describe())
        self.assertEqual(len(res.error_lines()), 1, res.describe())
        self.assertTrue(res.error_lines()[0].startswith(
            ERR + "rank 2 (host 127.0.0.3, local_rank 0) exited with code 7"),
            res.describe())

    def test_launcher_ssh_override(self):
        # Over SSH to a port where nothing listens: pre-flight fails, and
        # srun is never called.
        res = self.run_hr("--launcher", "ssh", "-p", 1, "--start-timeout", 10,
                          "true", env=self.alloc_env())
        self.assertEqual(res.rc, 255, res.describe())
        self.assertEqual(self.srun_calls(), [])
        lines = res.error_lines()
        self.assertEqual(len(lines), 2, res.describe())
        for l in lines:
            self.assertIn("(port 1); is sshd running there?", l)

    def test_launcher_slurm_with_hosts(self):
        # -H inside an allocation still starts remote agents through srun.
        res = self.run_hr("-np", 2, "-H", "127.0.0.3:2", "--launcher",
                          "slurm", *py(DUMP), self.tmp,
                          env=self.alloc_env())
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(self.nodelists(), ["127.0.0.3"])

    def test_no_srun_on_path(self):
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        res = self.run_hr("true", env=self.alloc_env(path=empty))
        self.assertEqual(res.rc, 2, res.describe())
        self.assertEqual(len(res.error_lines()), 1, res.describe())
        self.assertIn("srun", res.error_lines()[0])

    def test_launcher_slurm_outside_allocation(self):
        res = self.run_hr("-np", 1, "--launcher", "slurm", "true",
                          env=self.alloc_env(nodes=None, tasks=None))
        self.assertEqual(res.rc, 2, res.describe())
        self.assertIn("SLURM_JOB_NODELIST", res.error_lines()[0])

    def test_np_still_required_outside_allocation(self):
        res = self.run_hr("true", env=self.alloc_env(nodes=None, tasks=None))
        self.assertEqual(res.rc, 2, res.describe())
        self.assertIn("-np is required", res.err)

    def test_bad_launcher(self):
        res = self.run_hr("--launcher", "pbs", "true", env=self.alloc_env())
        self.assertEqual(res.rc, 2, res.describe())
        self.assertIn("--launcher must be slurm, ssh or rsh", res.err)

    def test_malformed_variables(self):
        cases = [
            (dict(nodes="n[3-1]"), "SLURM_JOB_NODELIST: "),
            (dict(nodes="n[1-2", var="SLURM_NODELIST"), "SLURM_NODELIST: "),
            (dict(nodes=""), "SLURM_JOB_NODELIST: "),
            (dict(tasks="2(x0)"), "SLURM_TASKS_PER_NODE: "),
            (dict(tasks="two"), "SLURM_TASKS_PER_NODE: "),
            (dict(tasks="1(x3)"),
             "SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE disagree: "),
            (dict(nodes="a,a", tasks="1,1"), "SLURM_JOB_NODELIST: "),
        ]
        for kw, want in cases:
            with self.subTest(**kw):
                res = self.run_hr("true", env=self.alloc_env(**kw))
                self.assertEqual(res.rc, 2, res.describe())
                lines = res.error_lines()
                self.assertEqual(len(lines), 1, res.describe())
                self.assertTrue(lines[0].startswith(ERR + want),
                                res.describe())
        self.assertEqual(self.srun_calls(), [])

    def test_help_and_man_page(self):
        res = self.run_hr("--help", env=self.alloc_env())
        self.assertEqual(res.rc, 0)
        self.assertIn("--launcher", res.out)
        with open(hvdtest.MANPAGE) as f:
            man = f.read()
        for word in ("launcher", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                     "SLURM_TASKS_PER_NODE", "srun"):
            self.assertIn(word, man)


if __name__ == "__main__":
    hvdtest.main()
