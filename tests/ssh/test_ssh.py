"""Integration tests: horovodrun on many "hosts" over SSH.

The hosts are real OpenSSH servers on 127.0.0.2, 127.0.0.3, ... that the
fixture (sshfix.py) starts with throwaway keys and a fake HOME, so the whole
SSH path (libssh2 session, host key check, authentication, remote hvd-agent)
runs for real without leaving loopback. Ranks are marked with a unique
HVDTEST_MARK variable (horovodrun hands its environment to every rank), and
every process under a host's sshd is tracked by pid, so the orphan checks
see exactly this test's processes, on every "host".

Needs /usr/sbin/sshd (openssh-server) and ssh/ssh-keygen (openssh-client);
without them the test fails, saying so.
"""

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
import unittest

import hvdtest
import sshfix
from hvdtest import py, sh

ERR = hvdtest.ERR_PREFIX
WARN = hvdtest.WARN_PREFIX
ENVDEMO = os.environ.get("HVD_ENVDEMO", hvdtest.ENVDEMO)
LINKCHECK = os.environ.get(
    "HVD_LINKCHECK", os.path.join(hvdtest.BUILD, "tests", "ssh", "linkcheck"))
COLLCHECK = os.environ.get(
    "HVD_COLLCHECK", os.path.join(hvdtest.BUILD, "tests", "runtime",
                                  "collcheck"))

# The exit code of a failed pre-flight (no worker started anywhere).
PREFLIGHT_RC = 255
# A host whose port stays closed, after --start-timeout 2 of tries.
REFUSED = (r"^timed out after 2(\.0+)? s while trying again: connection "
           r"refused \(port %s\); is sshd running there\? "
           r"\(--start-timeout\)$")

CLUSTER = None
H1, H2 = "127.0.0.2", "127.0.0.3"
ELASTICRANK = os.environ["HVD_ELASTICRANK"]


def setUpModule():
    global CLUSTER
    CLUSTER = sshfix.SshCluster(2)
    CLUSTER.start()


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


# Ranks that say they are ready, then sleep; odd ranks ignore SIGTERM so
# that stopping them needs the SIGKILL after the grace.
SLEEPER = r"""
import os, signal, time
if os.environ.get("IGNORE_TERM") and int(os.environ["HOROVOD_RANK"]) % 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
print("never stopped", flush=True)
"""

# Each rank prints the pids of its ancestors, to show which sshd it runs
# under.
ANCESTRY = r"""
import os
def parent(p):
    with open("/proc/%d/stat" % p, "rb") as f:
        s = f.read()
    return int(s[s.rindex(b")") + 2:].split()[1])
chain, p = [], os.getpid()
while p > 1:
    p = parent(p)
    chain.append(p)
print("chain", " ".join(map(str, chain)), flush=True)
"""

ORDERED = hvdtest.ORDERED
INT_DIES = hvdtest.INT_DIES

# A rank that leaves a file behind if it ever starts (in the job's cwd).
TOUCH = 'touch "started.$HOROVOD_RANK"; echo started'


def is_ready(line):
    return line.endswith(">:ready")


def pid_alive(pid):
    st = hvdtest.proc_state(pid)
    return st is not None and st not in ("Z", "X")


def envdemo_values(res):
    """{rank: {NAME: value}} from envdemo's prefixed output."""
    per, bad = hvdtest.prefixed(res.out_lines)
    vals = {}
    for r, lines in per.items():
        d = vals.setdefault(r, {})
        for _, text in lines:
            m = re.match(r"^\s+([A-Z_]+)=(.*)$", text)
            if m:
                d[m.group(1)] = m.group(2)
    return vals, bad


