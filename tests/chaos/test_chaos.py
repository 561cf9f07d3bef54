"""Chaos tests: horovodrun jobs with allreduce traffic, disturbed at random.

Each trial starts a job of chaosworker (tests/chaos/chaosworker.c: float32
allreduces of random sizes in a loop) on one of three kinds of hosts:

  local  -np 2..4 on this machine (one agent, shared memory);
  ssh    -H 127.0.0.2:2,127.0.0.3:2 (or :2,:1): two loopback sshd "hosts"
         started by tests/lib/sshfix.py, hierarchical or flat allreduce;
  mixed  -H localhost:2,127.0.0.2:2: a local agent and a remote one.

It waits until every rank has finished its first allreduces (the worker
prints "chaos: rank R ready"), waits a random 0-0.5 s of traffic, then
does one of these to the job:

  kill_rank      SIGKILL a random rank;
  stop_rank      SIGSTOP a random rank (run with
                 --stall-check-shutdown-time-seconds 2 and
                 HOROVOD_PEER_TIMEOUT=3: the other ranks' collectives must
                 fail, a worker exits 1, and fail-fast must end the job,
                 the stopped rank included);
  kill_agent     SIGKILL the hvd-agent of a random host (local or remote);
  kill_sshd      SIGKILL the sshd session process that serves a remote
                 agent (SSH hosts only);
  kill_hr        SIGKILL horovodrun itself;
  term_hr        SIGTERM horovodrun itself.

After every trial it checks:
  - horovodrun exited, and the last process of the job (horovodrun, every
    agent, every rank, every sshd session of the job) was gone, within the
    scenario's bound after the action (BOUNDS below, in seconds);
  - the exit code and the one-line failure summary are what the man page
    says for the scenario (none to check when horovodrun was SIGKILLed);
  - no process of the job is left anywhere: those carrying the job's
    HVDTEST_MARK in /proc/*/environ, and the agents and sshd sessions
    recorded (pid and start time) while the job ran;
  - no file in /dev/shm that the job's processes held (open or mapped,
    seen while the job ran) is left; files other programs make beside
    the tests (Python's semaphores, Criterion's) are none of its business;
  - every few trials and after each scenario, a short job on the same hosts
    (one allreduce per rank, --iters 2) starts and finishes with status 0.

Every trial prints its seed; the trial's choices (hosts, ranks, victim,
delay, options) follow from it. Environment:

  HVD_CHAOS_SEED=N        the run's seed (random by default; printed);
                          each trial's seed is derived from it
  HVD_CHAOS_TRIALS=N      trials per scenario (default 30); e.g. 300 for a
                          longer run (about 10 x the default's time)
  HVD_CHAOS_SCENARIOS=a,b only these scenarios
  HVD_CHAOS_KINDS=a,b     only these host kinds (local, ssh, mixed)
  HVD_CHAOS_REPLAY=SCENARIO:SEED
                          runs one trial of SCENARIO with that trial seed
                          (as printed by a failing trial), then a next job
  HVD_CHAOS_VERBOSE=1     print every trial's processes and summary
  HVD_CHAOS_ALLOW_SECONDARY=1
                          accept a summary that names, instead of the
                          killed rank, agent or session, a rank that only
                          exited 1 because of it (HVD_EPEER/HVD_ETIMEDOUT
                          on its stderr); such trials are still counted
                          as "misattributed"
  HVD_CHAOS_JOBS=N        stop_rank trials run N at a time (default 5:
                          they mostly wait for the peer timeout)

The default run (6 scenarios x 30 trials, host kinds drawn per trial,
stop_rank trials 5 at a time) takes about 2.5 minutes on a 2-core
machine; a trial whose job does not end costs its bound + 10 s, and a
scenario gives up after 3 of them. HVD_CHAOS_TRIALS=300 is the longer run
(about 25 minutes).
"""

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

import hvdtest
import sshfix

WORKER = os.environ.get(
    "HVD_CHAOSWORKER", os.path.join(hvdtest.BUILD, "tests", "chaos",
                                    "chaosworker"))
