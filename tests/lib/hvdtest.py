"""Shared helpers for horovodrun's integration tests (tests/lib/, which
meson puts on PYTHONPATH for every Python test; by hand, run a test with
PYTHONPATH=tests/lib).

The tests run the built binaries as real processes. Every job a test starts
carries a unique marker in its environment (HVDTEST_MARK), which horovodrun
passes on to hvd-agent and to every rank, so a test can find exactly the
processes it started (and never another test's) by scanning /proc.
"""

import fcntl
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build"))

HOROVODRUN = os.environ.get("HVD_HOROVODRUN",
                            os.path.join(BUILD, "launcher", "horovodrun"))
HVD_AGENT = os.environ.get("HVD_AGENT",
                           os.path.join(BUILD, "launcher", "hvd-agent"))
ENVDEMO = os.environ.get("HVD_ENVDEMO",
                         os.path.join(BUILD, "examples", "envdemo"))
MANPAGE = os.environ.get("HVD_MANPAGE",
                         os.path.join(ROOT, "man", "horovodrun.1"))
PYTHON = sys.executable or "python3"

MARK_VAR = "HVDTEST_MARK"
ERR_PREFIX = "horovodrun: error: "
WARN_PREFIX = "horovodrun: warning: "

# Everything a test started, killed at exit whatever happened.
_markers = []
_popens = []

# Output lines: "[rank,local_rank]<stream>:text".
LINE_RE = re.compile(r"^\[(\d+),(\d+)\]<(stdout|stderr)>:(.*)$", re.S)


def new_marker(tag="job"):
    """A marker no other test or run can share."""
    m = "hvdtest-%s-%d-%s" % (tag, os.getpid(), uuid.uuid4().hex[:12])
    _markers.append(m)
    return m


def base_env(marker=None, **extra):
    """The test process's environment plus the marker and extra variables.

    A value of None removes the variable. Results must not depend on the
    machine running the tests: its CUDA_VISIBLE_DEVICES is removed and the
    agent is told (by the HVD_TEST_GPU_COUNT hook) that there are no GPUs,
    or a machine with GPUs would pin ranks and warn. Tests about GPUs set
    these explicitly (HVD_TEST_GPU_COUNT=None for the real count).
    """
    env = dict(os.environ)
    # A Slurm allocation around the tests would change horovodrun's default
    # hosts; tests about Slurm set these explicitly.
    for k in ("CUDA_VISIBLE_DEVICES", "HVD_TEST_GPU_COUNT",
              "HOROVOD_START_TIMEOUT", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
              "SLURM_TASKS_PER_NODE"):
        env.pop(k, None)
    env["HVD_TEST_GPU_COUNT"] = "0"
    if marker is not None:
        env[MARK_VAR] = marker
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


class Result:
    def __init__(self, args, rc, out, err, elapsed):
        self.args = args
        self.rc = rc
        self.out_bytes = out
        self.err_bytes = err
        self.out = out.decode("utf-8", "replace")
        self.err = err.decode("utf-8", "replace")
        self.elapsed = elapsed

    @property
    def out_lines(self):
        return split_lines(self.out)

    @property
    def err_lines(self):
        return split_lines(self.err)

    def error_lines(self):
        """horovodrun's own 'error:' lines on its stderr."""
        return [l for l in self.err_lines if l.startswith(ERR_PREFIX)]

    def warning_lines(self):
        return [l for l in self.err_lines if l.startswith(WARN_PREFIX)]

    def describe(self):
        def cut(s):
            return s if len(s) < 4000 else s[:2000] + "\n...\n" + s[-2000:]
        return ("command: %s\nrc: %s, %.2f s\n--- stdout ---\n%s\n"
                "--- stderr ---\n%s" % (
                    " ".join(shlex.quote(a) for a in self.args), self.rc,
                    self.elapsed, cut(self.out), cut(self.err)))


