"""Integration tests: rank output on the terminal and in --output-filename."""

import os
import re
import time

import hvdtest
from hvdtest import py, sh

# Each rank writes N numbered lines of varying length to stdout and to
# stderr, in raw writes of random sizes that cut lines anywhere.
ORDERED = hvdtest.ORDERED


class OutputTest(hvdtest.TestCase):

    def test_exact_prefixes(self):
        res = self.run_hr(
            "-np", "3",
            *sh('echo "out $HOROVOD_RANK"; echo "err $HOROVOD_RANK" >&2'))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:out 0", "[1,1]<stdout>:out 1",
            "[2,2]<stdout>:out 2"])
        self.assertEqual(sorted(res.err_lines), [
            "[0,0]<stderr>:err 0", "[1,1]<stderr>:err 1",
            "[2,2]<stderr>:err 2"])

    def test_prefixes_on_second_host(self):
        res = self.run_hr(
            "-np", "3", "-H", "localhost:1,127.0.0.1:2",
            *sh('echo "o$HOROVOD_RANK"; echo "e$HOROVOD_RANK" >&2'))
        self.assertRc(res, 0)
        self.assertEqual(sorted(res.out_lines), [
            "[0,0]<stdout>:o0", "[1,0]<stdout>:o1", "[2,1]<stdout>:o2"])
        self.assertEqual(sorted(res.err_lines), [
            "[0,0]<stderr>:e0", "[1,0]<stderr>:e1", "[2,1]<stderr>:e2"])

    def test_order_and_completeness(self):
        n = 2000
        res = self.run_hr("-np", "4", *py("N = %d\n" % n + ORDERED),
                          timeout=90)
        self.assertRc(res, 0)
        self.assertOrderedStreams(res, 4, n)

    def test_one_mib_line(self):
        size = 1 << 20
        script = r"""
import os, sys
r = int(os.environ["HOROVOD_RANK"])
c = "AB"[r].encode()
os.write(1, b"before\n")
data = c * (1 << 20) + b"\n"
# Several writes: the line crosses many pipe buffers.
for i in range(0, len(data), 70000):
    os.write(1, data[i:i + 70000])
os.write(2, c * (1 << 20) + b"\nafter-err\n")
os.write(1, b"after\n")
"""
        res = self.run_hr("-np", "2", *py(script))
        self.assertRc(res, 0)
        for r, c in ((0, "A"), (1, "B")):
            big = "[%d,%d]<stdout>:%s" % (r, r, c * size)
            self.assertEqual(res.out_lines.count(big), 1,
                             "rank %d's 1 MiB line is not whole" % r)
            per, bad = hvdtest.prefixed(res.out_lines)
            self.assertEqual(bad, [])
            self.assertEqual([t for _, t in per[r]],
                             ["before", c * size, "after"])
            per, bad = hvdtest.prefixed(res.err_lines, "stderr")
            self.assertEqual(bad, [])
            self.assertEqual([t for _, t in per[r]], [c * size, "after-err"])
        self.assertEqual(len(res.out_bytes),
                         2 * (len("[0,0]<stdout>:") * 3 + size + 1 +
                              len("before\n") + len("after\n")))

    def test_last_line_without_newline(self):
        res = self.run_hr("-np", "2", *sh(
            'printf "first\\nlast-$HOROVOD_RANK"; printf "e1\\ne-end" >&2'))
        self.assertRc(res, 0)
        per, bad = hvdtest.prefixed(res.out_lines)
        self.assertEqual(bad, [])
        for r in range(2):
            self.assertEqual([t for _, t in per[r]],
                             ["first", "last-%d" % r])
        per, bad = hvdtest.prefixed(res.err_lines, "stderr")
        self.assertEqual(bad, [])
        for r in range(2):
            self.assertEqual([t for _, t in per[r]], ["e1", "e-end"])
        # The terminal line is completed with a newline.
        self.assertTrue(res.out.endswith("\n"))
        self.assertTrue(res.err.endswith("\n"))

    def test_carriage_return_ends_a_line(self):
        res = self.run_hr("-np", "1", *sh(
            'printf "a\\rb\\rc\\n"; printf "x\\r\\ny\\n"; printf "p\\r"; '
            'sleep 0.2; printf "\\nq\\n"'))
        self.assertRc(res, 0)
        # \r\n is one line end, even when the \n comes in a later write.
        self.assertEqual(res.out, "".join(
            "[0,0]<stdout>:%s\n" % t for t in "abcxypq"))

    def test_lines_appear_while_rank_runs(self):
        script = r"""
import os, sys, time
r = int(os.environ["HOROVOD_RANK"])
if r == 0:
    print("early", time.time(), flush=True)
    time.sleep(10)
    print("late", flush=True)
else:
    time.sleep(3)
    sys.exit(1)
"""
        job = self.start_hr("-np", "2", "--kill-grace", "1", *py(script))
        (arrived, line), = job.wait_line(
            lambda l: l.startswith("[0,0]<stdout>:early "), timeout=15)
        now_wall = time.time()
        now_mono = time.monotonic()
        printed = float(line.split()[1])
        latency = (arrived - now_mono) + now_wall - printed
        self.assertTrue(job.alive(), "the job ended before the check")
        self.assertLess(latency, 2.0, "the line took %.2f s to arrive" %
                        latency)
        rc = job.wait(timeout=20)
        self.assertEqual(rc, 1, job.describe())
        self.assertNotIn("late", job.out)
        self.assertLess(job.elapsed, 9.5, "job not stopped by rank 1")

    def test_stdout_closed_does_not_stop_job(self):
        # horovodrun | head -1: the terminal goes away, the ranks go on.
        out = os.path.join(self.tmp, "done")
        script = ("import os, sys\n"
                  "for i in range(20000): print('line', i)\n"
                  "open(sys.argv[1] + os.environ['HOROVOD_RANK'], 'w')\n")
        cmd = " ".join(hvdtest.shlex.quote(a) for a in hvdtest.hr_args(
            "-np", "2", *py(script), out))
        res = hvdtest.run(["sh", "-c", cmd + " | head -1; exit 0"],
                          env=self.env(), timeout=60)
        self.assertRc(res, 0)
        self.assertEqual(len(res.out_lines), 1)
        self.assertTrue(os.path.exists(out + "0") and os.path.exists(out + "1"),
                        "ranks did not finish when the terminal went away\n"
                        + res.describe())


