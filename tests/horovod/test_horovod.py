"""Integration tests: ranks that link real Horovod under our horovodrun.

The ranks run tests/horovod/hvdworker.py with the Python of the venv that
scripts/install-horovod.sh builds (real Horovod 0.28.1 with Gloo, against
Debian's PyTorch). They meet through the Gloo rendezvous (Horovod's HTTP
key-value store) that horovodrun serves, locally and over the SSH
fixture's two loopback hosts. Without that venv the test fails, saying
how to build it.
"""

import os
import json
import re
import socket
import time
import unittest

import hvdtest
import sshfix

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)

ROOT = os.path.dirname(TESTS)
VENV_PY = os.environ.get("HVD_HOROVOD_PYTHON",
                         os.path.join(ROOT, "build-venv", "bin", "python"))
WORKER = os.path.join(HERE, "hvdworker.py")
ERR = hvdtest.ERR_PREFIX
WARN = hvdtest.WARN_PREFIX

CLUSTER = None
H1, H2 = "127.0.0.2", "127.0.0.3"
# A loopback address that is no host of any job here.
STRANGER = "127.0.0.9"


def setUpModule():
    global CLUSTER
    if not os.access(VENV_PY, os.X_OK):
        raise RuntimeError(
            "%s not found: these tests need real Horovod; run "
            "scripts/install-deps.sh --horovod (or set HVD_HOROVOD_PYTHON)"
            % VENV_PY)
    CLUSTER = sshfix.SshCluster(2)
    CLUSTER.start()


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


def worker(*args):
    return [VENV_PY, WORKER] + [str(a) for a in args]


