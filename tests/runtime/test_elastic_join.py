"""libhvd's side of an elastic job (tests/runtime/elasticjoin.c) against
a fake rendezvous server: a process registers with its id (not a rank),
takes the rank, size, local and cross values of the server's ASSIGN,
connects to its peers in that order, hears notices of host changes
(hvd_host_updates), and after hvd_shutdown and hvd_init takes the next
generation's assignment; a notice sent before an assignment is dropped.
"""

import os
import re
import socket
import subprocess
import time
import unittest

import rdvpeer

ELASTICJOIN = os.environ["HVD_ELASTICJOIN"]
LINE_RE = re.compile(r"gen (\d+): id (\d+) rank (\d+) size (\d+) local "
                     r"(\d+)/(\d+) cross (\d+)/(\d+) sum (-?\d+) rc (-?\d+) "
                     r"updates (\d+) at (\d+)")


class FakeServer:
    """Meets two elastic processes, generation after generation."""

    def __init__(self, secret):
        self.secret = secret
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.ls.settimeout(30)
        self.port = self.ls.getsockname()[1]

    def register(self):
        """Accepts one process: (connection, its REGISTER fields)."""
        c, _ = self.ls.accept()
        c.settimeout(30)
        nonce = os.urandom(rdvpeer.NONCE_LEN)
        c.sendall(rdvpeer.challenge_frame(nonce))
        got, _, _ = rdvpeer.read_frames(c, time.monotonic() + 30, want=1)
        ftype, payload, _ = got[0]
        assert ftype == rdvpeer.REGISTER, ftype
        assert rdvpeer.register_verifies(self.secret, nonce, payload)
        return c, rdvpeer.register_fields(payload)

    def generation(self, order, notice_before=None, notice_after=None):
        """Registers both processes; order lists the ids by new rank.
        Returns the REGISTER fields by id and the connections."""
        conns, regs = {}, {}
        for _ in order:
            c, f = self.register()
            conns[f[0]], regs[f[0]] = c, f
        table = [(regs[i][3], regs[i][4], regs[i][5]) for i in order]
        for rank, i in enumerate(order):
            c = conns[i]
            if notice_before:
                c.sendall(rdvpeer.hosts_frame(*notice_before))
            c.sendall(rdvpeer.assign_frame(self.secret, regs[i][2], rank,
                                           len(order), rank, len(order), 0,
                                           1))
            c.sendall(rdvpeer.peers_frame(self.secret, regs[i][2], table))
            if notice_after:
                c.sendall(rdvpeer.hosts_frame(*notice_after))
        return regs, conns

    @staticmethod
    def goodbye(conns):
        """Waits for each process's BYE, then closes as the server does."""
        for c in conns.values():
            got, _, _ = rdvpeer.read_frames(c, time.monotonic() + 30,
                                            want=1)
            assert got and got[0][0] == rdvpeer.BYE, got
            c.close()


class ElasticJoinTest(unittest.TestCase):

    def test_assignment_notices_and_next_generation(self):
        secret = os.urandom(32)
        srv = FakeServer(secret)
        procs = []
        try:
            for ident in (5, 6):
                env = dict(os.environ, HOROVOD_RANK=str(ident - 5),
                           HOROVOD_SIZE="2", HOROVOD_LOCAL_RANK=str(ident - 5),
                           HOROVOD_LOCAL_SIZE="2", HOROVOD_CROSS_RANK="0",
                           HOROVOD_CROSS_SIZE="1", HOROVOD_HOSTNAME="h0",
                           HOROVOD_RENDEZVOUS_ADDR="127.0.0.1",
                           HOROVOD_RENDEZVOUS_PORT=str(srv.port),
                           HOROVOD_SECRET_KEY=secret.hex(),
                           HOROVOD_ELASTIC="1",
                           HOROVOD_ELASTIC_ID=str(ident))
                procs.append(subprocess.Popen(
                    [ELASTICJOIN, "2"], env=env, text=True,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL))
            # Generation 1: the ids in reverse order, then a notice.
            regs, conns = srv.generation([6, 5],
                                         notice_after=(1000, 2))
            self.assertEqual(sorted(regs), [5, 6])
            for f in regs.values():
                self.assertEqual(f[1], 0, "an elastic process registers "
                                 "with size 0")
            srv.goodbye(conns)
            # Generation 2: a notice before the assignment is dropped.
            regs, conns = srv.generation([5, 6], notice_before=(2000, 1))
            srv.goodbye(conns)
            outs = [p.communicate(timeout=30)[0] for p in procs]
        finally:
            srv.ls.close()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        got = {}
        for out, p in zip(outs, procs):
            self.assertEqual(p.returncode, 0, out)
            for m in LINE_RE.finditer(out):
                got[(int(m.group(1)), int(m.group(2)))] = [
                    int(x) for x in m.groups()[2:]]
        # rank size local/ls cross/cs sum rc updates at
        self.assertEqual(got[(0, 6)], [0, 2, 0, 2, 0, 1, 11, 0, 2, 1000])
        self.assertEqual(got[(0, 5)], [1, 2, 1, 2, 0, 1, 11, 0, 2, 1000])
        self.assertEqual(got[(1, 5)], [0, 2, 0, 2, 0, 1, 11, 0, 0, 0])
        self.assertEqual(got[(1, 6)], [1, 2, 1, 2, 0, 1, 11, 0, 0, 0])


if __name__ == "__main__":
    unittest.main()