class SshTestCase(hvdtest.TestCase):
    """A test against the module's cluster: HOME is the fake home (or the
    test's own), -p is the cluster's port, the agent never asked."""

    home = None

    def setUp(self):
        super().setUp()
        self.c = CLUSTER
        self.port = str(self.c.port)

    def env(self, home=None, **extra):
        # A start timeout well under the test's own, so that a host that
        # never comes up fails the test with horovodrun's message.
        extra.setdefault("HOROVOD_START_TIMEOUT", "20")
        return self.c.env(base=hvdtest.base_env(self.marker, **extra),
                          home=home or self.home)

    def new_home(self, known_hosts="plain", key=True):
        """A fake HOME of this test only."""
        name = "home-%s" % self.marker
        home = self.c.new_home(name, key=key, known_hosts=known_hosts)
        self.addCleanup(__import__("shutil").rmtree, home, True)
        return home

    def hr(self, *args, home=None, timeout=120, port=True, input=None,
           **extra):
        pre = ["-p", self.port] if port else []
        return self.run_hr(*(pre + list(args)),
                           env=self.env(home=home, **extra), timeout=timeout,
                           input=input)

    def start(self, *args, home=None, **extra):
        return self.start_hr("-p", self.port, *args,
                             env=self.env(home=home, **extra))

    def assertNoWorkerStarted(self, res):
        started = [f for f in os.listdir(self.tmp) if f.startswith("started")]
        self.assertEqual(started, [], "a worker started\n" + res.describe())
        self.assertNotIn("started", res.out, res.describe())
        self.assertNoneLeft(timeout=5, what="processes of the job")
        # Nothing this job started may linger under any sshd.
        for h in self.c.hosts:
            left = hvdtest.wait_until(lambda: not self.c.commands(h), 5)
            self.assertTrue(left, "still running under %s's sshd: %s" %
                            (h, self.c.commands(h)))

    def assertPreflight(self, res, expect):
        """rc 255, and exactly one error line per failing host (and none
        for the hosts that did not fail), each matching its regex: expect
        is {host: regex of the text after 'horovodrun: error: host HOST: '}
        (HOST may be given as user@host)."""
        self.assertRc(res, PREFLIGHT_RC)
        lines = res.error_lines()
        per = {}
        for l in lines:
            m = re.match(re.escape(ERR) + r"host (\S+?): (.*)$", l)
            if m:
                # The line may name the host as given (user@host).
                host = m.group(1).rsplit("@", 1)[-1]
                per.setdefault(host, []).append(m.group(2))
        self.assertEqual(sorted(per), sorted(expect),
                         "one error line per failing host, and none for "
                         "the others\n" + res.describe())
        for h, rx in expect.items():
            self.assertEqual(len(per[h]), 1, "one line for host %s\n%s" %
                             (h, res.describe()))
            self.assertRegex(per[h][0], rx, res.describe())
        return per


# ----------------------------------------------------------- the fixture