ERR = hvdtest.ERR_PREFIX

TRIALS = int(os.environ.get("HVD_CHAOS_TRIALS", "30"))
VERBOSE = bool(os.environ.get("HVD_CHAOS_VERBOSE"))
ALLOW_SECONDARY = bool(os.environ.get("HVD_CHAOS_ALLOW_SECONDARY"))
JOBS = max(1, int(os.environ.get("HVD_CHAOS_JOBS", "5")))

SCENARIOS = ["kill_rank", "stop_rank", "kill_agent", "kill_sshd", "kill_hr",
             "term_hr"]

# Host kinds each scenario draws from.
KINDS = {
    "kill_rank": ["local", "ssh", "mixed"],
    "stop_rank": ["local", "ssh", "mixed"],
    "kill_agent": ["local", "ssh", "mixed"],
    "kill_sshd": ["ssh", "mixed"],
    "kill_hr": ["local", "ssh", "mixed"],
    "term_hr": ["local", "ssh", "mixed"],
}

# Seconds from the action to the last process of the job gone. Measured
# on a 2-core machine, 30 trials each (3 runs): every scenario but
# stop_rank under 0.15 s (horovodrun's own last resort, the kill grace
# plus 5 + 5 s, would show as over 11 s); stop_rank 4.0-4.1 s (peer
# timeout 3 s, then the kill grace of 1 s for the stopped rank), 6.0 s
# when the stall inspector (2 s) goes first.
BOUNDS = {
    "kill_rank": 5.0,
    "stop_rank": 15.0,
    "kill_agent": 5.0,
    "kill_sshd": 5.0,
    "kill_hr": 5.0,
    "term_hr": 5.0,
}
# How long a job may take to get every rank to "ready".
READY_TIMEOUT = 30.0
# A scenario stops after this many trials whose job did not end (each
# costs its bound + 10 s).
MAX_HANGS = 3
# A short job on the same hosts after every NEXT_EVERY trials.
NEXT_EVERY = 5
KILL_GRACE = 1

CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = sshfix.SshCluster(2)
    CLUSTER.start()


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


# ------------------------------------------------------------ processes

def _stat(pid):
    """(state, ppid, starttime) of pid, or None."""
    s = hvdtest._read("/proc/%d/stat" % pid)
    if not s:
        return None
    f = s[s.rindex(b")") + 2:].split()
    return f[0].decode(), int(f[1]), int(f[19])


def _comm(pid):
    return (hvdtest._read("/proc/%d/comm" % pid) or b"").decode().strip()


def alive(rec):
    """Whether the process recorded as (pid, starttime) still runs (a
    zombie does not count; a new process with the same pid neither)."""
    pid, start = rec
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X") and st[2] == start


class Tree:
    """The processes of one running job, recorded by pid and start time:
    horovodrun, agents (with their hosts), ranks, and the sshd session
    processes between a remote agent and its host's listening sshd."""

    def __init__(self, job, cluster, hosts):
        self.hr = None
        self.agents = {}      # host -> (pid, start)
        self.ranks = {}       # rank -> (pid, start)
        self.sshd = {}        # host -> [(pid, start), ...] nearest first
        listeners = {cluster.sshd_pid(h): h for h in cluster.hosts}
        st = _stat(job.pid)
        self.hr = (job.pid, st[2]) if st else None
        for pid, comm, _ in hvdtest.marked_procs(job.marker):
            env = hvdtest._read("/proc/%d/environ" % pid) or b""
            m = re.search(rb"(?:^|\0)HOROVOD_RANK=(\d+)\0", env)
            if not m or pid == job.pid or comm == "hvd-agent":
                continue
            st = _stat(pid)
            if st is None:
                continue
            rank = int(m.group(1))
            self.ranks[rank] = (pid, st[2])
            host = hosts[rank] if rank < len(hosts) else "?"
            # Up the tree: the agent, then (remote) sshd sessions.
            apid = st[1]
            ast = _stat(apid)
            if ast is None or _comm(apid) != "hvd-agent":
                continue
            self.agents.setdefault(host, (apid, ast[2]))
            p = ast[1]
            chain = []
            while p > 1 and p not in listeners and p != job.pid:
                pst = _stat(p)
                if pst is None:
                    break
                chain.append((p, pst[2]))
                p = pst[1]
            if p in listeners:
                self.sshd.setdefault(host, chain)
        self.shm = shm_held([pid for pid, _ in self.all()])

    def all(self):
        out = [self.hr] if self.hr else []
        out += list(self.agents.values()) + list(self.ranks.values())
        for chain in self.sshd.values():
            out += chain
        return out

    def left(self, marker):
        """Descriptions of the job's processes still running."""
        seen = set()
        out = []
        for rec in self.all():
            if alive(rec):
                seen.add(rec[0])
                out.append("%d %s" % (rec[0], _comm(rec[0])))
        for pid, comm, cmd in hvdtest.marked_procs(marker):
            if pid not in seen:
                out.append("%d %s (marked: %s)" % (pid, comm, cmd[:80]))
        return out


