"""Integration tests: the env contract every rank gets, and the rank plan."""

import json
import os
import re

import hvdtest
from hvdtest import py

# A rank that records its environment, and the command lines of its parent
# (hvd-agent) and grandparent (horovodrun), in DIR/env.<rank>.json.
DUMP = r"""
import json, os, sys
def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().decode("utf-8", "replace")
def parent(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
agent = os.getppid()
launcher = parent(agent)
d = {"env": dict(os.environ), "agent_cmd": cmdline(agent),
     "launcher_cmd": cmdline(launcher), "agent_comm": open(
         "/proc/%d/comm" % agent).read().strip(),
     "launcher_comm": open("/proc/%d/comm" % launcher).read().strip()}
out = os.path.join(sys.argv[1], "env.%s.json" % os.environ["HOROVOD_RANK"])
with open(out + ".tmp", "w") as f:
    json.dump(d, f)
os.rename(out + ".tmp", out)
print("rank %s done" % os.environ["HOROVOD_RANK"])
""" + r"""
import socket
try:
    sk = socket.socket()
    sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sk.bind(("", int(os.environ["MASTER_PORT"])))
    sk.close()
    bindable = True
except OSError as e:
    bindable = str(e)
with open(os.path.join(sys.argv[1], "bind.%s" % os.environ["HOROVOD_RANK"]),
          "w") as f:
    f.write(json.dumps(bindable))
"""

CONTRACT = ["HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
            "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
            "HOROVOD_HOSTNAME", "HOROVOD_RENDEZVOUS_ADDR",
            "HOROVOD_RENDEZVOUS_PORT", "HOROVOD_SECRET_KEY", "RANK",
            "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
            "MASTER_PORT", "PYTHONUNBUFFERED"]