class FixtureTest(SshTestCase):
    """The fixture itself, checked with OpenSSH's own client, so that a
    failure of horovodrun is never a broken fixture."""

    def ssh(self, host, cmd="echo ok", **kw):
        import subprocess
        p = subprocess.run(self.c.ssh_argv(host, cmd, **kw),
                           capture_output=True, text=True, timeout=30,
                           env=self.c.env(), stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def test_openssh_client_reaches_every_host(self):
        for h in self.c.hosts:
            rc, out, err = self.ssh(h)
            self.assertEqual((rc, out), (0, "ok\n"), err + self.c.log_text(h))
            self.assertIn("Accepted publickey for %s" % self.c.user,
                          self.c.log_text(h))

    def test_openssh_client_refusals(self):
        rc, _, err = self.ssh(H1, key=self.c.wrong_key)
        self.assertEqual(rc, 255)
        self.assertIn("Permission denied", err)
        home = self.new_home("hashed")
        kh = self.c.known_hosts_of(home)
        with open(kh) as f:
            self.assertTrue(f.read().startswith("|1|"))
        self.assertEqual(self.ssh(H2, known_hosts=kh)[0], 0)
        self.c.fresh_known_hosts("wrong", home=home, hosts=[H2])
        rc, _, err = self.ssh(H2, known_hosts=kh)
        self.assertEqual(rc, 255)
        self.assertIn("REMOTE HOST IDENTIFICATION HAS CHANGED", err)
        self.c.fresh_known_hosts("empty", home=home)
        rc, _, err = self.ssh(H1, known_hosts=kh)
        self.assertEqual(rc, 255)
        self.assertIn("No ED25519 host key is known", err)

    def test_spare_silent_and_session_kill(self):
        import subprocess
        spare = self.c.spare_address()
        self.assertTrue(sshfix.connect_refused(spare, self.c.port))
        silent = self.c.silent_host()
        rc, _, err = self.ssh(silent, extra=["-o", "ConnectTimeout=1"])
        self.assertEqual(rc, 255)
        self.assertIn("timed out", err)
        p = subprocess.Popen(self.c.ssh_argv(H1, "sleep 77; echo done"),
                             env=self.c.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
        self.addCleanup(p.kill)
        self.assertTrue(hvdtest.wait_until(
            lambda: [t for t in self.c.commands(H1) if t[1] == "sleep"], 10))
        sleeps = [t[0] for t in self.c.commands(H1) if t[1] == "sleep"]
        self.assertTrue(self.c.kill_sessions(H1))
        self.assertEqual(p.wait(10), 255)
        for pid in sleeps:  # OpenSSH leaves the command; we clean up.
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------ the jobs

class ElasticSshTest(SshTestCase):

    def test_host_lost_by_killing_its_sshd_and_agent(self):
        # An elastic job over two SSH hosts: the second host is lost (its
        # sshd sessions and its agent killed); its ranks die with the
        # agent, the host is blacklisted, and the first host's ranks reset
        # and finish at size 2. Nothing is left under either sshd.
        job = self.start("-np", "4", "--min-np", "2", "-H",
                         self.c.hosts_arg(2), ELASTICRANK, "400",
                         ER_STEP_MS="5")
        job.wait_line(lambda l: "ready" in l, count=4, timeout=60)
        agents = [pid for pid, comm, _ in self.c.commands(H2)
                  if comm == "hvd-agent"]
        self.assertEqual(len(agents), 1, self.c.commands(H2))
        self.c.kill_sessions(H2)
        os.kill(agents[0], signal.SIGKILL)
        self.assertEqual(job.wait(120), 0, job.describe())
        done = re.findall(r"elasticrank: start (\d+) rank (\d+) of (\d+): "
                          r"(\d+) steps", job.out)
        self.assertEqual(sorted((int(s), int(r), int(n), int(k))
                                for s, r, n, k in done),
                         [(0, 0, 2, 400), (1, 1, 2, 400)], job.describe())
        self.assertIn("host %s is blacklisted" % H2, job.err, job.describe())
        for h in self.c.hosts:
            self.assertTrue(
                hvdtest.wait_until(lambda: not self.c.commands(h), 10),
                "still running under %s's sshd: %s" % (h,
                                                       self.c.commands(h)))


class RemoteJobTest(SshTestCase):

    def test_env_contract_two_hosts(self):
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2), ENVDEMO)
        self.assertRc(res, 0)
        vals, bad = envdemo_values(res)
        self.assertEqual(bad, [], res.describe())
        self.assertEqual(sorted(vals), [0, 1, 2, 3], res.describe())
        for r in range(4):
            v = vals[r]
            host = H1 if r < 2 else H2
            want = {
                "HOROVOD_RANK": str(r), "HOROVOD_SIZE": "4",
                "HOROVOD_LOCAL_RANK": str(r % 2), "HOROVOD_LOCAL_SIZE": "2",
                "HOROVOD_CROSS_RANK": str(r // 2), "HOROVOD_CROSS_SIZE": "2",
                "HOROVOD_HOSTNAME": host,
                "RANK": str(r), "WORLD_SIZE": "4", "LOCAL_RANK": str(r % 2),
                "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": H1,
            }
            got = {k: v.get(k) for k in want}
            self.assertEqual(got, want, "rank %d\n%s" % (r, res.describe()))
            # Remote hosts must be able to reach it: a loopback address.
            self.assertRegex(v.get("HOROVOD_RENDEZVOUS_ADDR", ""),
                             r"^127\.\d+\.\d+\.\d+$", res.describe())
            self.assertRegex(v.get("HOROVOD_RENDEZVOUS_PORT", ""), r"^\d+$")
        self.assertEqual(res.err, "", res.describe())

    def test_ranks_run_under_their_hosts_sshd(self):
        job = self.start("-np", "4", "-H", self.c.hosts_arg(2),
                         *py(ANCESTRY))
        rc = job.wait(60)
        self.assertEqual(rc, 0, job.describe())
        per, bad = hvdtest.prefixed(job.text_lines())
        self.assertEqual(bad, [], job.describe())
        self.assertEqual(sorted(per), [0, 1, 2, 3], job.describe())
        sshd = {h: self.c.sshd_pid(h) for h in self.c.hosts}
        for r in range(4):
            chain = [int(x) for x in per[r][0][1].split()[1:]]
            host = H1 if r < 2 else H2
            other = H2 if r < 2 else H1
            self.assertIn(sshd[host], chain, "rank %d not under %s's sshd" %
                          (r, host))
            self.assertNotIn(sshd[other], chain)
            self.assertNotIn(job.pid, chain, "rank %d is a local child of "
                             "horovodrun" % r)

    def test_prefixes_and_order(self):
        n = 1000
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2),
                      *py("N = %d\n" % n + ORDERED), timeout=120)
        self.assertRc(res, 0)
        self.assertOrderedStreams(res, 4, n, local_rank=lambda r: r % 2)

    def test_large_stdin_reaches_a_remote_rank0_intact(self):
        # 32 MiB over the SSH channel, at most 1 MiB of it on its way to
        # the agent at once: every byte, in order.
        data = os.urandom(1 << 20) * 32
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(2), "python3", "-c",
                      "import hashlib, sys; d = sys.stdin.buffer.read(); "
                      "print(len(d), hashlib.sha256(d).hexdigest())",
                      input=data, timeout=120)
        self.assertRc(res, 0)
        self.assertIn("[0,0]<stdout>:%d %s" % (
            len(data), hashlib.sha256(data).hexdigest()),
            res.out_lines, res.describe())

    def test_exact_prefixes(self):
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2),
                      *sh('echo "o$HOROVOD_RANK"; echo "e$HOROVOD_RANK" >&2'))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:o0", "[1,1]<stdout>:o1", "[2,0]<stdout>:o2",
            "[3,1]<stdout>:o3"])
        self.assertEqual(sorted(res.err_lines), [
            "[0,0]<stderr>:e0", "[1,1]<stderr>:e1", "[2,0]<stderr>:e2",
            "[3,1]<stderr>:e3"])

    def test_output_filename_from_remote_ranks(self):
        d = os.path.join(self.tmp, "logs")
        script = ('printf "out %s\\nsecond\\n" $HOROVOD_RANK; '
                  'printf "err %s\\n" $HOROVOD_RANK >&2')
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2),
                      "--output-filename", d, *sh(script))
        self.assertRc(res, 0)
        self.assertEqual(sorted(os.listdir(d)),
                         ["rank.%d" % r for r in range(4)])
        for r in range(4):
            with open(os.path.join(d, "rank.%d" % r, "stdout"), "rb") as f:
                self.assertEqual(f.read(), b"out %d\nsecond\n" % r)
            with open(os.path.join(d, "rank.%d" % r, "stderr"), "rb") as f:
                self.assertEqual(f.read(), b"err %d\n" % r)
        # The terminal gets the prefixed copy as well.
        self.assertIn("[3,1]<stdout>:out 3", res.out_lines)

    def test_collectives_across_hosts(self):
        # Two hosts of two ranks: hierarchical by default (shared memory on
        # each host, a ring of the two leaders), or one TCP ring. Both must
        # match the serial reference for every dtype and op, so they give
        # identical results.
        want = {
            (): {0: "hierarchical (2 hosts; shared memory among 2 ranks on "
                    "this host; leader on the TCP ring of hosts)",
                 1: "hierarchical (2 hosts; shared memory among 2 ranks on "
                    "this host)"},
            ("--no-hierarchical-allreduce",): {0: "TCP ring (4 ranks)",
                                               1: "TCP ring (4 ranks)"},
        }
        for opts, transport in want.items():
            with self.subTest(opts=opts):
                res = self.hr("-np", "4", "-H", self.c.hosts_arg(2),
                              "--log-level", "debug", *opts, COLLCHECK,
                              timeout=300)
                self.assertRc(res, 0)
                done = re.findall(r"collcheck: rank (\d+) of (\d+): (\d+) "
                                  r"checks, (\d+) failures", res.out)
                self.assertEqual(sorted(int(r) for r, _, _, _ in done),
                                 [0, 1, 2, 3], res.describe())
                for _, size, checks, failures in done:
                    self.assertEqual(int(size), 4)
                    self.assertGreater(int(checks), 150)
                    self.assertEqual(int(failures), 0, res.describe())
                for r in range(4):
                    self.assertIn("[%d,%d]<stderr>:hvd: debug: rank %d: "
                                  "transport: %s" % (r, r % 2, r,
                                                     transport[r % 2]),
                                  res.err, res.describe())

    def test_dead_rank_fails_the_others_hierarchical(self):
        # Rank 1 waits for its host's leader in shared memory; rank 3 for
        # rank 2 in shared memory; rank 0 for rank 2 on the ring of hosts.
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2), "--kill-grace",
                      "20", COLLCHECK, "--die-rank", "2", timeout=120)
        self.assertRc(res, 137)
        for r in (0, 1, 3):
            m = re.search(r"rank %d: failed as expected: (.*) \(HVD_EPEER\)"
                          % r, res.out)
            self.assertIsNotNone(m, res.describe())
            self.assertIn("rank 2 (host %s" % self.c.hosts[1], m.group(1))
        # The survivors ignore SIGTERM: they ended by themselves.
        self.assertLess(res.elapsed, 15)

    def test_collectives_across_uneven_hosts(self):
        # Three ranks on one host and one on the other: the lone rank is
        # its host's leader and has no shared memory.
        res = self.hr("-np", "4", "-H", self.c.hosts_arg([3, 1]),
                      "--log-level", "debug", COLLCHECK, timeout=300)
        self.assertRc(res, 0)
        done = re.findall(r"collcheck: rank (\d+) of 4: (\d+) checks, "
                          r"0 failures", res.out)
        self.assertEqual(sorted(int(r) for r, _ in done), [0, 1, 2, 3],
                         res.describe())
        self.assertIn("[3,0]<stderr>:hvd: debug: rank 3: transport: "
                      "hierarchical (2 hosts; the only rank on this host; "
                      "leader on the TCP ring of hosts)", res.err)
        self.assertIn("[2,2]<stderr>:hvd: debug: rank 2: transport: "
                      "hierarchical (2 hosts; shared memory among 3 ranks "
                      "on this host)", res.err)

    def test_user_at_host_and_long_port_option(self):
        hosts = self.c.hosts_arg(1, user=self.c.user)
        res = self.hr("--ssh-port", self.port, "-np", "2", "-H", hosts,
                      ENVDEMO, port=False)
        self.assertRc(res, 0)
        vals, _ = envdemo_values(res)
        self.assertEqual(sorted(vals), [0, 1], res.describe())
        self.assertTrue(vals[0]["HOROVOD_HOSTNAME"].endswith(H1))
        self.assertTrue(vals[1]["HOROVOD_HOSTNAME"].endswith(H2))
        for h in self.c.hosts:
            self.assertIn("Accepted publickey for %s" % self.c.user,
                          self.c.log_text(h))

    def test_user_is_the_one_given(self):
        res = self.hr("-np", "2", "-H",
                      "nosuchuser-hvd@%s:1,%s:1" % (H1, H2), *sh(TOUCH))
        self.assertPreflight(res, {
            H1: r"^authentication failed for user nosuchuser-hvd; tried: "})
        self.assertNoWorkerStarted(res)

    def test_port_matters(self):
        # Without -p the port is 22, where nothing listens on 127.0.0.2.
        if not sshfix.connect_refused(H1, 22):
            self.skipTest("something listens on %s:22" % H1)
        res = self.hr("-np", "1", "-H", "%s:1" % H1, "--start-timeout", "2",
                      *sh(TOUCH), port=False)
        self.assertPreflight(res, {H1: REFUSED % 22})
        self.assertNoWorkerStarted(res)

    def test_identity_file_and_hashed_known_hosts(self):
        # No default key in this home: only -i can log in.
        home = self.new_home("hashed", key=False)
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "-i", self.c.key, *sh(TOUCH), home=home)
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:started", "[1,0]<stdout>:started"])
        self.assertEqual(res.warning_lines(), [], res.describe())
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "--ssh-identity-file", self.c.key, "true", home=home)
        self.assertRc(res, 0)

    def test_ssh_agent_is_asked_first(self):
        # No key file in this home and no -i: only ssh-agent can log in.
        home = self.new_home(key=False)
        sock = os.path.join(self.tmp, "agent.sock")
        agent = subprocess.run(["ssh-agent", "-a", sock], capture_output=True,
                               text=True, check=True)
        pid = int(re.search(r"SSH_AGENT_PID=(\d+)", agent.stdout).group(1))
        self.addCleanup(os.kill, pid, signal.SIGTERM)
        subprocess.run(["ssh-add", "-q", self.c.key], check=True,
                       env=dict(os.environ, SSH_AUTH_SOCK=sock),
                       capture_output=True)
        env = self.env(home=home)
        env["SSH_AUTH_SOCK"] = sock
        res = self.run_hr("-p", self.port, "-np", "2", "-H",
                          self.c.hosts_arg(1), *sh(TOUCH), env=env,
                          timeout=120)
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:started", "[1,0]<stdout>:started"])
        # Without the agent the same home has nothing to offer.
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1), "true",
                      home=home)
        self.assertRc(res, PREFLIGHT_RC)
        self.assertIn("authentication failed", res.err)

    def test_rendezvous_addr_option(self):
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "--rendezvous-addr", "127.0.0.1", ENVDEMO)
        self.assertRc(res, 0)
        vals, _ = envdemo_values(res)
        for r in (0, 1):
            self.assertEqual(vals[r].get("HOROVOD_RENDEZVOUS_ADDR"),
                             "127.0.0.1", res.describe())
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "--network-interface", "lo", ENVDEMO)
        self.assertRc(res, 0)
        vals, _ = envdemo_values(res)
        for r in (0, 1):
            self.assertRegex(vals[r].get("HOROVOD_RENDEZVOUS_ADDR", ""),
                             r"^127\.", res.describe())