def shm_held(pids):
    """The /dev/shm files (still named) that processes pids hold open or
    mapped."""
    held = set()
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                held.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
        for line in (hvdtest._read("/proc/%d/maps" % pid) or b"").split(
                b"\n"):
            parts = line.decode("utf-8", "replace").split(None, 5)
            if len(parts) == 6:
                held.add(parts[5])
    return sorted(p for p in held if p.startswith("/dev/shm/") and
                  not p.endswith(" (deleted)"))


# ------------------------------------------------------------ trials

def trial_seed(master, scenario, i):
    h = hashlib.sha256(("%s:%s:%d" % (master, scenario, i)).encode())
    return int.from_bytes(h.digest()[:6], "big")


class Plan:
    """Everything a trial does, drawn from its seed."""

    def __init__(self, scenario, seed, kinds):
        rnd = random.Random(seed)
        self.scenario = scenario
        self.seed = seed
        self.kind = rnd.choice(kinds)
        self.worker_seed = rnd.randrange(1, 1 << 62)
        self.delay = rnd.uniform(0.0, 0.5)
        self.flat = False
        h = CLUSTER.hosts
        if self.kind == "local":
            self.np = rnd.choice([2, 3, 4])
            self.hosts = ["localhost"] * self.np
            self.host_args = []
        elif self.kind == "ssh":
            slots = rnd.choice([(2, 2), (2, 2), (2, 1)])
            self.np = sum(slots)
            self.hosts = [h[0]] * slots[0] + [h[1]] * slots[1]
            self.host_args = ["-p", CLUSTER.port, "-H",
                              "%s:%d,%s:%d" % (h[0], slots[0], h[1],
                                               slots[1])]
            self.flat = rnd.random() < 0.3
        else:
            self.np = 4
            self.hosts = ["localhost"] * 2 + [h[0]] * 2
            self.host_args = ["-p", CLUSTER.port, "-H",
                              "localhost:2,%s:2" % h[0]]
            self.flat = rnd.random() < 0.3
        self.victim_rank = rnd.randrange(self.np)
        hostset = sorted(set(self.hosts), key=self.hosts.index)
        remote = [x for x in hostset if x != "localhost"]
        self.victim_host = rnd.choice(hostset)
        self.sshd_host = rnd.choice(remote) if remote else None
        # Which sshd process of the session: the nearest to the agent, or
        # any one of them (there is one per session when sshd runs as root
        # without privilege separation of the session, two otherwise).
        self.sshd_pick = rnd.random()
        self.signal = signal.SIGKILL
        if scenario == "stop_rank":
            self.signal = signal.SIGSTOP
        elif scenario == "term_hr":
            self.signal = signal.SIGTERM

    def describe(self):
        what = {
            "kill_rank": "SIGKILL rank %d (host %s)" % (
                self.victim_rank, self.hosts[self.victim_rank]),
            "stop_rank": "SIGSTOP rank %d (host %s)" % (
                self.victim_rank, self.hosts[self.victim_rank]),
            "kill_agent": "SIGKILL the agent of %s" % self.victim_host,
            "kill_sshd": "SIGKILL the sshd session of %s" % self.sshd_host,
            "kill_hr": "SIGKILL horovodrun",
            "term_hr": "SIGTERM horovodrun",
        }[self.scenario]
        return "%s, -np %d, %s%s, after %.3f s: %s" % (
            self.kind, self.np, " ".join(str(a) for a in self.host_args) or
            "local", " flat" if self.flat else "", self.delay, what)

    def args(self, *worker_args):
        a = ["-np", self.np] + self.host_args + ["--kill-grace", KILL_GRACE]
        if self.flat:
            a.append("--no-hierarchical-allreduce")
        if self.scenario == "stop_rank":
            a += ["--stall-check-shutdown-time-seconds", "2"]
        return hvdtest.hr_args(*a, WORKER, *worker_args)

    def env(self, marker):
        extra = {"HOROVOD_START_TIMEOUT": "20"}
        if self.scenario == "stop_rank":
            extra["HOROVOD_PEER_TIMEOUT"] = "3"
        return CLUSTER.env(base=hvdtest.base_env(marker, **extra))


