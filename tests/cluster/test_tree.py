"""The tree launch (--tree-fanout) on 16 namespace hosts
(tests/lib/nscluster.py), fan-out 3: horovodrun reaches w0, w1 and w2 over
SSH itself; their agents start w3 to w11 (three each), and those start
w12 to w15, three levels deep. Every host has the cluster's key and
known_hosts as /root/.ssh, as agents that start agents need.

Checked: collectives across all 16 hosts; horovodrun holds 3 SSH
sessions, not 16, while every rank runs; the agents carry the ranks'
rendezvous, so that horovodrun's only connections are those 3 sessions
while 16 initialised ranks run, and a stranger that reaches an agent's
port is refused as the server would refuse it; each rank's lines whole
and in order through two relays; a rank killed on the deepest level
named with its host; a SIGKILLed horovodrun, and a SIGKILLed inner agent
(its subtree stopped and named), leave nothing on any host. Needs root,
iproute2, util-linux and openssh-server."""

import os
import re
import signal
import subprocess
import sys
import unittest

import hvdtest
import nscluster
from test_clusters import ClusterCase, leftovers

COLLCHECK = os.environ["HVD_COLLCHECK"]
TINY = os.environ["HVD_TINY"]
ELASTICRANK = os.environ["HVD_ELASTICRANK"]
PY = "/usr/bin/python3"
N, FAN = 16, 3
HOSTS = ["w%d" % i for i in range(N)]
# w1's agent starts w6, w7 and w8 (the k-th host after the first FAN is
# started by the agent of host (k - FAN) // FAN).
INNER, SUBTREE = "w1", ["w6", "w7", "w8"]
LINES = 300
COUNT = ("import os\nr = os.environ['HOROVOD_RANK']\n"
         "for i in range(%d):\n    print('rank %%s line %%d %%s' %% "
         "(r, i, 'x' * (i %% 97)))\n" % LINES)


# Connects to 127.0.0.1:PORT, prints the first two bytes it gets (a
# frame's magic), sends what is no rendezvous frame, and says when the
# connection closes.
STRANGER = ("import socket, sys\n"
            "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
            "s.settimeout(20)\n"
            "print(s.recv(2).decode())\n"
            "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
            "while s.recv(4096):\n"
            "    pass\n"
            "print('closed')\n")


def agent_pid(c, host):
    """The pid of the hvd-agent running on host, or None."""
    for pid in nscluster.netns_pids({c.host(host).ino}):
        cmd = hvdtest._read("/proc/%d/cmdline" % pid) or b""
        if cmd.split(b"\0")[0].endswith(b"hvd-agent"):
            return pid
    return None


def ssh_sessions(c):
    """horovodrun's SSH connections, from the launcher host of c."""
    ss = subprocess.run(["nsenter", "-t", str(c.launcher.pid), "--net", "--",
                         "ss", "-Htn", "state", "established",
                         "( dport = :22 )"],
                        capture_output=True, text=True, check=True)
    return len(ss.stdout.splitlines())


