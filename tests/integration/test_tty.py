"""Integration tests: progress lines drawn in place on a real terminal
(tmux, whose screen capture-pane reads back), rate-limited elsewhere, the
start-up line, --output-ranks, --color and --no-tty-status."""

import os
import re
import shlex
import shutil

import hvdtest
from hvdtest import py, sh
from tmuxterm import Tmux

RDVIDLE = os.environ.get("HVD_RDVIDLE", os.path.join(
    hvdtest.BUILD, "tests", "integration", "rdvidle"))

# Real tqdm on stderr: 40 updates 50 ms apart (20 a second for 2 s).
TQDM = r"""
import sys, time
from tqdm import tqdm
for _ in tqdm(range(40), file=sys.stderr, mininterval=0, miniters=1,
              ncols=70):
    time.sleep(0.05)
print("done", flush=True)
"""
# Debian's python3-tqdm is for Debian's Python.
SYSTEM_PYTHON = "/usr/bin/python3"

# Each rank says hello, draws a bar as tqdm does ("\r" + text, on stderr)
# to step 3, logs a line between, waits for the test's go file, then ends
# the bar with a newline and says done.
BAR = r"""
import os, sys, time
r = int(os.environ["HOROVOD_RANK"])
go = sys.argv[1]
print("hello %d" % r, flush=True)
for i in range(1, 4):
    sys.stderr.write("\rstep %d/3 rank %d" % (i, r))
    sys.stderr.flush()
    time.sleep(0.05)
    if i == 2:
        print("log %d" % r, flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
sys.stderr.write("\n")
print("done %d" % r, flush=True)
"""


