"""hvd_shutdown() then hvd_init() again in one process (tests/runtime/
reinit.c): the same rank and size, right results, nothing left behind, on
every transport; a rank that does not come back is named; and an
hvd_init after the job's rendezvous server closed fails at once."""

import os
import re
import socket
import subprocess
import time
import unittest

import rdvpeer

HR = os.environ["HVD_HOROVODRUN"]
REINIT = os.environ["HVD_REINIT"]

DONE_RE = re.compile(r"reinit: rank (\d+) of (\d+): (\d+) cycles in [\d.]+ s, "
                     r"(\w+); descriptors (\d+) -> (\d+) -> (\d+), threads "
                     r"(\d+) -> (\d+) -> (\d+), shared-memory maps (\d+) -> "
                     r"(\d+) -> (\d+)")
# ThreadSanitizer starts a thread of its own with the process's first
# pthread_create (libhvd's engine), and keeps it.
UNDER_TSAN = os.environ.get("HVD_TEST_TSAN") == "1"


def run(args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("HOROVOD_START_TIMEOUT", None)
    e.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=e,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class ReinitTest(unittest.TestCase):

    def cycles(self, np, cmd, shm, **env):
        p = run([HR, "-np", str(np), *cmd, "50"], env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        done = DONE_RE.findall(p.stdout)
        self.assertEqual(sorted(int(d[0]) for d in done), list(range(np)),
                         p.stdout)
        for (_, size, n, verdict, fd0, fd1, fdn, th0, th1, thn, m0, m_in,
             m1) in done:
            self.assertEqual((int(size), int(n), verdict), (np, 50, "ok"))
            # Nothing grows from cycle to cycle, and nothing stays from
            # the first.
            self.assertEqual((fd1, fdn), (fd0, fd0), "descriptors leaked")
            self.assertEqual(th1, thn, "threads left by a cycle")
            if not UNDER_TSAN:
                self.assertEqual((th0, thn), ("1", "1"), "threads left")
            self.assertEqual(m0, m1, "shared memory left mapped")
            # The count would have seen a segment had there been one.
            self.assertEqual(int(m_in) > int(m0), shm, p.stdout)
        self.assertEqual(p.stderr, "")

    def test_fifty_cycles_on_every_transport(self):
        with self.subTest("shared memory"):
            self.cycles(3, [REINIT], True)
        with self.subTest("TCP ring"):
            self.cycles(3, [REINIT], False, HOROVOD_SHM_DISABLE="1")
        with self.subTest("hierarchical"):
            # Two hosts of two ranks, by the host name each rank reports.
            fake = 'HOROVOD_HOSTNAME=h$((HOROVOD_RANK / 2)) exec "$0" "$1"'
            self.cycles(4, ["sh", "-c", fake, REINIT], True)

    def test_rank_that_does_not_come_back_is_named(self):
        # Rank 1 shuts down and stays away; rank 0 initialises again.
        script = ('if [ "$HOROVOD_RANK" = 1 ]; then "$0" 1; exec sleep 30; '
                  'fi; exec "$0" 2')
        start = time.monotonic()
        p = run([HR, "-np", "2", "--start-timeout", "2", "sh", "-c", script,
                 REINIT])
        took = time.monotonic() - start
        self.assertIn("horovodrun: error: rendezvous: rank 1 did not call "
                      "hvd_init within 2 s", p.stderr)
        self.assertRegex(p.stdout, r"\[0,0\]<stdout>:reinit: cycle 1: "
                         r"hvd_init on rank 0: the rendezvous server "
                         r"refused: rank 1 did not call hvd_init")
        self.assertNotEqual(p.returncode, 0)
        self.assertLess(took, 20, "the job was not ended by rank 0's failure")

    def test_init_after_the_server_closed_fails_at_once(self):
        # A stand-in server: it sends its challenge, reads the registration
        # and closes, as horovodrun's does when the job ends.
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        ls.settimeout(20)
        env = dict(HOROVOD_RANK="0", HOROVOD_SIZE="2", HOROVOD_LOCAL_RANK="0",
                   HOROVOD_LOCAL_SIZE="2", HOROVOD_CROSS_RANK="0",
                   HOROVOD_CROSS_SIZE="1", HOROVOD_HOSTNAME="localhost",
                   HOROVOD_RENDEZVOUS_ADDR="127.0.0.1",
                   HOROVOD_RENDEZVOUS_PORT=str(ls.getsockname()[1]),
                   HOROVOD_SECRET_KEY="ab" * 32, HOROVOD_START_TIMEOUT="30")
        e = dict(os.environ, **env)
        p = subprocess.Popen([REINIT, "twice"], env=e, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            c, _ = ls.accept()
            c.sendall(rdvpeer.challenge_frame(os.urandom(rdvpeer.NONCE_LEN)))
            c.recv(4096)
            ls.close()
            c.close()
            out, _ = p.communicate(timeout=60)
        finally:
            ls.close()
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertIn("first hvd_init: -", out)
        self.assertIn("lost the rendezvous server", out)
        m = re.search(r"second hvd_init: -\d+ after ([\d.]+) s: (.*)", out)
        self.assertIsNotNone(m, out)
        self.assertLess(float(m.group(1)), 5, "waited for the start timeout")
        self.assertIn("the rendezvous server at 127.0.0.1:%d has closed: "
                      "horovodrun has ended the job" % int(
                          env["HOROVOD_RENDEZVOUS_PORT"]), m.group(2))


if __name__ == "__main__":
    unittest.main()