class TreeTest(ClusterCase):
    """One cluster of 16 hosts for every test."""

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(N)
        ssh = c.ssh_dir(os.path.join(c.dir, "ssh"))
        for h in [c.launcher] + list(c.hosts):
            c.bind(h, ssh, "/root/.ssh", ro=True)

    def job_args(self, *cmd):
        return ["-np", N, "-H", ",".join("%s:1" % h for h in HOSTS),
                "--tree-fanout", FAN, "--kill-grace", "1"] + list(cmd)

    def connections(self, pid):
        """The established TCP connections of process pid (in the launcher
        host's namespace): (local, peer) address pairs."""
        ss = subprocess.run(["nsenter", "-t", str(self.cluster.launcher.pid),
                             "--net", "--", "ss", "-Htnp", "state",
                             "established"],
                            capture_output=True, text=True, check=True)
        return [tuple(l.split()[2:4]) for l in ss.stdout.splitlines()
                if "pid=%d," % pid in l]

    def test_the_agents_carry_the_rendezvous(self):
        # tiny initialises, checks a few collectives and waits 5 s.
        job = self.start("--verbose", *self.job_args(TINY, "5000"))
        job.wait_line(lambda l: "rendezvous: all %d ranks registered" % N in l,
                      stream="stderr", timeout=90)
        conns = self.connections(job.proc.pid)
        # A stranger on w5 that reaches w5's agent gets the server's
        # challenge through it, and is refused like one that reached the
        # server: the job goes on.
        host = self.cluster.host("w5").pid
        agent = agent_pid(self.cluster, "w5")
        ss = subprocess.run(["nsenter", "-t", str(host), "--net", "--", "ss",
                             "-Hltnp"], capture_output=True, text=True,
                            check=True).stdout
        port = [l.split()[3].rsplit(":", 1)[1] for l in ss.splitlines()
                if "pid=%d," % agent in l]
        self.assertEqual(len(port), 1, ss)
        stranger = subprocess.run(
            ["nsenter", "-t", str(host), "--net", "--", PY, "-c", STRANGER,
             port[0]], capture_output=True, text=True, timeout=30)
        self.assertEqual(stranger.stdout.split(), ["HV", "closed"],
                         stranger.stderr)
        self.assertEqual(job.wait(120), 0, job.describe())
        self.assertIn("rendezvous: refused a connection from host w5, "
                      "through its agent: it does not speak the rendezvous "
                      "protocol", job.err)
        per, _ = hvdtest.prefixed(job.out.splitlines())
        for r in range(N):
            self.assertIn("tiny: rank %d of %d: ok" % (r, N),
                          [t for _, t in per.get(r, [])], job.describe())
        # Its three SSH sessions and nothing else: no rank's connection.
        self.assertEqual(len(conns), FAN, conns)
        self.assertTrue(all(p.endswith(":22") for _, p in conns), conns)
        self.assertRegex(job.err, r"rank 15 registered from host w15, "
                         r"through its agent")

    def test_collectives_through_the_tree(self):
        job = self.start("--verbose", *self.job_args(COLLCHECK))
        self.assertEqual(job.wait(120), 0, job.describe())
        per, bad = hvdtest.prefixed(job.out.splitlines())
        self.assertEqual(bad, [], job.describe())
        self.assertEqual(sorted(per), list(range(N)), job.describe())
        for r in range(N):
            self.assertTrue(any(re.match(r"collcheck: rank %d of %d: \d+ "
                                         r"checks, 0 failures$" % (r, N), t)
                                for _, t in per[r]), job.describe())
        self.assertIn("tree launch: horovodrun starts the agents of 3 hosts, "
                      "which start those of the other 13 (--tree-fanout 3)",
                      job.err)

    def test_an_rsh_agent_that_works_on_every_host(self):
        # --rsh-tree: OpenSSH's client as the rsh agent, which works from
        # every host; agents run it for their subtrees, and each agent
        # connects back to the one that started it.
        rsh = ["--rsh-agent", "ssh -o BatchMode=yes", "--rsh-tree"]
        res = self.run_hr("--verbose", *rsh, *self.job_args(COLLCHECK))
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(sorted(per), list(range(N)), res.describe())
        self.assertIn("tree launch: horovodrun starts the agents of 3 hosts, "
                      "which start those of the other 13 (--tree-fanout 3)",
                      res.err)
        # While the ranks run: horovodrun runs 3 ssh clients, the agents
        # the other 13; a SIGKILL of horovodrun leaves nothing.
        job = self.start(*rsh, *self.job_args(PY, "-c", hvdtest.READY_DIE))
        job.wait_line(lambda l: l.endswith(">:ready"), count=N, timeout=90)
        c = self.cluster
        clients = [p for p in nscluster.netns_pids(
            {h.ino for h in [c.launcher] + list(c.hosts)})
            if hvdtest._read("/proc/%d/comm" % p) == b"ssh\n"]
        parents = sorted(hvdtest.parent_comm(p) for p in clients)
        self.assertEqual(parents, ["horovodrun"] * FAN +
                         ["hvd-agent"] * (N - FAN), job.describe())
        job.signal(signal.SIGKILL)
        job.wait(10)
        self.assertNothingLeft()

    def test_a_host_that_does_not_resolve_deep_in_the_tree(self):
        # The 17th SSH host is started by w4's agent.
        res = self.run_hr("-np", N + 1, "-H", ",".join(
            "%s:1" % h for h in HOSTS + ["nohost"]), "--tree-fanout", FAN,
            "--start-timeout", "3", "true")
        self.assertRc(res, 255)
        # It alone is named, with the reason its relay found.
        self.assertEqual(res.error_lines(), [
            hvdtest.ERR_PREFIX + "host nohost: timed out after 3 s while "
            "trying again: cannot resolve the name: temporary failure "
            "(--start-timeout)"], res.describe())
        self.assertNothingLeft()

    def test_lines_whole_and_in_order(self):
        res = self.run_hr(*self.job_args(PY, "-c", COUNT))
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [], res.describe())
        for r in range(N):
            want = ["rank %d line %d %s" % (r, i, "x" * (i % 97))
                    for i in range(LINES)]
            self.assertEqual([t for _, t in per[r]], want, "rank %d" % r)

    def test_a_killed_rank_deep_in_the_tree_is_named(self):
        job = self.start(*self.job_args(PY, "-c", hvdtest.READY_DIE),
                         DIE="15")
        self.assertEqual(job.wait(90), 137, job.describe())
        self.assertRegex(job.err, r"rank 15 \(host w15, local_rank 0\) was "
                         r"killed by signal 9", job.describe())
        self.assertNothingLeft()

    def test_sigkill_of_horovodrun_leaves_nothing(self):
        job = self.start(*self.job_args(PY, "-c", hvdtest.READY_DIE))
        job.wait_line(lambda l: l.endswith(">:ready"), count=N, timeout=90)
        # Every rank runs, and horovodrun holds one SSH session per agent
        # it started itself, not one per host.
        self.assertEqual(ssh_sessions(self.cluster), FAN)
        job.signal(signal.SIGKILL)
        job.wait(10)
        self.assertNothingLeft()

    def test_sigkill_of_an_inner_agent_stops_and_names_its_subtree(self):
        job = self.start(*self.job_args(PY, "-c", hvdtest.READY_DIE))
        job.wait_line(lambda l: l.endswith(">:ready"), count=N, timeout=90)
        os.kill(agent_pid(self.cluster, INNER), signal.SIGKILL)
        self.assertNotEqual(job.wait(60), 0, job.describe())
        self.assertIn("host %s: its agent ended, and so did those it "
                      "started (3: %s)" % (INNER, ", ".join(SUBTREE)),
                      job.err, job.describe())
        self.assertRegex(job.err, r"host %s: hvd-agent was killed by signal "
                         r"9" % INNER, job.describe())
        self.assertNothingLeft()


