"""Integration tests of libhvd's transports on one host: shared memory
gives the TCP ring's bits, leaves nothing behind whatever the exit, and
fails (never hangs) when a rank stops during a collective
(tests/runtime/collcheck.c); a rank killed in a shared-memory wait is
tested in test_runtime.py. The hierarchical path across hosts is tested
over loopback SSH in tests/ssh/test_ssh.py."""

import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

HR = os.environ["HVD_HOROVODRUN"]
CHECK = os.environ["HVD_COLLCHECK"]
TINY = os.environ["HVD_TINY"]
HASH_RE = re.compile(r"collcheck: (identical \S+ n=\d+) hash ([0-9a-f]{16})")
DONE_RE = re.compile(r"collcheck: rank (\d+) of (\d+): (\d+) checks, "
                     r"(\d+) failures")
TRANSPORT_RE = re.compile(r"hvd: debug: rank (\d+): transport: (.*)")
NAME_RE = re.compile(r"collcheck: rank (\d+) transport (\S+)")
EAGER_RE = re.compile(r"hvd: debug: rank (\d+): (\d+) small allreduces folded "
                      r"from the negotiation")
STEADY_RE = re.compile(r"hvd: debug: rank (\d+): steady exchange: (\d+) of "
                       r"(\d+) cycles alike, (\d+) with folded tensors")
# scripts/test.sh's ThreadSanitizer pass: the jobs that only add ranks to
# single-threaded data movement (Bruck's links) are left to the first pass,
# where they take seconds rather than a minute.
UNDER_TSAN = os.environ.get("HVD_TEST_TSAN") == "1"
BRUCK_SKIP = "Bruck's links: run in the first pass, not under TSan"


def run(args, env=None, timeout=240):
    env = dict(env or os.environ)
    env[MARK.split("=")[0]] = MARK.split("=")[1]
    start = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    return p, time.monotonic() - start


# Runs "$@" in a mount namespace of its own with an empty /dev/shm, and
# lists what is left there afterwards into $HVDTEST_SHM_LIST: only what
# the job made, whatever the tests beside it make in the machine's.
PRIVATE_SHM = ('mount -t tmpfs hvdtest-shm /dev/shm || exit 99; "$@"; '
               'rc=$?; ls -A /dev/shm > "$HVDTEST_SHM_LIST"; exit $rc')


def run_private_shm(test, args):
    """(completed process, names the job left in its /dev/shm)."""
    listing = os.path.join(test.tmp, "shm-left")
    e = dict(os.environ, HVDTEST_SHM_LIST=listing)
    p, _ = run(["unshare", "--mount", "--propagation", "private", "sh",
                "-c", PRIVATE_SHM, "sh"] + args, e)
    if p.returncode == 99:
        test.skipTest("needs root for a private /dev/shm (unshare, mount)")
    with open(listing) as f:
        return p, f.read().split()


MARK = "HVDTEST_TRANSPORT_MARK=%d" % os.getpid()


