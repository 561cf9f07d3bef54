"""Remote-exec agents (--rsh-agent, OMPI_MCA_plm_rsh_agent) on loopback
hosts 127.0.0.2 and 127.0.0.3.

The agent here is kubexec.sh as the Kubeflow training-operator writes it,
with `kubectl exec POD -- /bin/sh -c "$*"` played by a process of its own
session and environment: it gets no input, the pod's environment, and it
outlives the script, as a command under kubectl exec outlives a killed
kubectl. So hvd-agent must connect back to horovodrun for its frames, and
its ranks must die when that connection closes."""

import os
import re
import signal
import socket
import time
import unittest

import hvdtest
from hvdtest import py

ERR = hvdtest.ERR_PREFIX
COLLCHECK = os.environ["HVD_COLLCHECK"]
PREFLIGHT_RC = 255
HOSTS = "127.0.0.2:2,127.0.0.3:2"

KUBEXEC = r"""#!/bin/sh
POD_NAME=$1
shift
echo "$POD_NAME" >> "$(dirname "$0")/pods"
%s
exec setsid -w env -i PATH="$PATH" HOME="$HOME" HVDTEST_MARK="$HVDTEST_MARK" \
    /bin/sh -c "$*" </dev/null %s
"""

# What PBS's pbs_tmrsh does with a task's output: not back to the caller.
NO_OUTPUT = ">/dev/null 2>&1"



def is_ready(line):
    return line.endswith(">:ready")