class ElasticTreeTest(ClusterCase):
    """An elastic job on 7 hosts, fan-out 2: horovodrun starts w0 and w1;
    w0's agent starts w2 and w3, w1's w4 and w5, and w2's w6. Then w1
    fails (its processes are killed and it leaves the network)."""

    E = ["w%d" % i for i in range(7)]
    STEPS = 600

    @classmethod
    def setUpClass(cls):
        c = cls.cluster = nscluster.NsCluster(len(cls.E))
        ssh = c.ssh_dir(os.path.join(c.dir, "ssh"))
        for h in [c.launcher] + list(c.hosts):
            c.bind(h, ssh, "/root/.ssh", ro=True)
        cls.listing = os.path.join(c.dir, "listing")
        cls.script = os.path.join(c.dir, "discover.sh")
        with open(cls.script, "w") as f:
            f.write("#!/bin/sh\ncat %s\n" % cls.listing)
        os.chmod(cls.script, 0o755)

    def list_hosts(self, hosts):
        with open(self.listing, "w") as f:
            f.write("".join("%s:1\n" % h for h in hosts))

    def test_a_lost_relay_costs_its_subtree_a_restart_not_the_blacklist(self):
        self.list_hosts(self.E)
        job = self.start("--verbose", "-np", len(self.E), "--min-np", 4,
                         "--host-discovery-script", self.script,
                         "--tree-fanout", 2, "--kill-grace", 1, ELASTICRANK,
                         self.STEPS, ER_STEP_MS="20")
        # Every process trains.
        job.wait_line(lambda l: l.endswith(" ready"), count=len(self.E),
                      timeout=90)
        # Two SSH sessions for seven hosts.
        self.assertEqual(ssh_sessions(self.cluster), 2, job.describe())
        self.list_hosts([h for h in self.E if h != "w1"])
        self.cluster.remove_host("w1")
        self.assertEqual(job.wait(240), 0, job.describe())
        self.assertIn("host w1: its agent ended, and so did those it started "
                      "(2: w4, w5); their hosts are not blacklisted, and get "
                      "new agents", job.err)
        for h in ("w4", "w5"):
            self.assertRegex(job.err, r"elastic: rank \d+ on %s ended with "
                             r"the agent that started its host's agent" % h)
            self.assertNotRegex(job.err, r"host %s is blacklisted" % h)
        done = re.findall(r"elasticrank: start \d+ rank (\d+) of (\d+): "
                          r"(\d+) steps.*weight (\d+)", job.out)
        weight = self.STEPS * (self.STEPS + 1) // 2
        self.assertEqual(sorted(tuple(map(int, d)) for d in done),
                         [(r, 6, self.STEPS, weight) for r in range(6)],
                         job.describe())
        self.assertNothingLeft()


if __name__ == "__main__":
    sys.exit(unittest.main())