class OutputFilesTest(hvdtest.TestCase):

    RAW = r"""
import os
r = os.environ["HOROVOD_RANK"].encode()
os.write(1, b"l1-" + r + b"\r\nl2\rl3\n\nbin\x00\xff\x01end\nlast-" + r)
os.write(2, b"e1-" + r + b"\ne2\r\n")
"""

    def test_raw_files_and_terminal(self):
        d = os.path.join(self.tmp, "logs")
        res = self.run_hr("-np", "2", "--output-filename", d, *py(self.RAW))
        self.assertRc(res, 0)
        self.assertEqual(sorted(os.listdir(d)), ["rank.0", "rank.1"])
        for r in range(2):
            rb = str(r).encode()
            self.assertEqual(sorted(os.listdir(os.path.join(d, "rank.%d" % r))),
                             ["stderr", "stdout"])
            with open(os.path.join(d, "rank.%d" % r, "stdout"), "rb") as f:
                self.assertEqual(f.read(), b"l1-" + rb +
                                 b"\r\nl2\rl3\n\nbin\x00\xff\x01end\nlast-" +
                                 rb)
            with open(os.path.join(d, "rank.%d" % r, "stderr"), "rb") as f:
                self.assertEqual(f.read(), b"e1-" + rb + b"\ne2\r\n")
        # The terminal still gets prefixed lines.
        for r in range(2):
            pre = b"[%d,%d]<stdout>:" % (r, r)
            want = [pre + t for t in (b"l1-%d" % r, b"l2", b"l3", b"",
                                      b"bin\x00\xff\x01end",
                                      b"last-%d" % r)]
            got = [l for l in res.out_bytes.split(b"\n") if l.startswith(pre)]
            self.assertEqual(got, want)
            pre = b"[%d,%d]<stderr>:" % (r, r)
            got = [l for l in res.err_bytes.split(b"\n") if l.startswith(pre)]
            self.assertEqual(got, [pre + b"e1-%d" % r, pre + b"e2"])

    def check_layout(self, np, names):
        d = os.path.join(self.tmp, "deep", "er", "logs")  # mkdir -p
        res = self.run_hr("-np", np, "--output-filename", d,
                          *sh('echo "hello $HOROVOD_RANK"'), timeout=90)
        self.assertRc(res, 0)
        self.assertEqual(sorted(os.listdir(d)), sorted(names))
        for r, name in enumerate(names):
            with open(os.path.join(d, name, "stdout"), "rb") as f:
                self.assertEqual(f.read(), b"hello %d\n" % r)
            with open(os.path.join(d, name, "stderr"), "rb") as f:
                self.assertEqual(f.read(), b"")
        self.assertEqual(len(res.out_lines), np)

    def test_layout_padded_12(self):
        self.check_layout(12, ["rank.%02d" % r for r in range(12)])

    def test_layout_10_not_padded(self):
        self.check_layout(10, ["rank.%d" % r for r in range(10)])

    def test_layout_1(self):
        self.check_layout(1, ["rank.0"])

    def test_existing_files_are_replaced(self):
        d = os.path.join(self.tmp, "logs")
        os.makedirs(os.path.join(d, "rank.0"))
        with open(os.path.join(d, "rank.0", "stdout"), "w") as f:
            f.write("old content that is longer than the new one\n")
        res = self.run_hr("-np", "1", "--output-filename", d,
                          *sh("echo new"))
        self.assertRc(res, 0)
        with open(os.path.join(d, "rank.0", "stdout"), "rb") as f:
            self.assertEqual(f.read(), b"new\n")

    def test_uncreatable_dir(self):
        blocker = os.path.join(self.tmp, "file")
        with open(blocker, "w") as f:
            f.write("x")
        d = os.path.join(blocker, "logs")
        ran = os.path.join(self.tmp, "ran")
        res = self.run_hr("-np", "2", "--output-filename", d,
                          *sh("touch " + ran))
        self.assertRc(res, 2)
        self.assertEqual(len(res.err_lines), 1, res.describe())
        line = res.err_lines[0]
        self.assertTrue(line.startswith(
            "horovodrun: error: cannot create output directory '" + d),
            line)
        self.assertIn("Not a directory", line)
        self.assertEqual(res.out, "")
        self.assertFalse(os.path.exists(ran), "ranks ran anyway")

    # Python's time.asctime(), which Horovod writes before "[rank]".
    STAMP_RE = re.compile(r"^((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) "
                          r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|"
                          r"Dec) [ 123]\d \d\d:\d\d:\d\d \d{4})(\[.*)$")

    def test_prefix_output_with_timestamp(self):
        for flag in ("--prefix-output-with-timestamp", "-prefix-timestamp"):
            d = os.path.join(self.tmp, flag.strip("-"))
            before = int(time.time())
            res = self.run_hr(
                "-np", "2", flag, "--output-filename", d,
                *sh('echo "out $HOROVOD_RANK"; echo "err $HOROVOD_RANK" >&2'))
            after = int(time.time())
            self.assertRc(res, 0)
            for lines, stream in ((res.out_lines, "stdout"),
                                  (res.err_lines, "stderr")):
                rest = []
                for l in lines:
                    m = self.STAMP_RE.match(l)
                    self.assertIsNotNone(m, "no timestamp: %r\n%s" %
                                         (l, res.describe()))
                    t = time.mktime(time.strptime(m.group(1),
                                                  "%a %b %d %H:%M:%S %Y"))
                    self.assertTrue(before - 1 <= t <= after + 1,
                                    "%r is not the time of the run" % l)
                    rest.append(m.group(2))
                word = "out" if stream == "stdout" else "err"
                self.assertEqual(sorted(rest), [
                    "[0,0]<%s>:%s 0" % (stream, word),
                    "[1,1]<%s>:%s 1" % (stream, word)])
            # The per-rank files keep the rank's own bytes.
            for r in range(2):
                for name, word in (("stdout", "out"), ("stderr", "err")):
                    with open(os.path.join(d, "rank.%d" % r, name),
                              "rb") as f:
                        self.assertEqual(f.read(), b"%s %d\n" %
                                         (word.encode(), r))

    def test_empty_dir_name(self):
        res = self.run_hr("-np", "1", "--output-filename", "", "true")
        self.assertRc(res, 2)
        self.assertEqual(res.err_lines, [
            "horovodrun: error: --output-filename needs a directory name"])


if __name__ == "__main__":
    hvdtest.main()