def split_lines(text):
    """Lines of text split on \\n only (a \\r stays inside its line)."""
    if text == "":
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def prefixed(lines, stream="stdout"):
    """{rank: [text, ...]} of the prefixed lines of one stream; any line
    that is not a well-formed prefixed line is returned in 'bad'."""
    per = {}
    bad = []
    for l in lines:
        m = LINE_RE.match(l)
        if not m or m.group(3) != stream:
            bad.append(l)
            continue
        per.setdefault(int(m.group(1)), []).append((int(m.group(2)),
                                                    m.group(4)))
    return per, bad


def hr_args(*args):
    return [HOROVODRUN] + [str(a) for a in args]


def run(args, env=None, timeout=60, input=None, cwd=None, marker=None,
        stdin=None):
    """Runs horovodrun (args include the program) to completion.

    On timeout the whole process tree is killed and an AssertionError says
    so: a hang is a failure, never a stuck test.
    """
    args = [str(a) for a in args]
    if env is None:
        env = base_env(marker)
    if input is not None:
        stdin = subprocess.PIPE
    elif stdin is None:
        stdin = subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=cwd,
                         start_new_session=True)
    _popens.append(p)
    try:
        out, err = p.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        if env.get(MARK_VAR):
            kill_marked(env[MARK_VAR])
        r = Result(args, None, out, err, time.monotonic() - t0)
        raise AssertionError("horovodrun did not finish within %s s\n%s" %
                             (timeout, r.describe()))
    return Result(args, p.returncode, out, err, time.monotonic() - t0)


class Job:
    """A horovodrun started in the background whose stdout and stderr are
    read line by line as they arrive, with arrival times."""

    def __init__(self, args, env=None, marker=None, stdin=None, cwd=None):
        self.args = [str(a) for a in args]
        self.env = env if env is not None else base_env(marker)
        self.marker = self.env.get(MARK_VAR)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.args, stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env,
            cwd=cwd, start_new_session=True)
        _popens.append(self.proc)
        self.pid = self.proc.pid
        self.lines = {"stdout": [], "stderr": []}  # (time, bytes)
        self.raw = {"stdout": bytearray(), "stderr": bytearray()}
        self.cond = threading.Condition()
        self.readers = [
            threading.Thread(target=self._read, args=(name, f), daemon=True)
            for name, f in (("stdout", self.proc.stdout),
                            ("stderr", self.proc.stderr))]
        for t in self.readers:
            t.start()
        self.rc = None
        self.elapsed = None

    def _read(self, name, f):
        buf = b""
        fd = f.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            now = time.monotonic()
            with self.cond:
                if not chunk:
                    if buf:
                        self.lines[name].append((now, buf))
                    self.cond.notify_all()
                    return
                self.raw[name] += chunk
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.lines[name].append((now, line))
                self.cond.notify_all()

    def text_lines(self, stream="stdout"):
        with self.cond:
            return [l.decode("utf-8", "replace")
                    for _, l in self.lines[stream]]

    def wait_line(self, pred, stream="stdout", timeout=10, count=1):
        """Waits until count lines of stream satisfy pred (a str predicate);
        returns the (arrival time, text) of those lines, or raises."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [(t, l.decode("utf-8", "replace"))
                        for t, l in self.lines[stream]
                        if pred(l.decode("utf-8", "replace"))]
                if len(hits) >= count:
                    return hits
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "timed out after %s s waiting for %d matching %s "
                        "line(s); got %d\n%s" % (
                            timeout, count, stream, len(hits),
                            self.describe()))
                self.cond.wait(min(left, 0.2))

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout=30):
        """Waits for horovodrun to exit; kills everything and raises if it
        does not within timeout."""
        try:
            self.rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("horovodrun did not exit within %s s\n%s" %
                                 (timeout, self.describe()))
        for t in self.readers:
            t.join(10)
        self.elapsed = time.monotonic() - self.t0
        return self.rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.marker:
            kill_marked(self.marker)
        for t in self.readers:
            t.join(5)

    @property
    def out(self):
        with self.cond:
            return bytes(self.raw["stdout"]).decode("utf-8", "replace")

    @property
    def err(self):
        with self.cond:
            return bytes(self.raw["stderr"]).decode("utf-8", "replace")

    def describe(self):
        return ("command: %s\nrc: %s\n--- stdout ---\n%s\n--- stderr ---\n%s"
                % (" ".join(shlex.quote(a) for a in self.args), self.rc,
                   self.out[-4000:], self.err[-4000:]))


# ---------------------------------------------------------------- processes

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_state(pid):
    stat = _read("/proc/%d/stat" % pid)
    if not stat:
        return None
    # The command name is in parentheses and may hold spaces.
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def parent_comm(pid):
    """The command name of pid's parent, or None once either is gone."""
    stat = _read("/proc/%d/stat" % pid)
    if not stat:
        return None
    ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
    comm = _read("/proc/%d/comm" % ppid)
    return comm.decode().strip() if comm else None


