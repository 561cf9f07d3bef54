"""Jobs of many ranks on one host: 4, 16 and 64 ranks (oversubscribed on a
small machine) of a tiny program (tests/runtime/tiny.c) start, run a few
collectives and exit cleanly; horovodrun's and the local agent's file
descriptors and peak memory are measured while every rank is alive and
printed as a table (figures; the assertions are generous bounds that only
catch leaks that grow with the job)."""

import os
import resource
import subprocess
import time
import unittest

HR = os.environ["HVD_HOROVODRUN"]
TINY = os.environ["HVD_TINY"]
MARK = "HVDTEST_RESOURCES_MARK=%d" % os.getpid()


def proc_figures(pid):
    """(open fds, peak RSS in KiB) of a live process, or None."""
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/status" % pid) as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
        return fds, hwm
    except (OSError, StopIteration):
        return None


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def marked_alive():
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if MARK.encode() in f.read().split(b"\0"):
                    alive.append(pid)
        except OSError:
            pass
    return alive


def nofile(soft, hard):
    """A preexec_fn that sets the open-files limit of the child."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class ResourcesTest(unittest.TestCase):

    def test_a_low_open_files_limit_is_raised(self):
        # 48 ranks need about 150 pipes in the local agent and 48
        # rendezvous connections in horovodrun: more than a soft limit of
        # 100, which horovodrun raises towards the hard limit.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard < 2048:
            self.skipTest("the hard open-files limit is %d" % hard)
        argv = [HR, "-np", "48", TINY, "0"]
        p = subprocess.run(argv, preexec_fn=nofile(100, hard), text=True,
                           capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr)
        self.assertEqual(p.stdout.count(": ok\n"), 48, p.stderr)
        # Where the hard limit is as low, the job fails, and one line
        # first says what to do.
        p = subprocess.run(argv, preexec_fn=nofile(100, 100), text=True,
                           capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stderr.startswith(
            "horovodrun: warning: 48 ranks may need 1216 open "
            "files in horovodrun (a rendezvous connection each), and the "
            "hard limit is 100; raise it (ulimit -Hn, or LimitNOFILE in "
            "systemd) if ranks fail to connect\n"), p.stderr)

    def run_job(self, np):
        env = dict(os.environ)
        env[MARK.split("=")[0]] = MARK.split("=")[1]
        start = time.monotonic()
        p = subprocess.Popen([HR, "-np", str(np), TINY, "1500"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
        best = {"horovodrun": (0, 0), "hvd-agent": (0, 0)}
        # Sample while the ranks hold (1.5 s after their collectives).
        while p.poll() is None and time.monotonic() - start < 60:
            for name, pid in [("horovodrun", p.pid)] + [
                    ("hvd-agent", c) for c in children(p.pid)]:
                fig = proc_figures(pid)
                if fig:
                    best[name] = tuple(max(a, b)
                                       for a, b in zip(best[name], fig))
            time.sleep(0.05)
        out, err = p.communicate(timeout=120)
        took = time.monotonic() - start
        self.assertEqual(p.returncode, 0, out[-2000:] + err[-2000:])
        self.assertEqual(out.count(": ok\n"), np, out[-2000:] + err)
        return best, took

    def test_4_16_64_ranks(self):
        rows = []
        for np in (4, 16, 64):
            best, took = self.run_job(np)
            rows.append((np, best, took))
            for name, (fds, hwm) in best.items():
                self.assertGreater(fds, 0, name)
                # Bounds far above what is measured: a leak per rank or
                # per line would cross them.
                self.assertLess(fds, 64 + 8 * np, (name, np))
                self.assertLess(hwm, 128 * 1024, (name, np))
            for _ in range(50):
                if not marked_alive():
                    break
                time.sleep(0.1)
            self.assertEqual(marked_alive(), [], "processes outlived the job")
        print("\n# ranks | horovodrun fds | horovodrun peak RSS | agent fds "
              "| agent peak RSS | job time (incl. 1.5 s hold)")
        for np, best, took in rows:
            print("# %5d | %14d | %16.1f MiB | %9d | %11.1f MiB | %.2f s" % (
                np, best["horovodrun"][0], best["horovodrun"][1] / 1024,
                best["hvd-agent"][0], best["hvd-agent"][1] / 1024, took))


if __name__ == "__main__":
    unittest.main(verbosity=2)
