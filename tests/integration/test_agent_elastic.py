"""Integration tests: hvd-agent driven directly over its pipes, as
horovodrun drives it in an elastic job: RANKS adds ranks to the running
job, KILL stops one of them (man/hvd-agent.8, launcher/lib/proto.h)."""

import errno
import os
import select
import signal
import struct
import subprocess
import time

import hvdtest

# launcher/lib/proto.h's enum hvd_msg and enum hvd_exit_kind.
HELLO, JOB, STDIN, SIGNAL, STOP, LINE, EXIT, NOTE, PING, RANKS, KILL = \
    range(1, 12)
EXIT_CODE, EXIT_SIGNAL, EXIT_SPAWN = 0, 1, 2
STDOUT = 1
# HVD_PROTO_VERSION, the first word of HELLO.
PROTO_VERSION = 4

# common/frame.h: u16 magic "HV", u8 version, u8 type, u32 payload length.
HDR = struct.Struct(">HBBI")
MAGIC, VERSION = 0x4856, 1


def frame(kind, payload=b""):
    return HDR.pack(MAGIC, VERSION, kind, len(payload)) + payload


def s32(s):
    b = s.encode()
    return struct.pack(">I", len(b)) + b


def vec(items):
    return struct.pack(">I", len(items)) + b"".join(s32(s) for s in items)


def ranks_payload(ranks):
    """A count, then each (rank, local_rank, env) as JOB and RANKS lay
    them out (put_ranks in launcher/lib/proto.c)."""
    out = struct.pack(">I", len(ranks))
    for rank, local_rank, env in ranks:
        out += struct.pack(">II", rank, local_rank) + vec(env)
    return out


def job(cwd, argv, env, grace_ms, ranks, carry_rdv=0):
    return frame(JOB, s32(cwd) + vec(argv) + vec(env) +
                 struct.pack(">IBBB", grace_ms, 0, 0, carry_rdv) +
                 ranks_payload(ranks))


def rank_env(rank):
    return ["HOROVOD_RANK=%d" % rank]


# Every rank prints its number and process id (its process group), then
# rank 7 exits 0 and the others wait, ignoring SIGTERM when told to.
RANK = ('[ -n "$IGNORE_TERM" ] && trap "" TERM; '
        'echo "rank $HOROVOD_RANK pid $$"; '
        '[ "$HOROVOD_RANK" = 7 ] && exit 0; exec sleep 30')


class Agent:
    """An hvd-agent on pipes, its frames read as they come."""

    def __init__(self, test, env):
        self.test = test
        self.proc = subprocess.Popen(
            [hvdtest.HVD_AGENT], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True)
        hvdtest._popens.append(self.proc)
        test.addCleanup(self.close)
        self.buf = b""
        self.eof = False
        self.frames = []  # (type, payload) read, in order

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0 or self.eof:
            return False
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 65536)
        if not chunk:
            self.eof = True
        self.buf += chunk
        return bool(chunk)

    def next(self, timeout=10):
        """The next frame, or None at EOF or after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= HDR.size:
                magic, version, kind, n = HDR.unpack_from(self.buf)
                self.test.assertEqual((magic, version), (MAGIC, VERSION))
                if len(self.buf) >= HDR.size + n:
                    payload = self.buf[HDR.size:HDR.size + n]
                    self.buf = self.buf[HDR.size + n:]
                    self.frames.append((kind, payload))
                    return kind, payload
            if not self._fill(deadline):
                return None

    def wait_for(self, pred, what, timeout=10):
        """The first frame, read already or read now, for which
        pred(kind, payload) holds."""
        for f in self.frames:
            if pred(*f):
                return f
        deadline = time.monotonic() + timeout
        while True:
            f = self.next(max(0.0, deadline - time.monotonic()))
            self.test.assertIsNotNone(f, "no %s from hvd-agent; got %r" %
                                      (what, self.frames))
            if pred(*f):
                return f

    def wait_line(self, rank):
        """The text of rank's first stdout line."""
        f = self.wait_for(lambda k, p: k == LINE and
                          struct.unpack_from(">IB", p) == (rank, STDOUT),
                          "line of rank %d" % rank)
        return f[1][6:].decode()

    def wait_exit(self, rank):
        """(kind, code) of rank's EXIT."""
        f = self.wait_for(lambda k, p: k == EXIT and
                          struct.unpack_from(">I", p)[0] == rank,
                          "EXIT of rank %d" % rank)
        self.test.assertEqual(len(f[1]), 9)
        return struct.unpack(">Bi", f[1][4:])

    def wait_done(self, timeout=5):
        """Waits for the agent to exit by itself; returns its stderr."""
        f = self.next(timeout)
        self.test.assertIsNone(f, "a frame after the last EXIT: %r" % (f,))
        self.test.assertTrue(self.eof, "hvd-agent did not finish")
        self.test.assertEqual(self.proc.wait(timeout), 0)
        return self.proc.stderr.read().decode()


