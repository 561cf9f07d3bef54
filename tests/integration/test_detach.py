"""Integration tests: horovodrun --detach, then ps, logs (-f, --rank,
--tail), attach with Ctrl-C, stop, a SIGKILLed controller, another uid
refused by the job's socket, and a reader that never reads."""

import os
import re
import signal
import socket
import struct
import subprocess
import time

import hvdtest
from launchmode import AgentsMode, MpiMode
from test_tty import Tmux

# Each rank prints numbered lines with a progress bar between them, waits
# for the test's go file (when one is given), ends the bar and says done.
LINES = r"""
import os, sys, time
r = int(os.environ["HOROVOD_RANK"])
n = int(sys.argv[1])
go = sys.argv[2] if len(sys.argv) > 2 else ""
for i in range(n):
    print("line %d of rank %d" % (i, r), flush=True)
    sys.stderr.write("\rbar %d" % i)
    sys.stderr.flush()
    time.sleep(0.01)
while go and not os.path.exists(go):
    time.sleep(0.02)
sys.stderr.write("\n")
print("done %d" % r, flush=True)
"""

# Ranks that tick until they are stopped.
FOREVER = r"""
import os, time
r = int(os.environ["HOROVOD_RANK"])
while True:
    print("tick %d" % r, flush=True)
    time.sleep(0.1)
"""

PREFIX = re.compile(r"^\[(\d+),(\d+)\]<(stdout|stderr)>:(.*)$")


def frame(kind, payload):
    """A control-socket frame: magic, version, type, length, payload."""
    return struct.pack(">HBBI", 0x4856, 1, kind, len(payload)) + payload


def logs_request(follow, rank=-1, tail=-1):
    return frame(1, struct.pack(">Bii", follow, rank, tail))