def marked_procs(marker):
    """[(pid, comm, cmdline)] of live (not zombie) processes whose
    environment or command line contains marker."""
    found = []
    needle = marker.encode()
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me:
            continue
        env = _read("/proc/%d/environ" % pid) or b""
        cmd = _read("/proc/%d/cmdline" % pid) or b""
        if needle not in env and needle not in cmd:
            continue
        st = proc_state(pid)
        if st is None or st in ("Z", "X"):
            continue
        comm = (_read("/proc/%d/comm" % pid) or b"").decode().strip()
        found.append((pid, comm,
                      cmd.replace(b"\0", b" ").decode("utf-8", "replace")))
    return found


def kill_marked(marker):
    for pid, _, _ in marked_procs(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def wait_until(pred, timeout=10, interval=0.05):
    """Polls pred until it returns a true value (returned) or timeout
    passes (then the last value is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def wait_gone(marker, timeout=10):
    """Waits until no process carries marker; returns those left."""
    left = []

    def gone():
        left[:] = marked_procs(marker)
        return not left
    wait_until(gone, timeout)
    return left


def py(script):
    """argv running a Python script as a rank."""
    return [PYTHON, "-c", script]


def sh(script):
    return ["sh", "-c", script]


def _cleanup():
    for p in _popens:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(5)
            except Exception:
                pass
    for m in _markers:
        kill_marked(m)


class TestCase(unittest.TestCase):
    """Base class: a fresh marker and temporary directory per test, and no
    process of the test left behind whatever the outcome."""

    maxDiff = 20000

    def setUp(self):
        self.marker = new_marker(self.id().rsplit(".", 1)[-1][:30])
        self.tmp = tempfile.mkdtemp(prefix="hvdtest-")
        self.addCleanup(self._cleanup_tmp)
        self.addCleanup(kill_marked, self.marker)

    def _cleanup_tmp(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        return base_env(self.marker, **extra)

    def run_hr(self, *args, env=None, timeout=60, input=None, cwd=None,
               **extra):
        if env is None:
            env = self.env(**extra)
        return run(hr_args(*args), env=env, timeout=timeout, input=input,
                   cwd=cwd if cwd is not None else self.tmp)

    def start_hr(self, *args, env=None, stdin=None, cwd=None, **extra):
        if env is None:
            env = self.env(**extra)
        job = Job(hr_args(*args), env=env, stdin=stdin,
                  cwd=cwd if cwd is not None else self.tmp)
        self.addCleanup(job.kill)
        return job

    def run_hr_behind_terminal(self, *args, timeout=30):
        """Runs horovodrun as `horovodrun ARGS &` from an interactive shell:
        a background job of a terminal that the shell holds in the
        foreground."""
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)

        def own_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        argv = ["sh", "-c", 'set -m; "$@" & wait $!', "sh"] + hr_args(*args)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env(),
                             cwd=self.tmp, preexec_fn=own_terminal)
        os.close(slave)
        _popens.append(p)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            kill_marked(self.marker)
            out, err = p.communicate()
            raise AssertionError(
                "a background horovodrun did not finish within %s s "
                "(stopped by SIGTTIN?)\n%s" % (timeout, Result(
                    argv, None, out, err, time.monotonic() - t0).describe()))
        return Result(argv, p.returncode, out, err, time.monotonic() - t0)

    def assertOrderedStreams(self, res, np, n, local_rank=lambda r: r):
        """Checks the output of ORDERED with N = n on np ranks: on each
        stream every rank's n lines, whole, in order, prefixed with its
        local rank. Returns {stream: {rank: [(local_rank, text)]}}."""
        got = {}
        for stream, lines, tag in (("stdout", res.out_lines, "out"),
                                   ("stderr", res.err_lines, "err")):
            per, bad = prefixed(lines, stream)
            self.assertEqual(bad[:5], [], "malformed %s lines" % stream)
            self.assertEqual(sorted(per), list(range(np)))
            for r in range(np):
                seq = []
                for lr, text in per[r]:
                    self.assertEqual(lr, local_rank(r))
                    m = ORDERED_RE.match(text)
                    self.assertTrue(m, "rank %d %s: split or interleaved "
                                    "line %r" % (r, stream, text[:200]))
                    self.assertEqual((int(m.group(1)), m.group(2)), (r, tag))
                    seq.append(int(m.group(3)))
                self.assertEqual(seq, list(range(n)),
                                 "rank %d %s lines lost or out of order" %
                                 (r, stream))
            got[stream] = per
        return got

    def assertRc(self, res, rc):
        self.assertEqual(res.rc, rc, "unexpected exit code\n" +
                         res.describe())

    def assertNoneLeft(self, timeout=10, what="processes of the job"):
        left = wait_gone(self.marker, timeout)
        self.assertEqual(left, [], "%s still running %s s later" %
                         (what, timeout))


def main():
    """unittest.main that exits non-zero on failure and cleans up."""
    import atexit
    atexit.register(_cleanup)
    for path, what in ((HOROVODRUN, "horovodrun"), (HVD_AGENT, "hvd-agent")):
        if not os.access(path, os.X_OK):
            sys.stderr.write("%s not found at %s; build first or set the "
                             "HVD_* variables\n" % (what, path))
            sys.exit(1)
    unittest.main(verbosity=2)


# Rank programs that more than one test file runs.

# Numbered lines to stdout and stderr in raw writes of random sizes (N, the
# lines per stream, is prepended by the caller).
ORDERED = r"""
import os, random
r = int(os.environ["HOROVOD_RANK"])
rnd = random.Random(r)
def body(stream, n):
    return "".join("%d:%s:%d:%s\n" % (r, stream, i, "x" * rnd.randrange(0, 300))
                   for i in range(n)).encode()
bufs = {1: body("out", N), 2: body("err", N)}
while any(bufs.values()):
    fd = rnd.choice([fd for fd in bufs if bufs[fd]])
    k = rnd.randrange(1, 5000)
    os.write(fd, bufs[fd][:k])
    bufs[fd] = bufs[fd][k:]
"""
ORDERED_RE = re.compile(r"^(\d+):(out|err):(\d+):(x*)$")

# Ranks that say "ready" and sleep; the one whose rank is in DIE kills
# itself with SIGKILL 0.3 s later.
READY_DIE = r"""
import os, signal, time
print("ready", flush=True)
if os.environ.get("DIE") == os.environ["HOROVOD_RANK"]:
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)
"""

# Ranks that report SIGINT and then die of it.
INT_DIES = r"""
import os, signal, sys, time
r = os.environ["HOROVOD_RANK"]
def on_int(sig, frame):
    print("rank %s got SIGINT" % r, flush=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGTERM, lambda s, f: None)
print("ready", flush=True)
for i in range(600):
    time.sleep(0.1)
print("never interrupted", flush=True)
"""