class TerminalTest(hvdtest.TestCase):

    def setUp(self):
        super().setUp()
        if shutil.which("tmux") is None:
            self.fail("tmux is not installed; scripts/install-deps.sh "
                      "installs it")

    def term(self, *args, **extra):
        return Tmux(self, hvdtest.hr_args(*args), self.env(**extra))

    def bar_job(self, *opts):
        go = os.path.join(self.tmp, "go")
        script = os.path.join(self.tmp, "bar.py")
        with open(script, "w") as f:
            f.write(BAR)
        out = os.path.join(self.tmp, "out")
        t = self.term("-np", "3", "--output-filename", out, *opts,
                      hvdtest.PYTHON, script, go)
        return t, go, out

    def test_progress_drawn_in_place(self):
        t, go, out = self.bar_job()
        live = ["[%d,%d]<stderr>:step 3/3 rank %d" % (r, r, r)
                for r in range(3)]
        # Each rank's last state, shown while its bar has no end yet.
        rows = t.wait(lambda rows: all(l in rows for l in live) and
                      all("log %d" % r in " ".join(rows) for r in range(3)))
        committed = rows[:-3]
        self.assertEqual(sorted(rows[-3:]), live, "one live row per rank")
        self.assertEqual(sorted(committed), sorted(
            ["[%d,%d]<stdout>:hello %d" % (r, r, r) for r in range(3)] +
            ["[%d,%d]<stdout>:log %d" % (r, r, r) for r in range(3)]))
        self.assertFalse([r for r in rows if "step 1/3" in r or
                          "step 2/3" in r], "no update scrolls")
        open(go, "w").close()
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertEqual(t.exit_code(rows), 0)
        body = rows[:rows.index("EXIT=0")]
        # The final state stays as a normal line; the block is gone.
        for r in range(3):
            mine = [x for x in body if x.startswith("[%d,%d]" % (r, r))]
            self.assertEqual(mine, [
                "[%d,%d]<stdout>:hello %d" % (r, r, r),
                "[%d,%d]<stdout>:log %d" % (r, r, r),
                "[%d,%d]<stderr>:step 3/3 rank %d" % (r, r, r),
                "[%d,%d]<stdout>:done %d" % (r, r, r)])
        self.assertEqual(len(body), 12, "nothing but the ranks' lines")
        # The files keep every byte.
        for r in range(3):
            with open(os.path.join(out, "rank.%d" % r, "stderr"),
                      newline="") as f:
                self.assertEqual(f.read(), "".join(
                    "\rstep %d/3 rank %d" % (i, r) for i in (1, 2, 3)) +
                    "\n")

    def test_tqdm_leaves_only_its_last_state(self):
        # Updates spread over 2 s are drawn one redraw after another; none
        # may reach the screen or its scrollback as a line of its own.
        script = os.path.join(self.tmp, "tqdm_bar.py")
        with open(script, "w") as f:
            f.write(TQDM)
        t = self.term("-np", "2", SYSTEM_PYTHON, script)
        rows = t.wait(lambda rows: t.exit_code(rows) is not None,
                      history=True)
        self.assertEqual(t.exit_code(rows), 0, "\n".join(rows))
        body = rows[:rows.index("EXIT=0")]
        for r in range(2):
            mine = [x for x in body if x.startswith("[%d,%d]" % (r, r))]
            self.assertEqual(len(mine), 2, "\n".join(rows))
            self.assertRegex(mine[0], r"^\[%d,%d\]<stderr>:100%%\|.*\| 40/40 "
                             % (r, r))
            self.assertEqual(mine[1], "[%d,%d]<stdout>:done" % (r, r))
        self.assertEqual(len(body), 4, "\n".join(rows))

    def test_colours_per_rank(self):
        t, go, _ = self.bar_job()
        open(go, "w").close()
        rows = t.wait(lambda rows: t.exit_code(rows) is not None,
                      escapes=True)
        colours = {}
        for row in rows:
            m = re.match(r"^\x1b\[(\d+)m\[(\d),", row)
            if m:
                colours.setdefault(m.group(2), set()).add(m.group(1))
        self.assertEqual(colours, {"0": {"36"}, "1": {"32"}, "2": {"33"}},
                         "a stable colour per rank: %r" % rows)

    def test_no_color_and_never(self):
        for opts, extra in (((), {"NO_COLOR": "1"}),
                            (("--color", "never"), {})):
            with self.subTest(opts=opts):
                t = self.term("-np", "2", *opts, *sh("echo x"), **extra)
                rows = t.wait(lambda rows: t.exit_code(rows) is not None,
                              escapes=True)
                self.assertFalse([r for r in rows if "\x1b" in r], rows)
                self.assertIn("[1,1]<stdout>:x", rows)

    def test_no_tty_status_scrolls_every_update(self):
        t, go, _ = self.bar_job("--no-tty-status")
        open(go, "w").close()
        rows = t.wait(lambda rows: t.exit_code(rows) is not None,
                      escapes=True)
        self.assertEqual(t.exit_code(rows), 0)
        mine = [x for x in rows if x.startswith("[0,0]<stderr>")]
        # As before: the leading \r gives an empty line, each update one.
        self.assertEqual(mine, ["[0,0]<stderr>:"] + [
            "[0,0]<stderr>:step %d/3 rank 0" % i for i in (1, 2, 3)])
        self.assertFalse([r for r in rows if "\x1b" in r], "no colour")

    def test_output_ranks(self):
        t, go, out = self.bar_job("--output-ranks", "0,2")
        open(go, "w").close()
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertEqual(t.exit_code(rows), 0)
        self.assertEqual({r[:5] for r in rows if r.startswith("[")},
                         {"[0,0]", "[2,2]"})
        with open(os.path.join(out, "rank.1", "stdout")) as f:
            self.assertEqual(f.read(), "hello 1\nlog 1\ndone 1\n")

    def test_startup_line_names_the_straggler(self):
        if not os.access(RDVIDLE, os.X_OK):
            self.fail("rdvidle not built at %s" % RDVIDLE)
        t = self.term("-np", "2", *sh(
            '[ "$HOROVOD_RANK" = 1 ] && sleep 4; exec %s 0' %
            shlex.quote(RDVIDLE)))
        want = ("horovodrun: 1/2 ranks connected; waiting for localhost "
                "(rank 1)")
        t.wait(lambda rows: want in rows, timeout=20)
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertEqual(t.exit_code(rows), 0, rows)
        self.assertFalse([r for r in rows if "connected" in r],
                         "erased once the ranks run")
        self.assertEqual(len([r for r in rows if "rdvidle: rank" in r]), 4)

    def test_elastic_startup_line_waits_for_slots(self):
        # The discovery script lists no host until the test's go file is
        # there: the line says what the job waits for, then goes.
        go = os.path.join(self.tmp, "go")
        script = os.path.join(self.tmp, "hosts.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n[ -e %s ] && echo localhost:2\nexit 0\n"
                    % shlex.quote(go))
        os.chmod(script, 0o755)
        t = self.term("-np", "2", "--host-discovery-script", script,
                      *sh("echo started $HOROVOD_RANK"),
                      HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")
        want = "horovodrun: elastic: waiting for 2 slots (0 found)"
        t.wait(lambda rows: want in rows, timeout=20)
        open(go, "w").close()
        rows = t.wait(lambda rows: t.exit_code(rows) is not None)
        self.assertEqual(t.exit_code(rows), 0, rows)
        self.assertFalse([r for r in rows if "waiting for" in r],
                         "erased once the ranks run")
        self.assertEqual(len([r for r in rows if "started" in r]), 2, rows)


class PipeTest(hvdtest.TestCase):

    def test_progress_rate_limited(self):
        script = r"""
import os, sys, time
for i in range(1, 31):
    sys.stdout.write("\rstep %d" % i)
    sys.stdout.flush()
    time.sleep(0.1)
sys.stdout.write("\n")
print("end")
"""
        res = self.run_hr("-np", "1", "--output-filename",
                          os.path.join(self.tmp, "out"), *py(script))
        self.assertRc(res, 0)
        steps = [l for l in res.out_lines if "step" in l]
        # About three seconds of updates: at most one a second, the last
        # state always, and no empty line from the leading \r.
        self.assertLessEqual(len(steps), 6, steps)
        self.assertGreaterEqual(len(steps), 3, steps)
        self.assertEqual(steps[-1], "[0,0]<stdout>:step 30")
        self.assertEqual(res.out_lines[-1], "[0,0]<stdout>:end")
        self.assertNotIn("[0,0]<stdout>:", res.out_lines)
        with open(os.path.join(self.tmp, "out", "rank.0", "stdout"),
                  newline="") as f:
            self.assertEqual(f.read(), "".join(
                "\rstep %d" % i for i in range(1, 31)) + "\nend\n")

    def test_held_back_update_is_written(self):
        # The last update before a long pause comes within a second.
        res = self.run_hr("-np", "1", *sh(
            'printf "a\\r"; printf "b\\r"; sleep 2; echo end'))
        self.assertRc(res, 0)
        self.assertEqual(res.out_lines, ["[0,0]<stdout>:a", "[0,0]<stdout>:b",
                                         "[0,0]<stdout>:end"])

    def test_no_tty_status_byte_identical(self):
        res = self.run_hr("-np", "1", "--no-tty-status",
                          *sh('printf "\\ra\\rb\\rc\\n"'))
        self.assertRc(res, 0)
        self.assertEqual(res.out, "".join(
            "[0,0]<stdout>:%s\n" % t for t in ("", "a", "b", "c")))

    def test_color_always_in_a_pipe(self):
        res = self.run_hr("-np", "2", "--color", "always", *sh("echo x"),
                          TERM="xterm")
        self.assertRc(res, 0)
        self.assertIn("\x1b[36m[0,0]<stdout>:\x1b(B\x1b[mx", res.out_lines)

    def test_output_ranks_errors(self):
        res = self.run_hr("-np", "2", "--output-ranks", "0,x", "true")
        self.assertRc(res, 2)
        self.assertIn("--output-ranks must be ranks and ranges", res.err)
        res = self.run_hr("-np", "2", "--output-ranks", "1-2", "true")
        self.assertRc(res, 2)
        self.assertIn("--output-ranks: rank 2 is not in the job (ranks 0-1)",
                      res.err)
        res = self.run_hr("-np", "2", "--color", "sometimes", "true")
        self.assertRc(res, 2)
        self.assertIn("--color must be auto, always or never", res.err)


if __name__ == "__main__":
    hvdtest.main()