class DetachChecks:
    """Checks of either launch mode (launchmode.py), which --detach
    takes; the subcommands take none."""

    def setUp(self):
        super().setUp()
        self.xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(self.xdg, 0o700)

    def hr_env(self):
        return self.env(XDG_RUNTIME_DIR=self.xdg)

    def hr(self, *args, timeout=60):
        return hvdtest.run(hvdtest.hr_args(*args), env=self.hr_env(),
                           timeout=timeout, cwd=self.tmp)

    def detach(self, np, script, *args):
        path = os.path.join(self.tmp, "rank.py")
        with open(path, "w") as f:
            f.write(script)
        r = self.hr("--detach", *self.MODE, "-np", np, hvdtest.PYTHON, path,
                    *args)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertRegex(r.out, r"^[0-9a-f]{8}\n$", r.describe())
        job = r.out.strip()
        self.assertIn("job %s runs detached" % job, r.err)
        self.addCleanup(self.kill_job, job)
        return job

    def job_dir(self, job):
        return os.path.join(self.xdg, "horovodrun", job)

    def info(self, job):
        with open(os.path.join(self.job_dir(job), "info")) as f:
            return dict(l.rstrip("\n").split(" ", 1) for l in f if " " in l)

    def kill_job(self, job):
        try:
            os.kill(int(self.info(job)["pid"]), signal.SIGKILL)
        except (OSError, KeyError, ValueError):
            pass

    def state(self, job):
        r = self.hr("ps")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(r.out_lines[0].split(),
                         ["JOB", "STATE", "RANKS", "AGE", "COMMAND"])
        for line in r.out_lines[1:]:
            f = line.split()
            if f[0] == job:
                return " ".join(f[1:3]) if f[1] in ("exited", "failed") \
                    else f[1]
        self.fail("ps does not list job %s:\n%s" % (job, r.out))

    def wait_state(self, job, pred, timeout=60):
        st = hvdtest.wait_until(
            lambda: (lambda s: s if pred(s) else None)(self.state(job)),
            timeout, 0.2)
        self.assertTrue(st, "job %s never left state %s" %
                        (job, self.state(job)))
        if st.split()[0] in ("exited", "failed"):
            self.controller_exited(job)
        return st

    def controller_exited(self, job):
        """Waits for the controller to exit and checks that its log has
        no sanitizer report (it has no terminal to print one to)."""
        pid = int(self.info(job)["pid"])
        self.assertTrue(hvdtest.wait_until(
            lambda: hvdtest.proc_state(pid) in (None, "Z", "X"), 20),
            "the controller of job %s exits" % job)
        with open(os.path.join(self.job_dir(job), "horovodrun.log")) as f:
            log = f.read()
        self.assertNotIn("Sanitizer", log)
        self.assertNotIn("runtime error", log)

    def by_rank(self, lines, stream="stdout"):
        got = {}
        for l in lines:
            m = PREFIX.match(l)
            if m and m.group(3) == stream:
                got.setdefault(int(m.group(1)), []).append(m.group(4))
        return got

    def test_logs_follow_matches_files(self):
        go = os.path.join(self.tmp, "go")
        job = self.detach(3, LINES, 150, go)
        self.assertEqual(self.state(job), "running")
        # Another process follows the job while it runs.
        follow = hvdtest.Job(hvdtest.hr_args("logs", "-f", job),
                             env=self.hr_env())
        follow.wait_line(lambda l: l.startswith("[2,2]<stdout>:line 149"),
                         timeout=30)
        self.assertTrue(follow.alive(), "logs -f waits for the job's end")
        open(go, "w").close()
        self.assertEqual(follow.wait(60), 0, follow.describe())
        self.assertEqual(self.wait_state(job, lambda s: s != "running"),
                         "exited 0")
        # The default folder is named after the job, in its directory.
        out = os.path.join(self.tmp, "horovodrun-" + job)
        self.assertEqual(self.info(job)["output"], out)
        followed = self.by_rank(follow.text_lines("stdout"))
        after = self.hr("logs", job)
        self.assertEqual(after.rc, 0, after.describe())
        for r in range(3):
            with open(os.path.join(out, "rank.%d" % r, "stdout")) as f:
                raw = f.read().splitlines()
            self.assertEqual(raw, ["line %d of rank %d" % (i, r)
                                   for i in range(150)] + ["done %d" % r])
            self.assertEqual(followed[r], raw, "logs -f, rank %d" % r)
            self.assertEqual(self.by_rank(after.out_lines)[r], raw,
                             "logs after the end, rank %d" % r)
            with open(os.path.join(out, "rank.%d" % r, "stderr"), "rb") as f:
                self.assertEqual(f.read(), b"".join(
                    b"\rbar %d" % i for i in range(150)) + b"\n")
        # A progress bar is kept as its last state, not every update.
        bars = self.by_rank(after.err_lines, "stderr")
        for r in range(3):
            self.assertEqual(bars[r], ["bar 149"])

    def test_failure_summary_kept(self):
        job = self.detach(2, "import os, sys\nprint('hi', flush=True)\n"
                          "sys.exit(3 if os.environ['HOROVOD_RANK'] == '1' "
                          "else 0)\n")
        self.assertEqual(self.wait_state(job, lambda s: s != "running"),
                         "failed 3")
        r = self.hr("logs", job)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertIn("rank 1 (host localhost, local_rank 1) exited with "
                      "code 3", r.err)
        with open(os.path.join(self.job_dir(job), "status")) as f:
            self.assertIn("exited with code 3", f.read())

    def test_attach_ctrl_c_stops_the_job(self):
        job = self.detach(2, FOREVER)
        a = hvdtest.Job(hvdtest.hr_args("attach", job), env=self.hr_env())
        a.wait_line(lambda l: l.startswith("[1,1]<stdout>:tick 1"),
                    timeout=30)
        a.signal(signal.SIGINT)
        rc = a.wait(60)
        self.assertIn("stopping job %s" % job, a.err)
        self.assertIn("stop requested (SIGTERM); forwarding it to " +
                      self.FORWARD_TO, a.err)
        st = self.wait_state(job, lambda s: s != "running")
        self.assertEqual(st.split()[0], "failed")
        self.assertEqual(rc, int(st.split()[1]), "attach exits as the job")
        self.assertEqual(hvdtest.wait_gone(self.marker), [])

    def test_stop(self):
        job = self.detach(2, FOREVER)
        r = self.hr("stop", job)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertRegex(r.err, r"job %s ended with exit code \d+" % job)
        self.assertEqual(hvdtest.wait_gone(self.marker), [])
        self.controller_exited(job)
        again = self.hr("stop", job)
        self.assertEqual(again.rc, 0, again.describe())
        self.assertIn("had already ended", again.err)

    def test_sigkilled_controller_leaves_nothing(self):
        job = self.detach(3, FOREVER)
        pid = int(self.info(job)["pid"])
        ranks = hvdtest.wait_until(
            lambda: len([p for p in hvdtest.marked_procs(self.marker)
                         if "python" in p[1]]) >= 3, 30)
        self.assertTrue(ranks, "the ranks started")
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(hvdtest.wait_gone(self.marker, 20), [])
        self.assertEqual(self.state(job), "lost")
        r = self.hr("logs", job)
        self.assertEqual(r.rc, 1)
        self.assertIn("controller is gone", r.err)
        p = self.hr("ps", "--prune")
        self.assertEqual(p.out, "removed 1 ended job (their output files "
                         "stay)\n")
        self.assertFalse(os.path.exists(self.job_dir(job)))
        self.assertEqual(self.hr("ps").out_lines[1:], [])


