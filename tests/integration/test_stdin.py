"""Integration tests: horovodrun's stdin goes to rank 0 only."""

import fcntl
import hashlib
import os
import pty
import subprocess
import termios
import time

import hvdtest
from hvdtest import py
from launchmode import AgentsMode, MpiMode

READ_ALL = r"""
import os, sys, time
t = time.monotonic()
data = sys.stdin.buffer.read()
print("rank %s read %r in %.1f s" % (os.environ["HOROVOD_RANK"], data,
                                     time.monotonic() - t))
"""


class StdinChecks:
    """Checks of either launch mode (launchmode.py)."""

    def test_rank0_gets_stdin_others_eof(self):
        res = self.run_hr("-np", "3", *py(READ_ALL), input=b"hello\n")
        self.assertRc(res, 0)
        lines = sorted(l.rsplit(" in ", 1)[0] for l in res.out_lines)
        self.assertEqual(lines, [
            "[0,0]<stdout>:rank 0 read b'hello\\n'",
            "[1,1]<stdout>:rank 1 read b''",
            "[2,2]<stdout>:rank 2 read b''"])

    def test_others_get_eof_while_stdin_stays_open(self):
        script = r"""
import os, sys
r = os.environ["HOROVOD_RANK"]
if r == "0":
    print("rank 0 line", repr(sys.stdin.readline()), flush=True)
    print("rank 0 rest", repr(sys.stdin.read()), flush=True)
else:
    print("rank", r, "eof", repr(sys.stdin.read()), flush=True)
"""
        job = self.start_hr("-np", "2", *py(script), stdin=subprocess.PIPE)
        # Rank 1 sees EOF although horovodrun's stdin is still open.
        job.wait_line(lambda l: l == "[1,1]<stdout>:rank 1 eof ''",
                      timeout=10)
        job.proc.stdin.write(b"first\n")
        job.proc.stdin.flush()
        job.wait_line(lambda l: l == "[0,0]<stdout>:rank 0 line 'first\\n'",
                      timeout=10)
        self.assertTrue(job.alive())
        job.proc.stdin.write(b"second\nthird")
        job.proc.stdin.close()
        job.wait_line(lambda l: l == "[0,0]<stdout>:rank 0 rest "
                      "'second\\nthird'", timeout=10)
        self.assertEqual(job.wait(timeout=20), 0, job.describe())

    def test_large_stdin_reaches_rank0_intact(self):
        data = bytes(range(256)) * 8192  # 2 MiB, every byte value
        # Rank 0 reads late, so its stdin pipe fills and the rest of the
        # data must wait in the launcher or the agent, not be lost.
        script = ("import hashlib, sys, time\n"
                  "time.sleep(1)\n"
                  "d = sys.stdin.buffer.read()\n"
                  "print(len(d), hashlib.sha256(d).hexdigest())\n")
        res = self.run_hr("-np", "2", *py(script), input=data, timeout=60)
        self.assertRc(res, 0)
        self.assertIn("[0,0]<stdout>:%d %s" % (
            len(data), hashlib.sha256(data).hexdigest()), res.out_lines)
        self.assertIn("[1,1]<stdout>:0 %s" % hashlib.sha256(b"").hexdigest(),
                      res.out_lines)

    def test_open_stdin_does_not_hold_the_job(self):
        # Nobody reads stdin and it never closes: the job still ends.
        job = self.start_hr("-np", "2", *py("print('done')"),
                            stdin=subprocess.PIPE)
        self.assertEqual(job.wait(timeout=12), 0, job.describe())
        self.assertEqual(sorted(job.text_lines()),
                         ["[0,0]<stdout>:done", "[1,1]<stdout>:done"])
        job.proc.stdin.close()

    def test_terminal_stdin_does_not_hold_the_job(self):
        # The usual interactive case: horovodrun in the foreground of a
        # terminal, ranks that never read stdin. The job ends when they do,
        # without waiting for a key press.
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)

        def make_foreground():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        t0 = time.monotonic()
        p = subprocess.Popen(
            self.hr_args("-np", "2", *py("print('done')")), stdin=slave,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(),
            cwd=self.tmp, preexec_fn=make_foreground)
        os.close(slave)
        hvdtest._popens.append(p)
        try:
            out, err = p.communicate(timeout=12)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("horovodrun with a terminal as stdin did not exit "
                      "after its ranks did\nstdout: %r\nstderr: %r" %
                      (out, err))
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sorted(out.decode().splitlines()),
                         ["[0,0]<stdout>:done", "[1,1]<stdout>:done"])
        self.assertLess(time.monotonic() - t0, 15)

    def test_background_job_gives_rank0_end_of_input(self):
        # `horovodrun ... &`: the terminal belongs to the foreground, so
        # rank 0 reads end of input at once rather than the job being
        # stopped by SIGTTIN.
        res = self.run_hr_behind_terminal("-np", "2", *py(READ_ALL))
        self.assertRc(res, 0)
        self.assertEqual(sorted(l[:len("[0,0]<stdout>:rank 0 read b'' in")]
                                for l in res.out_lines),
                         ["[0,0]<stdout>:rank 0 read b'' in",
                          "[1,1]<stdout>:rank 1 read b'' in"],
                         res.describe())

    def test_terminal_stdin_reaches_rank0(self):
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)

        def make_foreground():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        script = ("import sys; print('got', repr(sys.stdin.readline()), "
                  "flush=True)")
        p = subprocess.Popen(
            self.hr_args("-np", "1", *py(script)), stdin=slave,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(),
            cwd=self.tmp, preexec_fn=make_foreground)
        os.close(slave)
        hvdtest._popens.append(p)
        time.sleep(1)
        # A line, then Ctrl-D: end of input.
        os.write(master, b"typed\n\x04")
        try:
            out, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail("no exit\nstdout: %r\nstderr: %r" % (out, err))
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.decode().splitlines(),
                         ["[0,0]<stdout>:got 'typed\\n'"])