def closed_port():
    """A loopback TCP port that nothing listens on (just checked)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class HorovodCase(hvdtest.TestCase):
    """Jobs of real Horovod ranks, here (remote=False) or on the SSH
    fixture's two hosts."""

    remote = False

    def env(self, **extra):
        extra.setdefault("HOROVOD_START_TIMEOUT", "30")
        base = hvdtest.base_env(self.marker, **extra)
        return CLUSTER.env(base=base) if self.remote else base

    def hr(self, *args, timeout=180, **extra):
        pre = ["-p", str(CLUSTER.port)] if self.remote else []
        return self.run_hr(*(pre + list(args)), env=self.env(**extra),
                           timeout=timeout)

    def hosts(self, np):
        if self.remote:
            return CLUSTER.hosts_arg(slots=np // 2)
        return "localhost:%d" % np

    def per_rank(self, res):
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad[:5], [], res.describe())
        return per

    def json_lines(self, res):
        out = {}
        for r, lines in self.per_rank(res).items():
            for _, text in lines:
                if text.startswith("{"):
                    out[r] = json.loads(text)
        return out

    def places(self, np):
        """{rank: (local_rank, local_size, cross_rank, cross_size)} as
        Horovod plans -np np on self.hosts(np)."""
        per_host = np // 2 if self.remote else np
        nhosts = np // per_host
        return {r: (r % per_host, per_host, r // per_host, nhosts)
                for r in range(np)}

    def check_places(self, np):
        res = self.hr("-np", np, "-H", self.hosts(np), *worker("info"))
        self.assertRc(res, 0)
        got = self.json_lines(res)
        self.assertEqual(sorted(got), list(range(np)), res.describe())
        for r, d in got.items():
            self.assertEqual((d["rank"], d["size"], d["env_rank"]),
                             (r, np, r), res.describe())
            self.assertEqual((d["local_rank"], d["local_size"],
                              d["cross_rank"], d["cross_size"]),
                             self.places(np)[r], res.describe())
            self.assertTrue(d["gloo"], "rank %d did not use Gloo" % r)

    def check_collectives(self, np):
        res = self.hr("-np", np, "-H", self.hosts(np), *worker("coll"))
        self.assertRc(res, 0)
        per = self.per_rank(res)
        for r in range(np):
            self.assertIn("coll ok", [t for _, t in per.get(r, [])],
                          res.describe())

    def check_training(self, np):
        res = self.hr("-np", np, "-H", self.hosts(np), *worker("train"))
        self.assertRc(res, 0)
        weights = {}
        for r, lines in self.per_rank(res).items():
            for _, text in lines:
                m = re.match(r"^weights (\w+) accuracy ([\d.]+)$", text)
                if m:
                    weights[r] = m.group(1)
                    self.assertGreater(float(m.group(2)), 0.8, res.describe())
        self.assertEqual(sorted(weights), list(range(np)), res.describe())
        self.assertEqual(len(set(weights.values())), 1,
                         "weights differ between ranks: %s" % weights)

    def check_killed_rank(self, np, victim):
        t0 = time.monotonic()
        res = self.hr("-np", np, "-H", self.hosts(np), "--kill-grace", "2",
                      *worker("die", victim), timeout=120)
        self.assertRc(res, 128 + 9)
        self.assertLess(time.monotonic() - t0, 60, res.describe())
        summary = [l for l in res.error_lines() if "rank %d " % victim in l]
        self.assertEqual(len(summary), 1, res.describe())
        self.assertIn("killed by signal 9 (SIGKILL)", summary[0])
        self.assertNoneLeft(timeout=10)
        if self.remote:
            for h in CLUSTER.hosts:
                left = hvdtest.wait_until(lambda: not CLUSTER.commands(h), 10)
                self.assertTrue(left, "left under %s's sshd: %s" %
                                (h, CLUSTER.commands(h)))


class LocalTest(HorovodCase):
    """Real Horovod ranks on this host."""

    def test_places_np2(self):
        self.check_places(2)

    def test_places_np4(self):
        self.check_places(4)

    def test_collectives_np2(self):
        self.check_collectives(2)

    def test_collectives_np4(self):
        self.check_collectives(4)

    def test_training_ends_with_equal_weights(self):
        self.check_training(2)

    def test_killed_rank_ends_the_job(self):
        self.check_killed_rank(3, 1)

    def test_output_is_whole_and_prefixed(self):
        n = 2000
        res = self.hr("-np", 2, *worker("spew", n))
        self.assertRc(res, 0)
        # Horovod itself may log to stderr; only the worker's lines count.
        res.err = "\n".join(l for l in res.err_lines
                            if re.match(r"^\[\d+,\d+\]<stderr>:\d+:err:", l))
        self.assertOrderedStreams(res, 2, n)

    def test_unreachable_store_fails_the_rank(self):
        # Rank 1 cannot reach the store: it must fail within the Gloo
        # timeout, and the summary must name it; never two jobs of one.
        t0 = time.monotonic()
        res = self.hr("-np", 2, "--gloo-timeout-seconds", "10",
                      *worker("info"), HVD_TEST_LOST_RANK="1",
                      HVD_TEST_LOST_PORT=closed_port(), timeout=60)
        elapsed = time.monotonic() - t0
        self.assertNotEqual(res.rc, 0, res.describe())
        self.assertLess(elapsed, 10 + 15, res.describe())
        self.assertEqual(self.json_lines(res).get(1), None, res.describe())
        summary = res.error_lines()
        self.assertTrue(summary and "rank 1 " in summary[0], res.describe())
        self.assertNoneLeft(timeout=10)

    def test_without_the_store_ranks_fail_instead_of_running_alone(self):
        res = self.hr("-np", 2, "--no-gloo-rendezvous", *worker("info"),
                      timeout=60)
        self.assertNotEqual(res.rc, 0, res.describe())
        self.assertEqual(self.json_lines(res), {}, res.describe())

    def test_elastic_job_fails_at_start_with_one_line(self):
        # Real Horovod's elastic mode needs Horovod's own driver: the ranks
        # fail at once, never a hang, never jobs of one, and horovodrun
        # says what to use instead.
        res = self.hr("-np", 2, "--min-np", 2, "-H", "localhost:2",
                      *worker("info"), timeout=60)
        self.assertNotEqual(res.rc, 0, res.describe())
        self.assertEqual(self.json_lines(res), {}, res.describe())
        self.assertIn("ranks that link real Horovod cannot run an elastic "
                      "job under this horovodrun", res.err, res.describe())
        self.assertNoneLeft(timeout=10)

    def test_under_mpi_ranks_use_mpi(self):
        # As under Horovod's own launcher with --mpi: MPI, not Gloo.
        res = self.hr("-np", 2, "--mpi", *worker("info"))
        self.assertRc(res, 0)
        got = self.json_lines(res)
        self.assertEqual(sorted(got), [0, 1], res.describe())
        for r, d in got.items():
            self.assertEqual((d["rank"], d["size"]), (r, 2))
            self.assertTrue(d["mpi"] and not d["gloo"], res.describe())

    def test_store_refuses_strangers(self):
        job = self.start_hr("-np", 2, "--verbose", *worker("sleep"))
        job.wait_line(lambda l: ">:ready " in l, timeout=60, count=2)
        line = [l for l in job.text_lines() if ">:ready " in l][0]
        addr, port = line.rsplit(" ", 2)[-2:]
        port = int(port)
        self.assertEqual(addr, "127.0.0.1", line)
        # From a job host (this one), the store answers like Horovod's.
        with socket.create_connection((addr, port), timeout=5) as s:
            s.sendall(b"GET /global/no-such-key HTTP/1.1\r\nHost: x\r\n"
                      b"Connection: close\r\n\r\n")
            self.assertRegex(s.recv(4096), rb"^HTTP/1\.[01] 404 ")
        # From a loopback address that is no job host, it refuses.
        s = socket.socket()
        s.settimeout(5)
        s.bind((STRANGER, 0))
        s.connect((addr, port))
        try:
            s.sendall(b"GET /global/0 HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = s.recv(4096)
        except OSError:
            reply = b""
        finally:
            s.close()
        self.assertEqual(reply, b"", "a stranger got an answer")
        job.signal(2)
        job.wait(timeout=30)
        warns = [l for l in job.err.splitlines() if l.startswith(WARN) and
                 STRANGER in l]
        self.assertEqual(len(warns), 1, job.describe())
        self.assertNoneLeft(timeout=10)


class SshTest(HorovodCase):
    """Real Horovod ranks on two loopback SSH hosts, two ranks each."""

    remote = True

    def test_places(self):
        self.check_places(4)

    def test_collectives(self):
        self.check_collectives(4)

    def test_training_ends_with_equal_weights(self):
        self.check_training(4)

    def test_killed_remote_rank_ends_the_job(self):
        self.check_killed_rank(4, 3)


if __name__ == "__main__":
    hvdtest.main()