class RshTest(hvdtest.TestCase):

    def agent(self, before="", after=""):
        """Writes the kubexec.sh of this test; returns its path."""
        path = os.path.join(self.tmp, "kubexec.sh")
        with open(path, "w") as f:
            f.write(KUBEXEC % (before, after))
        os.chmod(path, 0o755)
        return path

    def pods(self):
        with open(os.path.join(self.tmp, "pods")) as f:
            return sorted(f.read().split())

    def assertNoneLeft(self):
        left = hvdtest.wait_gone(self.marker, 10)
        self.assertEqual(left, [], "left running")

    def test_job_over_the_rsh_agent(self):
        res = self.run_hr("--verbose", "--rsh-agent", self.agent(), "-np",
                          "4", "-H", HOSTS, COLLCHECK, timeout=120)
        self.assertRc(res, 0)
        # Each agent carries its ranks' rendezvous to horovodrun.
        for r in range(4):
            self.assertIn("rendezvous: rank %d registered from host "
                          "127.0.0.%d, through its agent" % (r, 2 + r // 2),
                          res.err)
        self.assertEqual(self.pods(), ["127.0.0.2", "127.0.0.3"])
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [])
        for r in range(4):
            self.assertIn((r % 2, "collcheck: rank %d of 4: 607 checks, "
                           "0 failures" % r), per[r], res.describe())
        self.assertNotIn("hvd-agent connected", res.out + res.err)
        self.assertNoneLeft()

    def test_rsh_agent_without_output(self):
        # The agents read the job's token file (the working directory is
        # shared here) and speak both ways on their connection.
        res = self.run_hr("--rsh-agent", self.agent(after=NO_OUTPUT), "-np",
                          "4", "-H", HOSTS, COLLCHECK, timeout=120)
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual((bad, sorted(per)), ([], [0, 1, 2, 3]))
        for r in range(4):
            self.assertIn((r % 2, "collcheck: rank %d of 4: 607 checks, "
                           "0 failures" % r), per[r], res.describe())
        self.assertEqual([f for f in os.listdir(self.tmp)
                          if f.startswith(".hvd-rsh-")], [],
                         "the token file is left behind")
        job = self.start_hr("--rsh-agent", self.agent(after=NO_OUTPUT),
                            "-np", "4", "-H", HOSTS, "--kill-grace", "1",
                            *py(hvdtest.READY_DIE), DIE="3")
        self.assertEqual(job.wait(60), 137, job.describe())
        self.assertRegex(job.err, r"rank 3 \(host 127\.0\.0\.3, "
                         r"local_rank 1\) was killed by signal 9",
                         job.describe())
        self.assertNoneLeft()

    def test_agent_from_open_mpis_variable(self):
        path = self.agent()
        res = self.run_hr("--verbose", "-np", "2", "-H", "127.0.0.2:2",
                          "sh", "-c", "echo on $HOROVOD_HOSTNAME",
                          OMPI_MCA_plm_rsh_agent="no-such-rsh : " + path)
        self.assertRc(res, 0)
        self.assertIn("started hvd-agent through %s" % path, res.err)
        self.assertEqual(sorted(res.out_lines),
                         ["[0,0]<stdout>:on 127.0.0.2",
                          "[1,1]<stdout>:on 127.0.0.2"])
        # --launcher ssh wins over the variable: no sshd listens there.
        res = self.run_hr("--launcher", "ssh", "-np", "1", "-H", "127.0.0.2",
                          "-p", "1", "--start-timeout", "1", "true",
                          OMPI_MCA_plm_rsh_agent=path)
        self.assertRc(res, PREFLIGHT_RC)
        self.assertEqual(self.pods(), ["127.0.0.2"])

    def test_killed_rank_is_named_and_sigkill_leaves_nothing(self):
        job = self.start_hr("--rsh-agent", self.agent(), "-np", "4", "-H",
                            HOSTS, "--kill-grace", "1",
                            *py(hvdtest.READY_DIE), DIE="3")
        rc = job.wait(60)
        self.assertEqual(rc, 137, job.describe())
        self.assertRegex(job.err, r"rank 3 \(host 127\.0\.0\.3, local_rank 1\)"
                         r" was killed by signal 9", job.describe())
        self.assertNoneLeft()
        job = self.start_hr("--rsh-agent", self.agent(), "-np", "4", "-H",
                            HOSTS, *py(hvdtest.READY_DIE))
        job.wait_line(is_ready, count=4, timeout=60)
        self.assertGreaterEqual(
            len([c for _, c, _ in hvdtest.marked_procs(self.marker)
                 if c == "hvd-agent"]), 2)
        job.signal(signal.SIGKILL)
        job.wait(10)
        self.assertNoneLeft()

    def test_rsh_agent_that_fails(self):
        res = self.run_hr("--rsh-agent", self.agent("exit 3"), "-np", "4",
                          "-H", HOSTS, "true")
        self.assertRc(res, PREFLIGHT_RC)
        for h in ("127.0.0.2", "127.0.0.3"):
            self.assertIn("%shost %s: the rsh agent '%s' exited with status 3 "
                          "before hvd-agent there connected back (its "
                          "messages, if any, are above)"
                          % (ERR, h, self.agent("exit 3")), res.err_lines)
        # One that prints a greeting of its own cannot take the host.
        forged = 'echo "hvd-agent connected %s"' % ("0" * 64)
        res = self.run_hr("--rsh-agent", self.agent(forged), "-np", "1",
                          "-H", "127.0.0.2", "true")
        self.assertRc(res, PREFLIGHT_RC)
        self.assertIn(ERR + "host 127.0.0.2: hvd-agent connected back, but "
                      "not on a connection that horovodrun can match",
                      res.err)
        self.assertNoneLeft()

    def test_stranger_on_the_port_gets_no_frames(self):
        # The agent starts late; a stranger connects first and must get
        # nothing but its own challenge (the job's frames hold its secret).
        job = self.start_hr("--verbose", "--rsh-agent",
                            self.agent("sleep 1"), "-np", "1", "-H",
                            "127.0.0.2", "sh", "-c", "echo fine")
        _, line = job.wait_line(lambda l: "waiting for agents" in l,
                                stream="stderr", timeout=20)[0]
        port = int(re.search(r"port (\d+)", line).group(1))
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.addCleanup(s.close)
        got = b""
        while not got.endswith(b"\n"):
            got += s.recv(100)
        self.assertRegex(got, rb"^[0-9a-f]{64}\n$")
        self.assertEqual(job.wait(30), 0, job.describe())
        self.assertIn("[0,0]<stdout>:fine", job.out)
        s.settimeout(5)
        rest = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            rest += b
        self.assertEqual(rest, b"", "a stranger got the job's frames")

    def test_usage_errors(self):
        path = self.agent()
        cases = [
            (["--rsh-agent", path, "--launcher", "ssh"],
             "--rsh-agent starts the agents; it cannot be used with "
             "--launcher ssh"),
            (["--rsh-agent", path, "--mpi"],
             "--rsh-agent cannot be used with --mpi"),
            (["--rsh-agent", os.path.join(self.tmp, "nope")],
             "--rsh-agent '%s': no such program" % os.path.join(self.tmp,
                                                                "nope")),
            (["--launcher", "rsh"], "--launcher rsh needs --rsh-agent CMD"),
            (["--rsh-tree"], "--rsh-tree needs --rsh-agent CMD (or "
             "OMPI_MCA_plm_rsh_agent naming a program)"),
        ]
        for args, want in cases:
            res = self.run_hr(*args, "-np", "1", "-H", "127.0.0.2", "true",
                              OMPI_MCA_plm_rsh_agent=None)
            self.assertRc(res, 2)
            self.assertEqual(len(res.error_lines()), 1, res.describe())
            self.assertIn(want, res.error_lines()[0])


if __name__ == "__main__":
    unittest.main()