class Outcome:
    def __init__(self, plan):
        self.plan = plan
        self.problems = []
        self.teardown = None
        self.rc = None
        self.errs = []
        self.job = None
        self.tree = None
        self.secondary = None
        self.hung = False
        self.named = None

    def fail(self, msg):
        self.problems.append(msg)

    def report(self):
        p = self.plan
        head = "%s seed %d: %s" % (p.scenario, p.seed, p.describe())
        if self.tree is not None:
            t = self.tree
            head += "\n  job: horovodrun %s, agents %s, ranks %s, sshd %s" % (
                t.hr[0] if t.hr else None,
                {h: a[0] for h, a in t.agents.items()},
                {r: x[0] for r, x in sorted(t.ranks.items())},
                {h: [x[0] for x in c] for h, c in t.sshd.items()})
            if self.errs:
                head += "\n  summary: %s (rc %s)" % (" | ".join(self.errs),
                                                    self.rc)
        if not self.problems:
            return head
        body = "\n  ".join(self.problems)
        tail = ""
        if self.job is not None:
            tail = "\n" + self.job.describe()
        return "%s\n  FAILED (replay: HVD_CHAOS_REPLAY=%s:%d)\n  %s%s" % (
            head, p.scenario, p.seed, body, tail)


def _wait_gone(tree, marker, t_act, bound):
    """Waits (at most bound + 10 s) until no process of the job is left;
    returns (seconds from t_act to the last one gone, or None, left)."""
    deadline = t_act + bound + 10
    while True:
        left = tree.left(marker)
        now = time.monotonic()
        if not left:
            return now - t_act, []
        if now > deadline:
            return None, left
        time.sleep(0.02)


def act(plan, job, tree, out):
    """Does the scenario's deed; returns its time, or None if it could
    not be done (recorded as a problem)."""
    s = plan.scenario
    if s in ("kill_rank", "stop_rank"):
        rec = tree.ranks.get(plan.victim_rank)
        target = rec[0] if rec else None
        what = "rank %d" % plan.victim_rank
    elif s == "kill_agent":
        rec = tree.agents.get(plan.victim_host)
        target = rec[0] if rec else None
        what = "the agent of %s" % plan.victim_host
    elif s == "kill_sshd":
        chain = tree.sshd.get(plan.sshd_host) or []
        rec = chain[int(plan.sshd_pick * len(chain))] if chain else None
        target = rec[0] if rec else None
        what = "the sshd session of %s" % plan.sshd_host
    else:
        rec = tree.hr
        target = job.pid
        what = "horovodrun"
    if target is None or (rec is not None and not alive(rec)):
        out.fail("cannot find %s to signal (processes: ranks %s, agents %s, "
                 "sshd %s)" % (what, tree.ranks, tree.agents, tree.sshd))
        return None
    t = time.monotonic()
    try:
        os.kill(target, plan.signal)
    except OSError as e:
        out.fail("signal to %s (pid %d) failed: %s" % (what, target, e))
        return None
    return t