class EnvTest(hvdtest.TestCase):

    def dump_job(self, *hr_opts, np, extra_env=None, outdir=None):
        outdir = outdir or self.tmp
        env = self.env(**(extra_env or {}))
        res = self.run_hr("-np", np, *hr_opts, *py(DUMP), outdir, env=env)
        self.assertRc(res, 0)
        self.assertEqual(res.error_lines(), [], res.describe())
        dumps = {}
        for r in range(np):
            path = os.path.join(outdir, "env.%d.json" % r)
            self.assertTrue(os.path.exists(path),
                            "rank %d left no env dump\n%s" %
                            (r, res.describe()))
            with open(path) as f:
                dumps[r] = json.load(f)
        self.assertEqual(sorted(n for n in os.listdir(outdir)
                                if n.startswith("env.")),
                         sorted("env.%d.json" % r for r in range(np)),
                         "unexpected ranks ran")
        return res, dumps

    def check_plan(self, dumps, expect):
        """expect: {rank: (host, local_rank, local_size, cross_rank,
        cross_size)}"""
        size = len(expect)
        for r, (host, lr, ls, cr, cs) in expect.items():
            e = dumps[r]["env"]
            got = {k: e.get(k) for k in CONTRACT}
            want = {
                "HOROVOD_RANK": str(r), "RANK": str(r),
                "HOROVOD_SIZE": str(size), "WORLD_SIZE": str(size),
                "HOROVOD_LOCAL_RANK": str(lr), "LOCAL_RANK": str(lr),
                "HOROVOD_LOCAL_SIZE": str(ls), "LOCAL_WORLD_SIZE": str(ls),
                "HOROVOD_CROSS_RANK": str(cr), "HOROVOD_CROSS_SIZE": str(cs),
                "HOROVOD_HOSTNAME": host,
            }
            for k, v in want.items():
                self.assertEqual(got[k], v, "rank %d: %s" % (r, k))

    def test_four_ranks_contract(self):
        uniq = "user-value-" + self.marker
        res, dumps = self.dump_job(np=4, extra_env={
            "HVDTEST_USER_VAR": uniq, "HVDTEST_SPACES": "a b  c=d"})
        self.check_plan(dumps, {r: ("localhost", r, 4, 0, 1)
                                for r in range(4)})
        secrets = set()
        master_ports = set()
        rdv = set()
        for r in range(4):
            e = dumps[r]["env"]
            for k in CONTRACT:
                self.assertIn(k, e, "rank %d lacks %s" % (r, k))
            self.assertEqual(e["PYTHONUNBUFFERED"], "1")
            self.assertEqual(e["HOROVOD_RENDEZVOUS_ADDR"], "127.0.0.1")
            self.assertRegex(e["HOROVOD_RENDEZVOUS_PORT"], r"^[1-9]\d*$")
            self.assertLess(int(e["HOROVOD_RENDEZVOUS_PORT"]), 65536)
            self.assertEqual(e["MASTER_ADDR"], "localhost")
            self.assertRegex(e["MASTER_PORT"], r"^[1-9]\d*$")
            self.assertLess(int(e["MASTER_PORT"]), 65536)
            self.assertRegex(e["HOROVOD_SECRET_KEY"], r"^[0-9a-fA-F]{64}$")
            secrets.add(e["HOROVOD_SECRET_KEY"])
            master_ports.add(e["MASTER_PORT"])
            rdv.add((e["HOROVOD_RENDEZVOUS_ADDR"],
                     e["HOROVOD_RENDEZVOUS_PORT"]))
            # The user's environment is passed through unchanged.
            self.assertEqual(e.get("HVDTEST_USER_VAR"), uniq)
            self.assertEqual(e.get("HVDTEST_SPACES"), "a b  c=d")
            self.assertEqual(e.get("PATH"), os.environ.get("PATH"))
            self.assertEqual(e.get(hvdtest.MARK_VAR), self.marker)
        self.assertEqual(len(secrets), 1, "ranks got different secrets")
        self.assertEqual(len(master_ports), 1, "MASTER_PORT differs")
        self.assertEqual(len(rdv), 1, "rendezvous address differs")
        self.assertNotEqual(dumps[0]["env"]["MASTER_PORT"],
                            dumps[0]["env"]["HOROVOD_RENDEZVOUS_PORT"])
        # MASTER_PORT is free on rank 0's host: torch binds it there.
        with open(os.path.join(self.tmp, "bind.0")) as f:
            self.assertEqual(json.load(f), True, "cannot bind MASTER_PORT")
        self.assertEqual(sorted(res.out_lines),
                         sorted("[%d,%d]<stdout>:rank %d done" % (r, r, r)
                                for r in range(4)))

    def test_secret_only_in_env(self):
        d1 = os.path.join(self.tmp, "j1")
        d2 = os.path.join(self.tmp, "j2")
        os.mkdir(d1)
        os.mkdir(d2)
        res1, dumps1 = self.dump_job("--verbose", np=2, outdir=d1)
        res2, dumps2 = self.dump_job(np=2, outdir=d2)
        s1 = dumps1[0]["env"]["HOROVOD_SECRET_KEY"]
        s2 = dumps2[0]["env"]["HOROVOD_SECRET_KEY"]
        self.assertEqual(dumps1[1]["env"]["HOROVOD_SECRET_KEY"], s1)
        self.assertEqual(dumps2[1]["env"]["HOROVOD_SECRET_KEY"], s2)
        self.assertNotEqual(s1, s2, "two jobs got the same secret")
        for res, dumps, s in ((res1, dumps1, s1), (res2, dumps2, s2)):
            for r, d in dumps.items():
                self.assertEqual(d["agent_comm"], "hvd-agent")
                self.assertEqual(d["launcher_comm"], "horovodrun")
                for what in ("agent_cmd", "launcher_cmd"):
                    self.assertNotIn(s.lower(), d[what].lower(),
                                     "secret on the command line of the "
                                     + what)
            for stream in (res.out_bytes, res.err_bytes):
                self.assertNotIn(s.lower().encode(), stream.lower())
        # --verbose must still print something, and still no secret.
        self.assertNotEqual(res1.err, "", "--verbose printed nothing")

    def test_contract_overrides_users_values(self):
        res, dumps = self.dump_job(np=2, extra_env={
            "HOROVOD_RANK": "99", "RANK": "99", "WORLD_SIZE": "7",
            "HOROVOD_SECRET_KEY": "00" * 32, "MASTER_PORT": "1",
            "PYTHONUNBUFFERED": "0", "HOROVOD_HOSTNAME": "elsewhere"})
        self.check_plan(dumps, {0: ("localhost", 0, 2, 0, 1),
                                1: ("localhost", 1, 2, 0, 1)})
        for r in range(2):
            e = dumps[r]["env"]
            self.assertNotEqual(e["HOROVOD_SECRET_KEY"], "00" * 32)
            self.assertNotEqual(e["MASTER_PORT"], "1")
            self.assertEqual(e["PYTHONUNBUFFERED"], "1")

    def test_two_local_hosts_plan(self):
        # 127.0.0.1 counts as this machine, so this runs two agents here.
        res, dumps = self.dump_job("-H", "localhost:2,127.0.0.1:2", np=4)
        self.check_plan(dumps, {
            0: ("localhost", 0, 2, 0, 2),
            1: ("localhost", 1, 2, 0, 2),
            2: ("127.0.0.1", 0, 2, 1, 2),
            3: ("127.0.0.1", 1, 2, 1, 2),
        })
        ports = {dumps[r]["env"]["MASTER_PORT"] for r in range(4)}
        self.assertEqual(len(ports), 1)
        for r in range(4):
            # MASTER_ADDR is rank 0's host.
            self.assertEqual(dumps[r]["env"]["MASTER_ADDR"], "localhost")
        self.assertEqual(len({dumps[r]["env"]["HOROVOD_SECRET_KEY"]
                              for r in range(4)}), 1)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:rank 0 done", "[1,1]<stdout>:rank 1 done",
            "[2,0]<stdout>:rank 2 done", "[3,1]<stdout>:rank 3 done"])

    def test_uneven_hosts_plan(self):
        res, dumps = self.dump_job("-H", "127.0.0.1:1,localhost:2", np=3)
        self.check_plan(dumps, {
            0: ("127.0.0.1", 0, 1, 0, 2),
            1: ("localhost", 0, 2, 1, 2),
            2: ("localhost", 1, 2, 0, 1),
        })
        for r in range(3):
            self.assertEqual(dumps[r]["env"]["MASTER_ADDR"], "127.0.0.1")

    def test_np_below_slots(self):
        res, dumps = self.dump_job("-H", "localhost:4", np=2)
        self.check_plan(dumps, {0: ("localhost", 0, 2, 0, 1),
                                1: ("localhost", 1, 2, 0, 1)})

    def test_np_below_slots_leaves_second_host_unused(self):
        res, dumps = self.dump_job("-H", "localhost:2,127.0.0.1:2", np=2)
        self.check_plan(dumps, {0: ("localhost", 0, 2, 0, 1),
                                1: ("localhost", 1, 2, 0, 1)})

    def test_default_hosts_is_localhost_np(self):
        res, dumps = self.dump_job(np=3)
        self.check_plan(dumps, {r: ("localhost", r, 3, 0, 1)
                                for r in range(3)})

    def test_ranks_get_their_share_of_the_cpus(self):
        # The CPUs horovodrun may use here, split among the local ranks
        # (--bind-to auto); as many ranks as CPUs get one each, more ranks
        # than CPUs, or --bind-to none, are not bound at all.
        mine = sorted(os.sched_getaffinity(0))
        show = py("import os; print(sorted(os.sched_getaffinity(0)))")

        def sets(*opts, np=2):
            res = self.run_hr("-np", np, *opts, *show)
            self.assertRc(res, 0)
            per, bad = hvdtest.prefixed(res.out_lines)
            self.assertEqual(bad, [])
            return [json.loads(per[r][0][1]) for r in range(np)]
        n = len(mine)
        got = sets(np=n)
        self.assertEqual(sorted(c for s in got for c in s), mine)
        self.assertEqual([len(s) for s in got], [1] * n)
        self.assertEqual(sets(np=n + 1), [mine] * (n + 1))
        self.assertEqual(sets("--bind-to", "none", np=n), [mine] * n)
        if n >= 2:
            halves = sets(np=2)
            self.assertFalse(set(halves[0]) & set(halves[1]), halves)

    def test_cwd_is_inherited(self):
        res = self.run_hr("-np", "2", *py("import os; print(os.getcwd())"),
                          cwd=self.tmp)
        self.assertRc(res, 0)
        real = os.path.realpath(self.tmp)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:" + real, "[1,1]<stdout>:" + real])

    def test_envdemo(self):
        res = self.run_hr("-np", "4", hvdtest.ENVDEMO)
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [])
        self.assertEqual(sorted(per), [0, 1, 2, 3])
        for r in range(4):
            lines = [t for lr, t in per[r]]
            self.assertTrue(all(lr == r for lr, _ in per[r]))
            self.assertRegex(lines[0], r"^hello from rank %d of 4 on " % r)
            self.assertIn("  HOROVOD_RANK=%d" % r, lines)
            self.assertIn("  LOCAL_WORLD_SIZE=4", lines)
            self.assertIn("  HOROVOD_SECRET_KEY is set (64 hex digits)",
                          lines)
            self.assertFalse(any(re.search(r"[0-9a-f]{64}", l)
                                 for l in lines))

    def test_command_args_after_options_are_the_programs(self):
        # "-np" after the command belongs to the program, and "--" ends
        # horovodrun's options.
        script = "import sys; print(' '.join(sys.argv[1:]))"
        res = self.run_hr("-np", "1", *py(script), "-np", "7", "-H", "x")
        self.assertRc(res, 0)
        self.assertEqual(res.out_lines, ["[0,0]<stdout>:-np 7 -H x"])
        res = self.run_hr("-np", "1", "--", *py(script), "--help")
        self.assertRc(res, 0)
        self.assertEqual(res.out_lines, ["[0,0]<stdout>:--help"])

    def test_long_option_forms(self):
        res = self.run_hr("--num-proc", "2", "--hosts", "localhost:2",
                          *py("print('x')"))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:x", "[1,1]<stdout>:x"])


if __name__ == "__main__":
    hvdtest.main()
