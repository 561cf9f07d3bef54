"""Integration tests: the rendezvous server against strangers. Garbage,
silent, slow and oversized peers are refused or timed out with one line
each; a flood of them from another process does not stop a real job; a
recorded REGISTER or PEERS frame does not work twice; an idle rank is not
timed out; the job secret shows up in no command line, log or file."""

import json
import os
import re
import subprocess
import sys
import time

import hvdtest
import rdvpeer
from hvdtest import PYTHON

COLLCHECK = os.environ.get("HVD_COLLCHECK", os.path.join(
    hvdtest.BUILD, "tests", "runtime", "collcheck"))
RDVIDLE = os.environ.get("HVD_RDVIDLE", os.path.join(
    hvdtest.BUILD, "tests", "integration", "rdvidle"))
RDVPEER = os.path.join(hvdtest.HERE, "rdvpeer.py")

WARN = hvdtest.WARN_PREFIX + "rendezvous: "
REFUSED_RE = re.compile(r"^" + re.escape(WARN) + r"refused a connection from "
                        r"127\.0\.0\.1:(\d+): (\S.*)$")
DONE_RE = re.compile(r"collcheck: rank (\d+) of (\d+): (\d+) checks, "
                     r"(\d+) failures")
# Must match REGISTER_TIMEOUT_MS in launcher/horovodrun/rdv.c.
REGISTER_TIMEOUT = 5.0


def listening_ports(pid):
    """TCP ports that process pid listens on (from /proc/net/tcp*)."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            col = row.split()
            if col[3] == "0A" and col[9] in inodes:
                ports.append(int(col[1].rsplit(":", 1)[1], 16))
    return ports


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rank_secret(marker):
    """The job secret, in hex, from the environment of a rank of the job
    marked marker (the one place it is meant to be), or None."""
    for pid, _, _ in hvdtest.marked_procs(marker):
        env = hvdtest._read("/proc/%d/environ" % pid) or b""
        m = re.search(rb"(?:^|\0)HOROVOD_SECRET_KEY=([0-9a-f]{64})", env)
        if m:
            return m.group(1).decode()
    return None


def sanitized(pid):
    """True when pid runs a sanitizer's runtime (its RSS means little)."""
    maps = hvdtest._read("/proc/%d/maps" % pid) or b""
    return b"libasan" in maps or b"libtsan" in maps


class RdvTestCase(hvdtest.TestCase):

    def assertRanksPass(self, out, np):
        done = DONE_RE.findall(out)
        self.assertEqual(sorted(int(d[0]) for d in done), list(range(np)),
                         out[-3000:])
        for _, size, checks, failures in done:
            self.assertEqual((int(size), int(failures)), (np, 0))
            self.assertGreater(int(checks), 150)

    def assertOneLineRefusals(self, err_lines, secret=None):
        """Every rendezvous warning is a well-formed line; returns
        {port: reason} of the refusals."""
        got = {}
        for line in err_lines:
            if not line.startswith(WARN):
                continue
            if secret:
                self.assertNotIn(secret.lower(), line.lower())
            if "more connection" in line or "only counted" in line:
                continue
            m = REFUSED_RE.match(line)
            self.assertIsNotNone(m, "badly formed refusal: %r" % line)
            got[int(m.group(1))] = m.group(2)
        return got