def _rank_rx(plan, rank, tail):
    """Regex of the summary naming rank (None: any rank) and then tail."""
    if rank is None:
        return r"rank (\d+) \(host (\S+), local_rank (\d+)\) " + tail
    return r"rank %d \(host %s, local_rank %d\) " % (
        rank, re.escape(plan.hosts[rank]),
        plan.hosts[:rank].count(plan.hosts[rank])) + tail


STOPPED = "; the job was stopped$"


def expected_summary(plan):
    """[(exit code, regex of the one error line)], any of which is right
    for the scenario, or None when there is nothing to check."""
    s = plan.scenario
    r = plan.victim_rank
    err = re.escape(ERR)
    if s == "kill_rank":
        return [(137, err + _rank_rx(
            plan, r, r"was killed by signal 9 \(SIGKILL\)" + STOPPED))]
    if s == "stop_rank":
        # A rank that waited for the stopped one fails (peer timeout or
        # stall shutdown), exits 1, and fail-fast stops the rest.
        return [(1, err + _rank_rx(plan, x, "exited with code 1" + STOPPED))
                for x in range(plan.np) if x != r]
    if s == "kill_agent":
        return [(1, err + r"host %s: hvd-agent was killed by signal 9 "
                 r"\(SIGKILL\) with \d+ ranks still running$" %
                 re.escape(plan.victim_host))]
    if s == "kill_sshd":
        return [(1, err + r"host %s: .+" % re.escape(plan.sshd_host))]
    if s == "term_hr":
        # The ranks die of the forwarded SIGTERM (chaosworker does not
        # catch it); or one saw a peer die of it first, failed its
        # collective and exited 1 before its own SIGTERM came: the man
        # page's rule (the first failing rank's status) then gives 1.
        intr = err + "interrupted by SIGTERM: "
        return [(143, intr + _rank_rx(
                    plan, None, r"was killed by signal 15 \(SIGTERM\)" +
                    STOPPED)),
                (1, intr + _rank_rx(plan, None, "exited with code 1" +
                                    STOPPED))]
    return None


def secondary(plan, job, line):
    """When the summary names, instead of the scenario's event, a rank
    that exited 1 only because of it (its collective failed with
    HVD_EPEER or HVD_ETIMEDOUT), returns a description, else None."""
    m = re.match(re.escape(ERR) + r"rank (\d+) \(host \S+, local_rank \d+\) "
                 r"exited with code 1" + STOPPED, line)
    if not m:
        return None
    x = int(m.group(1))
    if plan.scenario == "kill_rank" and x == plan.victim_rank:
        return None
    why = [l for l in job.text_lines("stderr")
           if l.startswith("[%d," % x) and "failed: HVD_E" in l]
    if not why:
        return None
    return ("the summary names rank %d, which only exited 1 because of "
            "the event: %s" % (x, why[0]))