# ------------------------------------------------------------ pre-flight

class PreflightTest(SshTestCase):

    def test_wrong_identity_file(self):
        home = self.new_home("plain", key=False)
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "-i", self.c.wrong_key, *sh(TOUCH), home=home)
        rx = (r"^authentication failed for user %s; tried: .*wrong_id_ed25519"
              % re.escape(self.c.user))
        self.assertPreflight(res, {H1: rx, H2: rx})
        self.assertNoWorkerStarted(res)

    def test_unknown_host_key_then_accept_new(self):
        home = self.new_home("plain")
        kh = self.c.fresh_known_hosts("plain", home=home, hosts=[H1])
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1), *sh(TOUCH),
                      home=home)
        self.assertPreflight(res, {H2: (
            r"^host key not in %s \(ED25519 %s\); add it with ssh-keyscan, "
            r"or pass --ssh-accept-new$" % (
                re.escape(kh), re.escape(self.c.host_fingerprints[H2])))})
        self.assertNoWorkerStarted(res)
        self.assertFalse(self.c.known_hosts_has(H2, home=home))

        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "--ssh-accept-new", *sh(TOUCH), home=home)
        self.assertRc(res, 0)
        warns = res.warning_lines()
        self.assertEqual(len(warns), 1, res.describe())
        self.assertRegex(warns[0], r"^%shost %s: added .* to %s" % (
            re.escape(WARN), re.escape(H2), re.escape(kh)))
        self.assertTrue(self.c.known_hosts_has(H2, home=home))
        self.assertTrue(self.c.known_hosts_has(H1, home=home))

        # Known now: no flag needed, no warning.
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1), "true",
                      home=home)
        self.assertRc(res, 0)
        self.assertEqual(res.warning_lines(), [], res.describe())

    def test_accept_new_without_known_hosts_file(self):
        home = self.new_home("missing")
        kh = self.c.known_hosts_of(home)
        self.assertFalse(os.path.exists(kh))
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1), *sh(TOUCH),
                      home=home)
        self.assertPreflight(res, {h: r"^host key not in " for h in
                                   self.c.hosts})
        self.assertNoWorkerStarted(res)
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                      "--ssh-accept-new", "true", home=home)
        self.assertRc(res, 0)
        self.assertEqual(len(res.warning_lines()), 2, res.describe())
        for h in self.c.hosts:
            self.assertTrue(self.c.known_hosts_has(h, home=home))

    def test_changed_host_key_refused_even_with_accept_new(self):
        home = self.new_home("plain")
        kh = self.c.fresh_known_hosts("wrong", home=home, hosts=[H2])
        with open(kh, "rb") as f:
            before = f.read()
        rx = (r"^HOST KEY CHANGED.*%s.*%s:2\b" % (
            re.escape(self.c.host_fingerprints[H2]), re.escape(kh)))
        for extra in ([], ["--ssh-accept-new"]):
            with self.subTest(extra=extra):
                res = self.hr("-np", "2", "-H", self.c.hosts_arg(1),
                              *extra, *sh(TOUCH), home=home)
                self.assertPreflight(res, {H2: rx})
                self.assertNoWorkerStarted(res)
                with open(kh, "rb") as f:
                    self.assertEqual(f.read(), before,
                                     "known_hosts was changed")

    def test_changed_host_key_hashed_entry(self):
        home = self.new_home("plain")
        kh = self.c.fresh_known_hosts("wrong", home=home, hosts=[H1])
        sshfix._run([sshfix.SSH_KEYGEN, "-H", "-f", kh])
        os.unlink(kh + ".old")
        res = self.hr("-np", "2", "-H", self.c.hosts_arg(1), *sh(TOUCH),
                      home=home)
        self.assertPreflight(res, {H1: r"^HOST KEY CHANGED.*%s:1\b" %
                                   re.escape(kh)})
        self.assertNoWorkerStarted(res)

    def test_port_closed(self):
        # Tried again until --start-timeout: a pod's sshd comes up late.
        spare = self.c.spare_address()
        t0 = time.monotonic()
        res = self.hr("-np", "2", "-H", "%s:1,%s:1" % (H1, spare),
                      "--start-timeout", "2", *sh(TOUCH))
        self.assertGreater(time.monotonic() - t0, 1.5, res.describe())
        self.assertPreflight(res, {spare: REFUSED % self.port})
        self.assertNoWorkerStarted(res)

    def test_never_answers(self):
        silent = self.c.silent_host()
        t0 = time.monotonic()
        res = self.hr("-np", "2", "-H", "%s:1,%s:1" % (silent, H1),
                      "--start-timeout", "2", *sh(TOUCH), timeout=60)
        took = time.monotonic() - t0
        self.assertPreflight(res, {silent: (
            r"^timed out after 2(\.0+)? s while [^()]+ \(--start-timeout\)$")})
        self.assertGreater(took, 1.5, res.describe())
        self.assertLess(took, 12, "pre-flight took %.1f s with "
                        "--start-timeout 2\n%s" % (took, res.describe()))
        self.assertNoWorkerStarted(res)

    def test_several_failing_hosts_one_line_each(self):
        spare = self.c.spare_address()
        silent = self.c.silent_host()
        res = self.hr("-np", "3", "-H", "%s:1,%s:1,%s:1" % (spare, H1, silent),
                      "--start-timeout", "2", *sh(TOUCH), timeout=60)
        self.assertPreflight(res, {
            spare: REFUSED % self.port,
            silent: r"^timed out after 2(\.0+)? s while "})
        self.assertNoWorkerStarted(res)

    def config_home(self, text, known_hosts="plain"):
        """A fake HOME whose only key is KEY (not a default name) and whose
        ~/.ssh/config is text (KEY, PORT and HOST replaced)."""
        home = self.new_home(known_hosts, key=False)
        key = os.path.join(home, "KEY")
        import shutil
        shutil.copy(self.c.key, key)
        os.chmod(key, 0o600)
        with open(os.path.join(home, ".ssh", "config"), "w") as f:
            f.write(text.replace("KEY", key).replace("PORT", self.port)
                    .replace("HOST", H1))
        return home

    def test_ssh_config_host_block(self):
        # An alias with its HostName, Port and IdentityFile; -p absent.
        home = self.config_home("Host other\n  Port 1\n"
                                "Host node-a\n  HostName HOST\n"
                                "  Port PORT\n  IdentityFile KEY\n"
                                "Host *\n  Port 2\n")
        res = self.hr("-np", "1", "-H", "node-a", "sh", "-c",
                      "echo on $HOROVOD_HOSTNAME", home=home, port=False)
        self.assertRc(res, 0)
        self.assertEqual(res.out_lines, ["[0,0]<stdout>:on node-a"])
        # The command line wins: -p over the config's Port.
        res = self.hr("-np", "1", "-H", "node-a", "-p", "1",
                      "--start-timeout", "1", "true", home=home, port=False)
        self.assertPreflight(res, {"node-a": r"connection refused \(port 1\)"})

    def test_ssh_config_host_key_policies(self):
        # No known_hosts entry: accept-new with a file that takes nothing
        # warns per host; "no" warns once for the job.
        home = self.config_home("Host *\n  StrictHostKeyChecking accept-new\n"
                                "  UserKnownHostsFile /dev/null\n"
                                "  IdentityFile KEY\n", known_hosts=None)
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2), *sh(TOUCH),
                      home=home)
        self.assertRc(res, 0)
        warns = res.warning_lines()
        self.assertEqual(len(warns), 2, res.describe())
        for h in (H1, H2):
            self.assertTrue(any(re.match(
                r"%shost %s: took ED25519 key SHA256:\S+ for \[%s\]:%s "
                r"without saving it \(/dev/null\)$" % (
                    re.escape(WARN), re.escape(h), re.escape(h), self.port),
                w) for w in warns), res.describe())
        home = self.config_home("Host *\n  StrictHostKeyChecking no\n"
                                "  IdentityFile KEY\n", known_hosts=None)
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2), *sh(TOUCH),
                      home=home)
        self.assertRc(res, 0)
        warns = res.warning_lines()
        self.assertEqual(len(warns), 1, res.describe())
        self.assertRegex(warns[0], r"^%shost 127\.0\.0\.[23]: host keys are "
                         r"not checked \(StrictHostKeyChecking no in %s/\.ssh/"
                         r"config\): anyone on the network path can pose as "
                         r"a host$" % (re.escape(WARN), re.escape(home)))

    def test_ssh_config_connect_timeout(self):
        # A host that drops the connection's SYN (a full accept queue):
        # ConnectTimeout ends each try, and the host is tried again.
        import socket
        addr = self.c.spare_address()
        lst = socket.socket()
        lst.bind((addr, int(self.port)))
        lst.listen(0)
        filler = socket.create_connection((addr, int(self.port)))
        self.addCleanup(lst.close)
        self.addCleanup(filler.close)
        home = self.config_home("Host *\n  ConnectTimeout 1\n"
                                "  IdentityFile KEY\n")
        res = self.hr("-np", "1", "-H", addr, "--start-timeout", "3",
                      *sh(TOUCH), home=home)
        self.assertPreflight(res, {addr: (
            r"^timed out after 3 s while trying again: cannot connect to "
            r"port %s: Connection timed out \(--start-timeout\)$"
            % self.port)})

    def test_ssh_config_bad_line(self):
        home = self.config_home("Host *\n  Port many\n")
        res = self.hr("-np", "1", "-H", H1, *sh(TOUCH), home=home)
        self.assertPreflight(res, {H1: r"^%s/\.ssh/config:2: bad Port "
                                   % re.escape(home)})
        self.assertNoWorkerStarted(res)

    def test_agent_path_missing(self):
        bad = "/nonexistent/hvd-agent"
        res = self.hr("-np", "4", "-H", self.c.hosts_arg(2),
                      "--agent-path", bad, *sh(TOUCH))
        rx = r"^hvd-agent not found at %s\b" % re.escape(bad)
        self.assertPreflight(res, {H1: rx, H2: rx})
        self.assertNoWorkerStarted(res)