def marked_processes():
    """Processes of this test's jobs (their environment holds MARK) that
    are still alive."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if MARK.encode() in f.read().split(b"\0"):
                    alive.append(pid)
        except OSError:
            pass
    return alive


class TransportTest(unittest.TestCase):

    def collcheck(self, np, *wrapper, **env):
        e = dict(os.environ, **env)
        p, _ = run([HR, "-np", str(np), "--log-level", "debug", *wrapper,
                    CHECK], e)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        done = DONE_RE.findall(p.stdout)
        self.assertEqual(sorted(int(r) for r, _, _, _ in done),
                         list(range(np)), p.stdout[-3000:])
        for _, _, checks, failures in done:
            self.assertGreater(int(checks), 150)
            self.assertEqual(int(failures), 0, p.stdout[-3000:])
        transports = dict((int(r), t) for r, t in
                          TRANSPORT_RE.findall(p.stderr))
        self.assertEqual(sorted(transports), list(range(np)), p.stderr)
        hashes = dict(HASH_RE.findall(p.stdout))
        # Four allreduces (two large, two small), and six reducescatters
        # (rank 0's slice).
        self.assertEqual(len(hashes), 10, p.stdout[-3000:])
        # hvd_transport() names the transport that the log describes.
        names = set(t for _, t in NAME_RE.findall(p.stdout))
        self.assertEqual(len(names), 1, p.stdout[-3000:])
        self.assertTrue(transports[0].startswith(
            {"shm": "shared memory", "ring": "TCP ring",
             "hier": "hierarchical"}[names.pop()]),
            transports)
        eager = dict((int(r), int(k)) for r, k in EAGER_RE.findall(p.stderr))
        return transports, hashes, STEADY_RE.findall(p.stderr), eager

    def test_shared_memory_gives_the_tcp_rings_bits(self):
        # From 4 ranks the ring's small gathers take Bruck's links; 6 is
        # not a power of two, so some of its steps wrap around. From 8
        # (HVD_SHM_VIA_FIRST_MIN) shared memory's cycles go through local
        # rank 0, which folds the small tensors for all (steady.c), and so
        # do small allreduces (shm_coll.c). TSan keeps to the smaller jobs
        # here and runs 9 ranks once, on shared memory alone
        # (test_nine_ranks_through_local_rank_0).
        for np in (2, 3, 4) if UNDER_TSAN else (2, 3, 4, 6, 9):
            with self.subTest(np=np):
                shm, shm_hashes, steady, _ = self.collcheck(np)
                for r, t in shm.items():
                    self.assertEqual(t, "shared memory (%d ranks on host "
                                     "localhost)" % np)
                self.assertSteady(np, steady)
                tcp, tcp_hashes, steady, _ = self.collcheck(
                    np, HOROVOD_SHM_DISABLE="1")
                for r, t in tcp.items():
                    self.assertEqual(t, "TCP ring (%d ranks)" % np)
                self.assertEqual(steady, [])
                # Random floats, where the order of additions shows: the
                # same bits on both transports.
                self.assertEqual(shm_hashes, tcp_hashes)

    @unittest.skipUnless(UNDER_TSAN, "the first pass runs it, and "
                         "compares its bits with the TCP ring's")
    def test_nine_ranks_through_local_rank_0(self):
        # ThreadSanitizer's look at the paths that start at 8 ranks: the
        # steady cycle and small allreduces through local rank 0.
        _, _, steady, _ = self.collcheck(9)
        self.assertSteady(9, steady)

    def assertSteady(self, np, steady):
        # Below 8 ranks no cycle goes through rank 0; from 8, every rank
        # counts the same cycles, and a good share of them are alike, some
        # with folded tensors: the bits above came from that path too.
        if np < 8:
            self.assertEqual(steady, [])
            return
        self.assertEqual(sorted(int(r) for r, *_ in steady), list(range(np)))
        self.assertEqual(len(set(c[1:] for c in steady)), 1, steady)
        alike, cycles, folded = (int(v) for v in steady[0][1:])
        self.assertGreater(alike, cycles // 3, steady[0])
        self.assertGreater(folded, 10, steady[0])

    @unittest.skipIf(UNDER_TSAN, "256 ranks: run in the first pass")
    def test_256_ranks_share_memory(self):
        # More ranks than one SCM_RIGHTS message carries descriptors for
        # (253): the segment and eventfds reach each rank in several.
        np = 256
        p, _ = run([HR, "-np", str(np), "--log-level", "debug", TINY])
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertEqual(p.stdout.count(": ok\n"), np, p.stdout[-2000:])
        transports = set(t for _, t in TRANSPORT_RE.findall(p.stderr))
        self.assertEqual(transports, {"shared memory (%d ranks on host "
                                      "localhost)" % np}, p.stderr[-2000:])

    @unittest.skipIf(UNDER_TSAN, BRUCK_SKIP)
    def test_hierarchical_among_five_hosts(self):
        # Host names given per rank make five hosts of one machine: two
        # ranks share memory on h0, one rank on each of h1..h4, and the
        # five leaders form a TCP ring that gathers over Bruck's links.
        fake = ('r=$HOROVOD_RANK; [ "$r" -lt 2 ] && h=h0 || h=h$((r - 1)); '
                'HOROVOD_HOSTNAME=$h exec "$0"')
        transports, _, _, _ = self.collcheck(6, "sh", "-c", fake)
        self.assertEqual(transports[0], "hierarchical (5 hosts; shared "
                         "memory among 2 ranks on this host; leader on the "
                         "TCP ring of hosts)")
        self.assertEqual(transports[5], "hierarchical (5 hosts; the only "
                         "rank on this host; leader on the TCP ring of "
                         "hosts)")

    @unittest.skipIf(UNDER_TSAN, "the fold adds no thread; TSan sees the "
                     "eager path on shared memory")
    def test_hierarchical_eager_fold_goes_host_by_host(self):
        # Two hosts of three ranks: the hierarchical transport sums each
        # host's ranks, then the two hosts' sums, which rounds otherwise
        # than rank order does. collcheck's eager checks compare a small
        # tensor's bits from the transport (a new name) with its bits
        # folded by every rank from the negotiation (the cached name).
        fake = 'HOROVOD_HOSTNAME=h$((HOROVOD_RANK / 3)) exec "$0"'
        transports, _, _, eager = self.collcheck(6, "sh", "-c", fake)
        self.assertTrue(transports[0].startswith("hierarchical (2 hosts; "
                                                 "shared memory among 3 "),
                        transports[0])
        # Every rank folded the same tensors itself, and enough of them.
        self.assertEqual(sorted(eager), list(range(6)), eager)
        self.assertEqual(len(set(eager.values())), 1, eager)
        self.assertGreater(eager[0], 20)

    def test_nothing_is_left_behind(self):
        # libhvd's segment is an anonymous memfd, so nothing should ever
        # be named in /dev/shm; the check guards that design. Each job has
        # a /dev/shm of its own, so what other tests leave in the
        # machine's cannot fail it.
        self.tmp = tempfile.mkdtemp(prefix="hvdtest-shm-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # A normal end, a rank that fails, and a rank killed by SIGKILL
        # while the others wait for it in shared memory.
        ok, left = run_private_shm(self, [HR, "-np", "3", CHECK])
        self.assertEqual(ok.returncode, 0, ok.stdout[-2000:] + ok.stderr)
        self.assertEqual(left, [])
        fails, left = run_private_shm(
            self, [HR, "-np", "3", "sh", "-c",
                   '[ "$HOROVOD_RANK" = 1 ] && exit 3; exec "$0"', CHECK])
        self.assertEqual(fails.returncode, 3, fails.stderr)
        self.assertEqual(left, [])
        killed, left = run_private_shm(self, [HR, "-np", "3", CHECK,
                                              "--die-rank", "2"])
        self.assertEqual(killed.returncode, 137, killed.stderr)
        self.assertEqual(left, [])
        self.assertEqual(marked_processes(), [])

    def test_stopped_rank_times_the_others_out(self):
        # SIGSTOP keeps every socket and mapping open: only the silence
        # tells, after HOROVOD_PEER_TIMEOUT seconds.
        for env in ({}, {"HOROVOD_SHM_DISABLE": "1"}):
            with self.subTest(env=env):
                e = dict(os.environ, HOROVOD_PEER_TIMEOUT="2", **env)
                p, took = run([HR, "-np", "3", "--kill-grace", "2", CHECK,
                               "--stop-rank", "1"], e, timeout=120)
                self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
                for r in (0, 2):
                    m = re.search(r"rank %d: failed as expected: (.*) "
                                  r"\(HVD_(ETIMEDOUT|EPEER)\)" % r, p.stdout)
                    self.assertIsNotNone(m, p.stdout)
                    # On the TCP ring rank 0 waits for rank 2, which waits
                    # for rank 1: "rank 2 (it, or a rank before it...)";
                    # either survivor may report first, and the other gets
                    # its message.
                    named = re.search(r"rank (\d) \(host localhost\)",
                                      m.group(1))
                    self.assertIn(named.group(1), "1" if env == {} else "12")
                    self.assertIn("stopped or hung", m.group(1))
                self.assertLess(took, 20)
                # The stopped rank was killed with the job.
                self.assertEqual(marked_processes(), [])


    @unittest.skipIf(UNDER_TSAN, "four 9-rank failures: run in the first "
                     "pass")
    def test_rank_lost_in_the_steady_exchange(self):
        # 9 ranks and small allreduces: the cycles go through local rank
        # 0 (steady.c), where rank 0 waits for all and the others for rank
        # 0 alone, and so do 600-float allreduces (shm_coll.c). Whichever
        # rank dies or stops, every survivor fails naming it, not rank 0
        # it waited for. Rank 0 is lost during one-float allreduces, which
        # travel with the negotiation, rank 5 during 600-float ones.
        for victim, size in ((0, "--small"), (5, "--mid")):
            with self.subTest(victim=victim, how="killed"):
                p, took = run([HR, "-np", "9", "--kill-grace", "20", CHECK,
                               "--die-rank", str(victim), size],
                              timeout=120)
                self.assertEqual(p.returncode, 137, p.stdout + p.stderr)
                self.assertSurvivorsName(p.stdout, victim, "EPEER")
                self.assertLess(took, 15)
            with self.subTest(victim=victim, how="stopped"):
                e = dict(os.environ, HOROVOD_PEER_TIMEOUT="2")
                p, took = run([HR, "-np", "9", "--kill-grace", "2", CHECK,
                               "--stop-rank", str(victim), size], e,
                              timeout=120)
                self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
                self.assertSurvivorsName(p.stdout, victim,
                                         "(ETIMEDOUT|EPEER)")
                self.assertLess(took, 20)
            self.assertEqual(marked_processes(), [])

    def assertSurvivorsName(self, out, victim, codes):
        for r in set(range(9)) - {victim}:
            m = re.search(r"rank %d: failed as expected: allreduce 'small': "
                          r"(.*) \(HVD_%s\)" % (r, codes), out)
            self.assertIsNotNone(m, out[-3000:])
            self.assertIn("rank %d (host localhost)" % victim, m.group(1))


if __name__ == "__main__":
    unittest.main(verbosity=2)