def run_trial(plan):
    out = Outcome(plan)
    marker = hvdtest.new_marker("chaos-%s" % plan.scenario)
    job = hvdtest.Job(plan.args("--seconds", "60", "--seed",
                                plan.worker_seed),
                      env=plan.env(marker))
    out.job = job
    try:
        try:
            job.wait_line(lambda l: l.endswith(" ready"), count=plan.np,
                          timeout=READY_TIMEOUT)
        except AssertionError as e:
            out.fail("the job did not get ready: %s" % str(e)[:300])
            job.kill()
            return out
        tree = Tree(job, CLUSTER, plan.hosts)
        out.tree = tree
        if len(tree.ranks) != plan.np:
            out.fail("found %d ranks of %d: %s" % (len(tree.ranks), plan.np,
                                                   tree.ranks))
        time.sleep(plan.delay)
        if not job.alive():
            out.fail("horovodrun ended before the action (rc %s)" %
                     job.proc.poll())
        t_act = act(plan, job, tree, out)
        if t_act is None:
            job.kill()
            return out
        bound = BOUNDS[plan.scenario]
        try:
            out.rc = job.proc.wait(timeout=bound + 10)
        except subprocess.TimeoutExpired:
            out.fail("horovodrun still running %.0f s after the action" %
                     (bound + 10))
            out.hung = True
            if plan.signal == signal.SIGSTOP:
                # Let the stopped rank go, so the leftovers can be seen.
                os.kill(tree.ranks[plan.victim_rank][0], signal.SIGCONT)
            job.kill()
            return out
        job.wait(10)
        t_exit = time.monotonic() - t_act
        out.teardown, left = _wait_gone(tree, marker, t_act, bound)
        if left:
            out.fail("still running %.0f s after the action: %s" %
                     (bound + 10, left))
            hvdtest.kill_marked(marker)
            for rec in tree.all():
                if alive(rec):
                    try:
                        os.kill(rec[0], signal.SIGKILL)
                    except OSError:
                        pass
        elif out.teardown > bound:
            out.fail("the last process of the job went %.2f s after the "
                     "action (bound %.0f s; horovodrun exited after %.2f s)"
                     % (out.teardown, bound, t_exit))
        check_summary(plan, tree, job, out)
        left = [p for p in tree.shm if os.path.exists(p)]
        if left:
            time.sleep(0.5)
            left = [p for p in left if os.path.exists(p)]
            if left:
                out.fail("left in /dev/shm: %s" % left)
        return out
    finally:
        job.kill()


def check_summary(plan, tree, job, out):
    out.errs = [l for l in job.text_lines("stderr") if l.startswith(ERR)]
    exp = expected_summary(plan)
    if exp is None:
        return
    if len(out.errs) != 1:
        out.fail("%d error lines, expected one: %s" % (len(out.errs),
                                                        out.errs))
        return
    line = out.errs[0]
    ok = [(code, rx) for code, rx in exp if re.match(rx, line)]
    if ok:
        if out.rc not in [code for code, _ in ok]:
            out.fail("exit code %s, expected %s for %r" % (
                out.rc, sorted({c for c, _ in ok}), line))
    else:
        sec = secondary(plan, job, line)
        if sec and out.rc == 1:
            out.secondary = sec
            if not ALLOW_SECONDARY:
                out.fail("MISATTRIBUTED: %s; expected exit code %s and a "
                         "summary matching %s (HVD_CHAOS_ALLOW_SECONDARY=1 "
                         "accepts this)" % (sec, sorted({c for c, _ in exp}),
                                            [rx for _, rx in exp]))
        else:
            out.fail("exit code %s and summary %r; expected one of %s" % (
                out.rc, line, exp))
    if plan.scenario == "stop_rank":
        # The job must have ended through the peer timeout (or the stall
        # inspector): some rank's collective failed with HVD_ETIMEDOUT, or
        # with HVD_EPEER carrying the timeout's message (the failure that
        # another rank saw first, relayed through horovodrun; the rank
        # that saw it may have been stopped by fail-fast before it said
        # so). The message names the peer that a rank waited for, which is
        # the stopped rank only if it waited for it directly (a ring names
        # its neighbour, "it, or a rank before it"): whether the stopped
        # rank was named is counted, not required.
        lines = [l for l in job.text_lines("stderr")
                 if re.match(r"^\[\d+,\d+\]<stderr>:chaos: rank \d+: .* "
                             r"failed: (HVD_ETIMEDOUT: |HVD_EPEER: .*("
                             r"did not arrive in time|no progress for|"
                             r"stalled))", l)]
        if not lines:
            out.fail("no rank failed with HVD_ETIMEDOUT or a relayed "
                     "timeout")
        out.named = any(re.search(r"\brank %d \(host " % plan.victim_rank, l)
                        for l in lines)