# ------------------------------------------------------------ failures

class FailureTest(SshTestCase):

    def running_job(self, *extra, ignore_term=False):
        """A 4-rank job over both hosts whose ranks are all up; returns
        (job, pids of everything under the hosts' sshd sessions)."""
        kw = {"IGNORE_TERM": "1"} if ignore_term else {}
        job = self.start("-np", "4", "-H", self.c.hosts_arg(2),
                         "--kill-grace", "1", *extra, *py(SLEEPER), **kw)
        job.wait_line(is_ready, count=4, timeout=60)
        remote = {h: self.c.commands(h) for h in self.c.hosts}
        for h, procs in remote.items():
            comms = [c for _, c, _ in procs]
            self.assertIn("hvd-agent", comms, "no agent under %s's sshd: %s"
                          % (h, procs))
            self.assertEqual(len([c for c in comms if c.startswith("python")]),
                             2, "ranks under %s's sshd: %s" % (h, procs))
        marked = hvdtest.marked_procs(self.marker)
        self.assertEqual(len([c for _, c, _ in marked
                              if c.startswith("python")]), 4, marked)
        pids = {p for procs in remote.values() for p, _, _ in procs}
        return job, pids

    def assertAllGone(self, pids, t0, limit=5.0):
        def left():
            return ([p for p in pids if pid_alive(p)] +
                    [p for p, _, _ in hvdtest.marked_procs(self.marker)])
        hvdtest.wait_until(lambda: not left(), limit + 5)
        took = time.monotonic() - t0
        still = left()
        self.assertEqual(still, [], "left running: %s" % [
            (p, hvdtest._read("/proc/%d/cmdline" % p)) for p in still])
        self.assertLess(took, limit, "the last process went away %.1f s "
                        "after the event" % took)

    def test_sshd_session_killed_mid_job(self):
        job, pids = self.running_job(ignore_term=True)
        t0 = time.monotonic()
        self.assertTrue(self.c.kill_sessions(H2))
        rc = job.wait(30)
        self.assertNotEqual(rc, 0, job.describe())
        self.assertAllGone(pids, t0)
        errs = [l for l in job.text_lines("stderr") if l.startswith(ERR)]
        self.assertTrue(any(H2 in l for l in errs), job.describe())

    def test_horovodrun_sigkilled(self):
        job, pids = self.running_job(ignore_term=True)
        t0 = time.monotonic()
        job.signal(signal.SIGKILL)
        job.wait(10)
        self.assertAllGone(pids, t0)
        # The sessions end too.
        for h in self.c.hosts:
            self.assertTrue(hvdtest.wait_until(
                lambda: not self.c.sessions(h), 5),
                "sshd sessions of %s still open: %s" % (
                    h, self.c.session_procs(h)))

    def test_silent_launcher_stops_remote_ranks(self):
        # A stopped horovodrun keeps its connections open but says
        # nothing, as when the network vanishes: the agents must notice.
        job, pids = self.running_job(ignore_term=True)
        job.signal(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            def ranks_left():
                # A process that ends between the two reads is gone.
                return [p for p in pids if pid_alive(p) and b"hvd-agent" not
                        in (hvdtest._read("/proc/%d/cmdline" % p) or
                            b"hvd-agent")]
            left = hvdtest.wait_until(lambda: not ranks_left(), 10)
            took = time.monotonic() - t0
            self.assertTrue(left, "remote ranks outlived a silent launcher")
            self.assertLess(took, 7, "remote ranks went after %.1f s" % took)
        finally:
            job.signal(signal.SIGKILL)
            job.signal(signal.SIGCONT)
            job.wait(10)
        self.assertAllGone(pids, time.monotonic())

    def test_fail_fast_across_hosts(self):
        script = SLEEPER.replace(
            'print("ready", flush=True)',
            'print("ready", flush=True)\n'
            'if os.environ["HOROVOD_RANK"] == "3":\n'
            '    time.sleep(0.5)\n'
            '    raise SystemExit(3)')
        job = self.start("-np", "4", "-H", self.c.hosts_arg(2),
                         "--kill-grace", "1", *py(script), IGNORE_TERM="1")
        job.wait_line(is_ready, count=4, timeout=60)
        rc = job.wait(30)
        self.assertEqual(rc, 3, job.describe())
        self.assertRegex(job.err, r"rank 3 \(host 127\.0\.0\.3, local_rank 1\)"
                         r" exited with code 3", job.describe())
        self.assertNotIn("never stopped", job.out)
        self.assertNoneLeft(timeout=5, what="ranks")
        for h in self.c.hosts:
            self.assertTrue(hvdtest.wait_until(
                lambda: not self.c.commands(h), 5), self.c.commands(h))

    def test_sigint_forwarded_to_remote_ranks(self):
        job = self.start("-np", "4", "-H", self.c.hosts_arg(2),
                         *py(INT_DIES))
        job.wait_line(is_ready, count=4, timeout=60)
        job.signal(signal.SIGINT)
        rc = job.wait(30)
        self.assertEqual(rc, 130, job.describe())
        for r in range(4):
            self.assertIn("[%d,%d]<stdout>:rank %d got SIGINT" % (r, r % 2, r),
                          job.text_lines(), job.describe())
        self.assertNoneLeft(timeout=5, what="ranks")


class LinkTest(SshTestCase):
    """The SSH link on its own (linkcheck.c), without the job controller:
    it reaches the host's hvd-agent, gets its first frame, and closing the
    link leaves nothing under the host's sshd."""

    def linkcheck(self, host):
        import subprocess
        p = subprocess.run([LINKCHECK, host, self.port, hvdtest.HVD_AGENT],
                           capture_output=True, text=True, timeout=60,
                           env=self.env(), stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout + p.stderr

    def test_link_reaches_the_agent_and_closes(self):
        rc, out = self.linkcheck(H1)
        self.assertEqual(rc, 0, out)
        m = re.search(r"bytes (\d+) ended 1 failure ''", out)
        self.assertTrue(m and int(m.group(1)) > 0, out)
        left = hvdtest.wait_until(lambda: not self.c.commands(H1), 10)
        self.assertTrue(left, "left under %s's sshd: %s" %
                        (H1, self.c.commands(H1)))

    def test_link_to_a_host_without_sshd_fails_with_a_reason(self):
        rc, out = self.linkcheck(self.c.spare_address())
        self.assertEqual(rc, 1, out)
        self.assertRegex(out, r"ended 1 failure '.*(refused|connect)", out)


def main():
    import atexit
    atexit.register(hvdtest._cleanup)
    problems = []
    if not os.access(sshfix.SSHD, os.X_OK):
        problems.append(
            "%s is missing: these tests start real OpenSSH servers; install "
            "openssh-server and openssh-client (scripts/install-deps.sh "
            "does)" % sshfix.SSHD)
    for path, what in ((hvdtest.HOROVODRUN, "horovodrun"),
                       (ENVDEMO, "envdemo"), (COLLCHECK, "collcheck")):
        if not os.access(path, os.X_OK):
            problems.append("%s not found at %s; build first or set the "
                            "HVD_* variables" % (what, path))
    if problems:
        for p in problems:
            sys.stderr.write("test_ssh: FAIL: %s\n" % p)
        sys.exit(1)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