class DetachTest(AgentsMode, DetachChecks, hvdtest.TestCase):
    """With horovodrun's own agents, also logs --rank/--tail, a terminal,
    another uid and a reader that never reads."""

    def test_rank_and_tail(self):
        job = self.detach(2, LINES, 20)
        self.wait_state(job, lambda s: s != "running")
        r = self.hr("logs", "--rank", "1", "--tail", "3", job)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(r.out_lines, ["[1,1]<stdout>:line 19 of rank 1",
                                         "[1,1]<stdout>:done 1"])
        self.assertEqual(r.err_lines, ["[1,1]<stderr>:bar 19"])
        bad = self.hr("logs", "--rank", "2", job)
        self.assertEqual(bad.rc, 2, bad.describe())
        self.assertIn("--rank 2: job %s has ranks 0 to 1" % job, bad.err)
        none = self.hr("logs", "ffffffff")
        self.assertEqual(none.rc, 2)
        self.assertIn("no job ffffffff", none.err)

    def test_attach_on_a_terminal(self):
        # Bars drawn in place, then Ctrl-C typed on a real terminal.
        go = os.path.join(self.tmp, "go")
        job = self.detach(2, LINES, 30, go)
        # The shell survives the Ctrl-C to print attach's status.
        t = Tmux(self, hvdtest.hr_args("attach", job), self.hr_env(),
                 prelude="trap 'echo INT' INT\n")
        live = ["[%d,%d]<stderr>:bar 29" % (r, r) for r in range(2)]
        rows = t.wait(lambda rows: rows[-2:] == live or
                      sorted(rows[-2:]) == live)
        self.assertFalse([r for r in rows if "<stderr>:bar 28" in r],
                         "an update replaces the one before")
        self.assertIn("[1,1]<stdout>:line 29 of rank 1", rows)
        t.tmux("send-keys", "C-c")
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertTrue([r for r in rows if "stopping job %s" % job in r])
        st = self.wait_state(job, lambda s: s != "running")
        self.assertEqual("failed %d" % t.exit_code(rows), st)
        # Nothing but the terminal's own shell and its sleep.
        def stray():
            return [p for p in hvdtest.marked_procs(self.marker)
                    if p[1] not in ("sleep", "sh", "tmux: server")]
        hvdtest.wait_until(lambda: not stray(), 20)
        self.assertEqual(stray(), [])

    def connect_as(self, uid, path):
        """What a process of uid gets from the job's socket: the error
        name, or the bytes the job sends to a logs request."""
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            try:
                os.setgid(uid)
                os.setuid(uid)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect(path)
                s.sendall(logs_request(0))
                data = b""
                while True:
                    b = s.recv(4096)
                    if not b:
                        break
                    data += b
                os.write(wr, b"DATA" + data)
            except OSError as e:
                os.write(wr, type(e).__name__.encode())
            os._exit(0)
        os.close(wr)
        with os.fdopen(rd, "rb") as f:
            got = f.read()
        os.waitpid(pid, 0)
        return got

    def test_other_user_refused(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as another uid")
        job = self.detach(2, FOREVER)
        sock = os.path.join(self.job_dir(job), "sock")
        self.assertEqual(os.stat(sock).st_mode & 0o777, 0o600)
        # The folders keep everyone else out...
        self.assertEqual(self.connect_as(65534, sock), b"PermissionError")
        # ...and with them opened, the job itself refuses the stranger.
        for d in (self.tmp, self.xdg, os.path.dirname(self.job_dir(job)),
                  self.job_dir(job)):
            os.chmod(d, 0o755)
        os.chmod(sock, 0o777)
        got = self.connect_as(65534, sock)
        self.assertTrue(got.startswith(b"DATA"), got)
        self.assertIn(b"may not read or stop it", got)
        self.assertNotIn(b"tick", got)
        self.assertEqual(self.state(job), "running")

    def test_reader_that_never_reads_does_not_block(self):
        # Once the reader is in: 3 x 40000 lines of 93 bytes, far more than
        # a socket holds.
        script = ("import os, sys, time\nr = os.environ['HOROVOD_RANK']\n"
                  "while not os.path.exists(sys.argv[1]):\n"
                  "    time.sleep(0.02)\n"
                  "line = ('x' * 90 + ' %s\\n') % r\n"
                  "for i in range(40000):\n    sys.stdout.write(line)\n")
        go = os.path.join(self.tmp, "go")
        job = self.detach(3, script, go)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.path.join(self.job_dir(job), "sock"))
        s.sendall(logs_request(1))
        self.addCleanup(s.close)
        open(go, "w").close()
        self.assertEqual(self.wait_state(job, lambda s: s != "running", 60),
                         "exited 0")
        for r in range(3):
            out = os.path.join(self.tmp, "horovodrun-" + job, "rank.%d" % r,
                               "stdout")
            self.assertEqual(os.path.getsize(out), 40000 * 93)

    def test_usage_errors(self):
        r = self.hr("logs")
        self.assertEqual(r.rc, 2)
        self.assertIn("usage: horovodrun logs", r.err)
        r = self.hr("logs", "--bogus", "x")
        self.assertEqual(r.rc, 2)
        self.assertIn("--bogus: unknown option for logs", r.err)
        r = self.hr("ps", "--bogus")
        self.assertEqual(r.rc, 2)
        self.assertEqual(self.hr("ps").out_lines[1:], [])


class DetachMpiTest(MpiMode, DetachChecks, hvdtest.TestCase):
    """The same checks under horovodrun --mpi."""


if __name__ == "__main__":
    hvdtest.main()