class BadPeerTest(RdvTestCase):

    def test_bad_peers_are_refused_or_timed_out(self):
        """Each kind of bad peer is ended the right way and named in one
        line; the job, which registers meanwhile, is unharmed."""
        out = os.path.join(self.tmp, "bad.json")
        script = ('if [ "$HOROVOD_RANK" = 0 ]; then exec %s %s badpeers %s '
                  '-- %s; else exec %s; fi' % (PYTHON, RDVPEER, out,
                                               COLLCHECK, COLLCHECK))
        res = self.run_hr("-np", 2, "sh", "-c", script, timeout=90)
        self.assertRc(res, 0)
        self.assertRanksPass(res.out, 2)
        with open(out) as f:
            peers = json.load(f)
        refused = self.assertOneLineRefusals(res.err_lines)
        for kind, p in sorted(peers.items()):
            with self.subTest(kind=kind):
                self.assertTrue(p["challenge"], p)
                self.assertTrue(p["closed"], p)
                self.assertIn(p["local_port"], refused,
                              "no line names %s's port\n%s" %
                              (kind, res.describe()))
                why = refused[p["local_port"]]
                if kind in ("silent", "half", "slow"):
                    # Closed at the registration deadline, not before,
                    # and a peer that trickles bytes is no exception.
                    self.assertGreater(p["after"], REGISTER_TIMEOUT - 0.5)
                    self.assertLess(p["after"], REGISTER_TIMEOUT + 3)
                    self.assertEqual(why, "it did not register within 5 s")
                    self.assertEqual(p.get("code"), -15, p)  # HVD_ETIMEDOUT
                else:
                    self.assertLess(p["after"], 2, p)
                    want = {
                        "oversize": "it announced a frame over the "
                                    "4096-byte limit before registering",
                        "toolong": "it announced a frame over the "
                                   "4096-byte limit before registering",
                        "garbage": "it does not speak the rendezvous "
                                   "protocol",
                        "wrongtype": "it spoke before registering",
                        "badmac": "it did not prove the job secret",
                    }[kind]
                    self.assertEqual(why, want)
        self.assertEqual(len(refused), len(peers), res.describe())

    def test_idle_rank_is_not_timed_out(self):
        """A registered rank's connection stays open however quiet, and
        once every rank has joined the server still listens (a rank may
        shut down and join again), unharmed by a connection that leaves
        without a word."""
        idle = int(REGISTER_TIMEOUT) + 2
        res = self.run_hr("-np", 2, RDVIDLE, idle, timeout=60)
        self.assertRc(res, 0)
        for r in (0, 1):
            self.assertIn("rdvidle: rank %d: rendezvous port open" % r,
                          res.out)
            self.assertIn("rdvidle: rank %d: HVD_OK: 2 4 6 8" % r, res.out)
        self.assertEqual(res.err, "")