def group_alive(pgid):
    """Whether a process other than a zombie is in process group pgid."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class AgentElasticTest(hvdtest.TestCase):

    def start(self, ranks, grace_ms=5000, **extra):
        env = self.env(**extra)
        ag = Agent(self, env)
        kind, payload = ag.next()
        self.assertEqual(kind, HELLO)
        self.assertEqual(struct.unpack_from(">I", payload)[0], PROTO_VERSION)
        base = ["%s=%s" % kv for kv in sorted(env.items())]
        ag.send(job(self.tmp, hvdtest.sh(RANK), base, grace_ms,
                    [(r, lr, rank_env(r)) for r, lr in ranks]))
        return ag

    def pid_of(self, ag, rank):
        text = ag.wait_line(rank)
        words = text.split()
        self.assertEqual(words[:3], ["rank", str(rank), "pid"], text)
        return int(words[3])

    def assertGroupsGone(self, pids):
        for pid in pids:
            self.assertTrue(hvdtest.wait_until(
                lambda: not group_alive(pid), timeout=5),
                "process group %d still has processes" % pid)
        self.assertNoneLeft(timeout=5)

    def test_ranks_then_kill(self):
        t0 = time.monotonic()
        ag = self.start([(0, 0)])
        pid0 = self.pid_of(ag, 0)
        # A KILL for a rank the agent does not know is no error: were it
        # one, the agent would stop reading and never start rank 7.
        ag.send(frame(KILL, struct.pack(">IB", 99, 0)))
        ag.send(frame(RANKS, ranks_payload([(7, 1, rank_env(7))])))
        pid7 = self.pid_of(ag, 7)
        self.assertEqual(ag.wait_exit(7), (EXIT_CODE, 0))
        # Rank 0 still runs: the agent waits for every rank it has.
        self.assertTrue(group_alive(pid0))
        ag.send(frame(KILL, struct.pack(">IB", 0, 0)))
        self.assertEqual(ag.wait_exit(0), (EXIT_SIGNAL, signal.SIGTERM))
        err = ag.wait_done()
        self.assertEqual(err, "")
        self.assertGroupsGone([pid0, pid7])
        self.assertLess(time.monotonic() - t0, 10)

    def test_kill_grace_and_now(self):
        # Both ranks ignore SIGTERM: KILL now=1 ends rank 1 at once, KILL
        # now=0 ends rank 0 with SIGKILL once the grace has passed.
        ag = self.start([(0, 0), (1, 1)], grace_ms=300, IGNORE_TERM="1")
        pids = [self.pid_of(ag, 0), self.pid_of(ag, 1)]
        ag.send(frame(KILL, struct.pack(">IB", 1, 1)))
        self.assertEqual(ag.wait_exit(1), (EXIT_SIGNAL, signal.SIGKILL))
        # A KILL for a rank already reaped is no error either.
        ag.send(frame(KILL, struct.pack(">IB", 1, 0)))
        t = time.monotonic()
        ag.send(frame(KILL, struct.pack(">IB", 0, 0)))
        self.assertEqual(ag.wait_exit(0), (EXIT_SIGNAL, signal.SIGKILL))
        self.assertGreaterEqual(time.monotonic() - t, 0.25)
        self.assertEqual(ag.wait_done(), "")
        self.assertGroupsGone(pids)

    def test_ranks_refused_while_stopping(self):
        ag = self.start([(0, 0)])
        pid0 = self.pid_of(ag, 0)
        # One write, so one read: were rank 0 reported in between, the
        # agent would finish before it read RANKS.
        ag.send(frame(STOP, b"\0") +
                frame(RANKS, ranks_payload([(3, 1, rank_env(3)),
                                            (4, 2, rank_env(4))])))
        self.assertEqual(ag.wait_exit(3), (EXIT_SPAWN, errno.ECANCELED))
        self.assertEqual(ag.wait_exit(4), (EXIT_SPAWN, errno.ECANCELED))
        self.assertEqual(ag.wait_exit(0), (EXIT_SIGNAL, signal.SIGTERM))
        self.assertEqual(ag.wait_done(), "")
        self.assertFalse([f for f in ag.frames if f[0] == LINE and
                          struct.unpack_from(">I", f[1])[0] in (3, 4)])
        self.assertGroupsGone([pid0])

    def test_ranks_before_job_is_a_protocol_error(self):
        env = self.env()
        ag = Agent(self, env)
        self.assertEqual(ag.next()[0], HELLO)
        ag.send(frame(RANKS, ranks_payload([(0, 0, rank_env(0))])))
        err = ag.wait_done()
        self.assertIn("bad message from the launcher", err)


if __name__ == "__main__":
    hvdtest.main()
