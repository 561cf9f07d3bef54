"""A terminal for tests: one tmux server of its own running one command,
whose screen the test reads (tty, clusters)."""

import os
import re
import shlex
import subprocess
import time


class Tmux:
    """One tmux server of its own, running one command on a 120x40 screen
    (after the shell lines of prelude)."""

    def __init__(self, test, cmd, env, prelude=""):
        self.sock = "hvdtest-%d-%s" % (os.getpid(), test.marker[-12:])
        script = os.path.join(test.tmp, "run.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n")
            for k, v in env.items():
                if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                    f.write("export %s=%s\n" % (k, shlex.quote(v)))
            # tmux sets TERM for its panes; the environment's must not win.
            f.write("export TERM=screen\n" + prelude)
            f.write("%s\necho EXIT=$?\nsleep 600\n" %
                    " ".join(shlex.quote(c) for c in cmd))
        os.chmod(script, 0o755)
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", script)
        test.addCleanup(self.close)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null"] +
                              list(args), check=True, capture_output=True,
                              text=True, timeout=20).stdout

    def screen(self, escapes=False, history=False):
        """The screen's rows (after the scrollback's, with history),
        trailing blanks and blank rows cut off."""
        text = self.tmux("capture-pane", "-p", *(["-e"] if escapes else []),
                         *(["-S", "-"] if history else []))
        rows = [r.rstrip() for r in text.split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def wait(self, pred, timeout=30, escapes=False, history=False):
        """The first screen pred accepts; fails with the last one."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.screen(escapes, history)
            if pred(rows):
                return rows
            if time.monotonic() > deadline:
                raise AssertionError("screen never matched:\n" +
                                     "\n".join(rows))
            time.sleep(0.05)

    def exit_code(self, rows):
        for r in rows:
            m = re.match(r"^EXIT=(\d+)$", r)
            if m:
                return int(m.group(1))
        return None

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"],
                       capture_output=True, timeout=20)