def next_job(kind, label):
    """A short job on the hosts of kind; returns problems (list)."""
    plan = Plan("next", 1, [kind])
    marker = hvdtest.new_marker("chaos-next")
    plan.scenario = "next"
    args = plan.args("--iters", "2", "--seed", "7")
    t0 = time.monotonic()
    try:
        res = hvdtest.run(args, env=plan.env(marker), timeout=60)
    except AssertionError as e:
        return ["next job on %s hosts after %s: %s" % (kind, label, e)]
    problems = []
    done = [l for l in res.out_lines if re.search(r"chaos: rank \d+ done", l)]
    if res.rc != 0 or len(done) != plan.np or res.error_lines():
        problems.append("next job on %s hosts after %s failed:\n%s" % (
            kind, label, res.describe()))
    left = hvdtest.wait_gone(marker, 10)
    if left:
        problems.append("next job on %s hosts left %s" % (kind, left))
    if VERBOSE:
        print("  next job (%s) rc %s in %.2f s" % (
            kind, res.rc, time.monotonic() - t0), flush=True)
    return problems


# ------------------------------------------------------------ the test

def _selected(var, allowed):
    v = os.environ.get(var)
    if not v:
        return list(allowed)
    out = [x.strip() for x in v.split(",") if x.strip()]
    for x in out:
        if x not in allowed:
            raise SystemExit("%s: unknown %r (one of %s)" % (
                var, x, ", ".join(allowed)))
    return out


def stats_line(name, st):
    extra = ""
    if name == "stop_rank":
        extra = ", the stopped rank named in %d" % st["named"]
    return ("%-10s %3d trials (%s), %d failed, %d hung, %d misattributed; "
            "exit codes %s%s; worst teardown %s; %.1f s" % (
                name, st["trials"], ", ".join(
                    "%s %d" % kv for kv in sorted(st["kinds"].items())),
                st["failed"], st["hangs"], st["secondary"], ", ".join(
                    "%s x%d" % kv for kv in sorted(
                        st["rcs"].items(), key=lambda kv: str(kv[0]))),
                extra, ", ".join(
                    "%s %.2f s" % kv for kv in sorted(st["worst"].items())),
                st["took"]))


MASTER = os.environ.get("HVD_CHAOS_SEED") or str(
    random.SystemRandom().randrange(1, 10**9))
STATS = {}