class ReplayTest(RdvTestCase):

    def test_recorded_register_and_peers_do_not_work_twice(self):
        out = os.path.join(self.tmp, "proxy.json")
        # Ranks 1-3 come late so that the replay happens while the
        # server still takes registrations.
        script = ('if [ "$HOROVOD_RANK" = 0 ]; then exec %s %s proxy %s '
                  '-- %s; else sleep 2; exec %s; fi'
                  % (PYTHON, RDVPEER, out, COLLCHECK, COLLCHECK))
        job = self.start_hr("-np", 4, "sh", "-c", script)
        secret = hvdtest.wait_until(lambda: rank_secret(self.marker), 20)
        self.assertIsNotNone(secret, "no rank with a secret seen")
        secret = bytes.fromhex(secret)
        self.assertEqual(job.wait(60), 0, job.describe())
        self.assertRanksPass(job.out, 4)
        with open(out) as f:
            rec = json.load(f)
        up = [(t, bytes.fromhex(h)) for t, h in rec["up"]]
        down = [(t, bytes.fromhex(h)) for t, h in rec["down"]]
        challenge = [raw for t, raw in down if t == rdvpeer.CHALLENGE][0]
        register = [raw for t, raw in up if t == rdvpeer.REGISTER][0]
        peers = [raw for t, raw in down if t == rdvpeer.PEERS][0]
        server_nonce = challenge[rdvpeer.HDR + 4:]
        # The recording is genuine: it verifies against the session it
        # came from.
        self.assertTrue(rdvpeer.register_verifies(
            secret, server_nonce, register[rdvpeer.HDR:]))
        rank_nonce = rdvpeer.register_nonce(register[rdvpeer.HDR:])
        self.assertTrue(rdvpeer.peers_verifies(secret, rank_nonce,
                                               peers[rdvpeer.HDR:]))

        # Replayed on a new connection, REGISTER meets a new nonce.
        rp = rec["replay"]
        self.assertTrue(rp["challenge"], rp)
        self.assertEqual(rp["frames"], [rdvpeer.FAIL], rp)
        self.assertEqual(rp["code"], -17, rp)  # HVD_EAUTH
        self.assertTrue(rp["closed"], rp)
        refused = self.assertOneLineRefusals(job.text_lines("stderr"),
                                             secret.hex())
        self.assertEqual(refused, {rp["local_port"]:
                                   "it did not prove the job secret"})

        # Replayed to a client, PEERS is bound to another client nonce:
        # libhvd refuses it even though it carries the right secret's MAC.
        msg = self.peers_replay(secret, challenge, peers)
        self.assertIn("hvd_init failed", msg)
        self.assertIn("peer table is not signed with the job secret", msg)

    def peers_replay(self, secret, challenge, peers):
        """A fake server that sends a recorded challenge and PEERS frame
        to a real rank 0 started without horovodrun; returns its output."""
        import socket
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        ls.settimeout(20)
        env = hvdtest.base_env(
            self.marker, HOROVOD_RANK=0, HOROVOD_SIZE=4,
            HOROVOD_LOCAL_RANK=0, HOROVOD_LOCAL_SIZE=4, HOROVOD_CROSS_RANK=0,
            HOROVOD_CROSS_SIZE=1, HOROVOD_HOSTNAME="localhost",
            HOROVOD_RENDEZVOUS_ADDR="127.0.0.1",
            HOROVOD_RENDEZVOUS_PORT=ls.getsockname()[1],
            HOROVOD_SECRET_KEY=secret.hex(), HOROVOD_START_TIMEOUT=5)
        p = subprocess.Popen([COLLCHECK], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        try:
            c, _ = ls.accept()
            c.sendall(challenge)
            got, _, _ = rdvpeer.read_frames(c, time.monotonic() + 10, want=1)
            self.assertEqual(got[0][0], rdvpeer.REGISTER)
            # Our reimplementation of the format agrees with libhvd's.
            self.assertTrue(rdvpeer.register_verifies(
                secret, challenge[rdvpeer.HDR + 4:], got[0][1]))
            c.sendall(peers)
            out, _ = p.communicate(timeout=20)
            c.close()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            ls.close()
        return out.decode("utf-8", "replace")


class FloodTest(RdvTestCase):

    def test_job_starts_and_runs_through_a_flood(self):
        """Another process floods the port with bad connections from
        before the ranks register; the job succeeds in reasonable time and
        horovodrun's descriptors and memory stay bounded."""
        # The ranks wait so that the flood is in full swing (the server's
        # pending list full) when they register.
        script = "sleep 3; exec %s" % COLLCHECK
        t0 = time.monotonic()
        # Without the Gloo rendezvous, the rendezvous server's port is the
        # only one horovodrun listens on.
        job = self.start_hr("-np", 4, "--no-gloo-rendezvous", "sh", "-c",
                            script)
        port = hvdtest.wait_until(lambda: listening_ports(job.pid), 20)
        self.assertTrue(port, "horovodrun never listened\n" + job.describe())
        port = port[0]
        base_fds, base_rss = fd_count(job.pid), rss_kib(job.pid)
        asan = sanitized(job.pid)
        stats_file = os.path.join(self.tmp, "flood.json")
        flooder = subprocess.Popen([PYTHON, RDVPEER, "flood", str(port), "30",
                                    stats_file])
        self.addCleanup(lambda: flooder.poll() is None and flooder.kill())
        max_fds, max_rss = base_fds, base_rss
        while job.alive():
            max_fds = max(max_fds, fd_count(job.pid))
            max_rss = max(max_rss, rss_kib(job.pid))
            time.sleep(0.02)
        rc = job.wait(60)
        took = time.monotonic() - t0
        flooder.terminate()
        self.assertEqual(flooder.wait(30), 0)
        with open(stats_file) as f:
            stats = json.load(f)
        sys.stderr.write("flood: %s; horovodrun fds %d -> %d, RSS %d -> %d "
                         "KiB; job %.1f s\n" % (stats, base_fds, max_fds,
                                                base_rss, max_rss, took))
        self.assertEqual(rc, 0, job.describe())
        self.assertRanksPass(job.out, 4)
        self.assertGreater(stats["connected"], 500, stats)
        # The ranks slept 3 s; without the flood the job takes about 4 s.
        self.assertLess(took, 25, job.describe())
        # At most 4 + 512 unregistered connections, plus the job's own.
        self.assertLess(max_fds, base_fds + 4 + 512 + 16)
        # Nothing unregistered is held long or large (before: +22 MiB).
        # A sanitizer's quarantine keeps freed memory: no figure then.
        if not asan:
            self.assertLess(max_rss - base_rss, 12 * 1024)
        # A line for each of the first refusals, then only counts.
        self.assertOneLineRefusals(job.text_lines("stderr"))
        warns = [l for l in job.text_lines("stderr") if l.startswith(WARN)]
        sys.stderr.write("horovodrun said:\n  %s\n" % "\n  ".join(warns))
        self.assertLessEqual(len(warns), 10 + 3, job.describe())
        self.assertTrue(any("more connection" in l for l in warns), warns)


class SecretTest(RdvTestCase):

    def test_secret_in_no_argv_log_or_file(self):
        """With every log on, the secret appears in no process's command
        line, in no output, and in no file the job wrote."""
        home, tmpdir, cwd = (os.path.join(self.tmp, d)
                             for d in ("home", "tmp", "cwd"))
        outdir = os.path.join(cwd, "out")
        for d in (home, tmpdir, cwd):
            os.mkdir(d)
        badmac = os.path.join(tmpdir, "bad.json")
        script = ('sleep 1.5; if [ "$HOROVOD_RANK" = 0 ]; then exec %s %s '
                  'badpeers %s -- %s; else exec %s; fi'
                  % (PYTHON, RDVPEER, badmac, COLLCHECK, COLLCHECK))
        env = self.env(HOME=home, TMPDIR=tmpdir, HOROVOD_LOG_LEVEL="trace",
                       BADPEER_KINDS="badmac,garbage")
        job = self.start_hr("--verbose", "--log-level", "trace",
                            "--output-filename", outdir, "-np", 3,
                            "sh", "-c", script, env=env, cwd=cwd)
        secret, scans = None, 0
        while job.alive():
            secret = secret or rank_secret(self.marker)
            if secret:
                self.scan_processes(secret, job.pid)
                scans += 1
            time.sleep(0.1)
        self.assertEqual(job.wait(60), 0, job.describe())
        self.assertIsNotNone(secret, "no rank with a secret seen")
        self.assertGreater(scans, 3)
        self.assertRanksPass(job.out, 3)
        # The logs were on: horovodrun said what it did, refusals included.
        self.assertIn("rendezvous: all 3 ranks registered", job.err)
        self.assertIn("did not prove the job secret", job.err)
        raw = bytes.fromhex(secret)
        for name, text in (("stdout", job.out), ("stderr", job.err)):
            self.assertNotIn(secret, text.lower(), name)
        os.remove(badmac)  # the test's own file, not the job's
        written = 0
        for top in (home, tmpdir, cwd):
            for d, _, files in os.walk(top):
                for fn in files:
                    path = os.path.join(d, fn)
                    with open(path, "rb") as f:
                        data = f.read()
                    written += 1
                    for needle in (secret.encode(), secret.upper().encode(),
                                   raw):
                        self.assertNotIn(needle, data, path)
        self.assertGreater(written, 0, "--output-filename wrote nothing")

    def scan_processes(self, secret, hr_pid):
        """No process's argv holds the secret; neither does horovodrun's
        or an agent's environment (only ranks get it)."""
        needles = (secret.encode(), secret.upper().encode())
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            cmd = hvdtest._read("/proc/%d/cmdline" % pid) or b""
            for n in needles:
                self.assertNotIn(n, cmd, "pid %d's command line: %r" %
                                 (pid, cmd[:200]))
            comm = (hvdtest._read("/proc/%d/comm" % pid) or b"").strip()
            if pid == hr_pid or comm == b"hvd-agent":
                env = hvdtest._read("/proc/%d/environ" % pid) or b""
                if self.marker.encode() in env or pid == hr_pid:
                    self.assertNotIn(needles[0], env, "pid %d (%s)" %
                                     (pid, comm))


if __name__ == "__main__":
    hvdtest.main()