class StdinTest(AgentsMode, StdinChecks, hvdtest.TestCase):
    """With horovodrun's own agents, also on two hosts."""

    def test_rank0_on_second_listed_host_gets_stdin(self):
        # Rank 0 lives on the first host; stdin follows rank 0, not host 0.
        res = self.run_hr("-np", "2", "-H", "127.0.0.1:1,localhost:1",
                          *py(READ_ALL), input=b"to-rank-0")
        self.assertRc(res, 0)
        lines = sorted(l.rsplit(" in ", 1)[0] for l in res.out_lines)
        self.assertEqual(lines, ["[0,0]<stdout>:rank 0 read b'to-rank-0'",
                                 "[1,0]<stdout>:rank 1 read b''"])


    def test_stdin_that_rank0_does_not_read_waits_in_horovodrun(self):
        # An endless producer and a rank 0 that reads late: horovodrun
        # keeps at most 1 MiB on its way to the agent beyond what rank 0's
        # pipe took, so the producer is held back, and nothing it wrote is
        # lost. (Before, the agent queued all of it: 1.9 GiB in 7 s.)
        script = ("import sys, time\n"
                  "print('ready', flush=True)\n"
                  "time.sleep(3)\n"
                  "print('read', len(sys.stdin.buffer.read()))\n")
        job = self.start_hr("-np", "1", *py(script), stdin=subprocess.PIPE)
        job.wait_line(lambda l: l == "[0,0]<stdout>:ready", timeout=20)
        fd = job.proc.stdin.fileno()
        os.set_blocking(fd, False)
        block, sent, limit = b"x" * 65536, 0, 64 << 20
        end = time.monotonic() + 2
        while time.monotonic() < end and sent < limit:
            try:
                sent += os.write(fd, block)
            except BlockingIOError:
                time.sleep(0.001)
        job.proc.stdin.close()
        self.assertEqual(job.wait(timeout=30), 0, job.describe())
        # 1 MiB on its way, and three pipes of 64 KiB.
        self.assertLess(sent, 8 << 20, "horovodrun took %d bytes of stdin "
                        "that rank 0 did not read" % sent)
        self.assertIn("[0,0]<stdout>:read %d" % sent, job.text_lines(),
                      job.describe())


class StdinMpiTest(MpiMode, StdinChecks, hvdtest.TestCase):
    """The same checks under horovodrun --mpi."""


if __name__ == "__main__":
    hvdtest.main()