class ChaosTest(unittest.TestCase):

    maxDiff = None

    @classmethod
    def setUpClass(cls):
        if os.environ.get("HVD_CHAOS_REPLAY"):
            print("chaos: replaying %s" % os.environ["HVD_CHAOS_REPLAY"],
                  flush=True)
            return
        print("chaos: seed %s (HVD_CHAOS_SEED=%s replays this run's "
              "choices), %d trials per scenario" % (MASTER, MASTER, TRIALS),
              flush=True)

    def scenario(self, name):
        scen = _selected("HVD_CHAOS_SCENARIOS", SCENARIOS)
        replay = os.environ.get("HVD_CHAOS_REPLAY")
        if replay:
            rs, _, rseed = replay.partition(":")
            if rs != name:
                self.skipTest("replaying %s" % rs)
            seeds = [int(rseed)]
        elif name not in scen:
            self.skipTest("not in HVD_CHAOS_SCENARIOS")
        else:
            seeds = [trial_seed(MASTER, name, i) for i in range(TRIALS)]
        kinds = [k for k in KINDS[name]
                 if k in _selected("HVD_CHAOS_KINDS", ["local", "ssh",
                                                      "mixed"])]
        if not kinds:
            self.skipTest("no host kind of %s selected" % name)
        t0 = time.monotonic()
        plans = [Plan(name, s, kinds) for s in seeds]
        failures = []
        st = {"trials": 0, "failed": 0, "hangs": 0, "secondary": 0,
              "worst": {}, "kinds": {}, "rcs": {}, "named": 0}
        lock = threading.Lock()

        def one(i, plan, outs):
            try:
                out = run_trial(plan)
            except Exception:
                import traceback
                out = Outcome(plan)
                out.fail("the trial raised:\n" + traceback.format_exc())
            with lock:
                outs.append(out)
                st["trials"] += 1
                st["kinds"][plan.kind] = st["kinds"].get(plan.kind, 0) + 1
                if out.teardown is not None:
                    k = plan.kind
                    st["worst"][k] = max(st["worst"].get(k, 0.0),
                                         out.teardown)
                if out.hung:
                    st["hangs"] += 1
                st["rcs"][out.rc] = st["rcs"].get(out.rc, 0) + 1
                if out.named:
                    st["named"] += 1
                if out.secondary:
                    st["secondary"] += 1
                status = "ok" if not out.problems else "FAILED"
                if out.secondary and not out.problems:
                    status = "ok (misattributed, allowed)"
                print("chaos: %s trial %d seed %d: %s: rc %s, gone after %s"
                      "%s" % (name, i, plan.seed, status, out.rc,
                              "%.2f s" % out.teardown
                              if out.teardown is not None else "-",
                              "" if not VERBOSE else "\n  " + out.report()),
                      flush=True)
                if out.problems:
                    st["failed"] += 1
                    failures.append(out.report())
                    if not VERBOSE:
                        print(out.report(), flush=True)

        parallel = JOBS if name == "stop_rank" else 1
        i = 0
        while i < len(plans):
            if st["hangs"] >= MAX_HANGS:
                msg = ("%s: %d trials hung; the remaining %d were not run" %
                       (name, st["hangs"], len(plans) - i))
                failures.append(msg)
                print("chaos: " + msg, flush=True)
                break
            batch = plans[i:i + parallel]
            outs = []
            threads = [threading.Thread(target=one, args=(i + j, p, outs))
                       for j, p in enumerate(batch)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            i += len(batch)
            last = i >= len(plans)
            # The hosts must take the next job: every few trials, after a
            # failed trial, and on every kind of host at the end.
            kinds_next = {o.plan.kind for o in outs if o.problems}
            if (i // parallel) % NEXT_EVERY == 0:
                kinds_next |= {p.kind for p in batch}
            if last:
                kinds_next |= set(st["kinds"])
            for k in sorted(kinds_next):
                for prob in next_job(k, "%s trial %d" % (name, i - 1)):
                    failures.append(prob)
                    print(prob, flush=True)
        st["took"] = time.monotonic() - t0
        STATS[name] = st
        print("chaos: " + stats_line(name, st), flush=True)
        if failures:
            self.fail("%d of %d trials of %s failed:\n\n%s" % (
                st["failed"], st["trials"], name, "\n\n".join(failures)))

    def test_1_kill_rank(self):
        self.scenario("kill_rank")

    def test_2_stop_rank(self):
        self.scenario("stop_rank")

    def test_3_kill_agent(self):
        self.scenario("kill_agent")

    def test_4_kill_sshd(self):
        self.scenario("kill_sshd")

    def test_5_kill_hr(self):
        self.scenario("kill_hr")

    def test_6_term_hr(self):
        self.scenario("term_hr")


def main():
    import atexit
    atexit.register(hvdtest._cleanup)
    for path, what in ((hvdtest.HOROVODRUN, "horovodrun"),
                       (hvdtest.HVD_AGENT, "hvd-agent"),
                       (WORKER, "chaosworker")):
        if not os.access(path, os.X_OK):
            sys.stderr.write("%s not found at %s; build first or set the "
                             "HVD_* variables\n" % (what, path))
            sys.exit(1)
    t0 = time.monotonic()
    prog = unittest.main(verbosity=2, exit=False)
    print("chaos: whole run %.1f s (seed %s)" % (time.monotonic() - t0,
                                                 MASTER), flush=True)
    for name in SCENARIOS:
        if name in STATS:
            print("chaos:   " + stats_line(name, STATS[name]), flush=True)
    sys.exit(not prog.result.wasSuccessful())


if __name__ == "__main__":
    main()
