"""Integration tests: the rendezvous an hvd-agent carries (JOB's
carry_rdv), with the agent driven directly over its pipes as horovodrun
drives it: its ranks reach it on loopback, and each connection's bytes
travel as RDV_OPEN, RDV_DATA and RDV_CLOSE frames (man/hvd-agent.8,
launcher/lib/proto.h)."""

import socket
import struct
import sys

import hvdtest
from test_agent_elastic import Agent, HELLO, PROTO_VERSION, frame, job

RDV_OPEN, RDV_DATA, RDV_CLOSE = 17, 18, 19
# launcher/lib/proto.h: streams beyond one per rank.
CARRY_EXTRA = 64

# The rank says where its rendezvous is, sends "ping", prints what comes
# back until the connection ends, then waits for a line on stdin (never):
# the test ends it.
RANK = r'''
import os, socket, sys, time
e = os.environ
print("env", e["HOROVOD_RENDEZVOUS_ADDR"], e["HOROVOD_RENDEZVOUS_PORT"],
      e.get("HVD_DATA_ADDR"), flush=True)
s = socket.create_connection((e["HOROVOD_RENDEZVOUS_ADDR"],
                              int(e["HOROVOD_RENDEZVOUS_PORT"])))
s.sendall(b"ping")
while True:
    b = s.recv(100)
    print("got", b.decode() or "eof", flush=True)
    if not b:
        break
time.sleep(30)
'''


def wrap(kind, sid, data=b""):
    return frame(kind, struct.pack(">I", sid) + data)


class AgentCarryTest(hvdtest.TestCase):

    def start(self, carry=1):
        env = self.env()
        ag = Agent(self, env)
        kind, payload = ag.next()
        self.assertEqual(kind, HELLO)
        self.assertEqual(struct.unpack_from(">I", payload)[0], PROTO_VERSION)
        base = ["%s=%s" % kv for kv in sorted(env.items())]
        ag.send(job(self.tmp, [sys.executable, "-c", RANK], base, 1000,
                    [(0, 0, ["HOROVOD_RANK=0",
                             "HOROVOD_RENDEZVOUS_ADDR=127.0.0.1",
                             "HOROVOD_RENDEZVOUS_PORT=1"])],
                    carry_rdv=carry))
        return ag

    def finish(self, ag, stop=True):
        """Stops the agent's rank (STOP now) unless it stopped by itself;
        reads every frame until the agent exits 0; returns its stderr."""
        if stop:
            ag.send(frame(5, b"\x01"))
        while ag.next(10) is not None:
            pass
        self.assertTrue(ag.eof, "hvd-agent did not finish")
        self.assertEqual(ag.proc.wait(10), 0)
        return ag.proc.stderr.read().decode()

    def frames_of(self, ag, kind, sid):
        return ag.wait_for(lambda k, p: k == kind and
                           struct.unpack_from(">I", p)[0] == sid,
                           "frame %d of stream %d" % (kind, sid))[1][4:]

    def test_a_ranks_connection_travels_on_the_channel(self):
        ag = self.start()
        words = ag.wait_line(0).split()
        # The rank registers with its agent, on loopback, and tells its
        # peers the address on its route to the server.
        self.assertEqual(words[0], "env")
        self.assertEqual(words[1], "127.0.0.1")
        self.assertNotEqual(words[2], "1")
        self.assertEqual(words[3], "127.0.0.1")
        self.assertEqual(self.frames_of(ag, RDV_OPEN, 0), b"")
        self.assertEqual(self.frames_of(ag, RDV_DATA, 0), b"ping")
        ag.send(wrap(RDV_DATA, 0, b"pong"))
        ag.wait_for(lambda k, p: k == 6 and p.endswith(b"got pong"),
                    "the rank's line with the server's answer")
        # Anyone else on the host may connect too: a stream of its own,
        # whose end reaches horovodrun.
        c = socket.create_connection(("127.0.0.1", int(words[2])))
        self.assertEqual(self.frames_of(ag, RDV_OPEN, 1), b"")
        c.close()
        self.assertEqual(self.frames_of(ag, RDV_CLOSE, 1), b"")
        # horovodrun ends the rank's stream: the rank sees it end.
        ag.send(wrap(RDV_CLOSE, 0))
        ag.wait_for(lambda k, p: k == 6 and p.endswith(b"got eof"),
                    "the rank's line saying its connection ended")
        # Data for a stream closed here is no error (it crossed the close).
        ag.send(wrap(RDV_DATA, 1, b"late"))
        self.assertEqual(self.finish(ag), "")

    def test_streams_are_bounded(self):
        ag = self.start()
        port = int(ag.wait_line(0).split()[2])
        self.frames_of(ag, RDV_OPEN, 0)
        # One rank: its stream and CARRY_EXTRA more; the next is closed.
        extra = [socket.create_connection(("127.0.0.1", port))
                 for _ in range(CARRY_EXTRA + 1)]
        self.frames_of(ag, RDV_OPEN, CARRY_EXTRA)
        last = extra[-1]
        last.settimeout(10)
        self.assertEqual(last.recv(10), b"")
        for c in extra:
            c.close()
        self.assertEqual(self.frames_of(ag, RDV_CLOSE, CARRY_EXTRA), b"")
        self.assertEqual(
            [p for k, p in ag.frames if k == RDV_OPEN and
             struct.unpack(">I", p)[0] > CARRY_EXTRA], [])
        self.assertEqual(self.finish(ag), "")

    def test_a_stream_never_opened_is_a_bad_message(self):
        ag = self.start()
        self.frames_of(ag, RDV_OPEN, 0)
        ag.send(wrap(RDV_DATA, 7, b"x"))
        self.assertIn("bad message from the launcher",
                      self.finish(ag, stop=False))

    def test_without_carry_the_rank_reaches_the_server_itself(self):
        ag = self.start(carry=0)
        self.assertEqual(ag.wait_line(0).split(), ["env", "127.0.0.1", "1",
                                                   "None"])
        ag.send(wrap(RDV_DATA, 0, b"x"))
        self.assertIn("bad message from the launcher",
                      self.finish(ag, stop=False))


if __name__ == "__main__":
    hvdtest.main()
