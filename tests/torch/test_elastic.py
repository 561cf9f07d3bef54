"""horovodrun's elastic mode with horovod.torch, in the scenarios of
Horovod's own elastic integration tests (test/integration/
elastic_common.py): tests/torch/elastic_train.py trains with
hvd.elastic.run and rank 0 writes one JSON line per epoch; a discovery
script whose output changes with the number of lines written adds and
removes hosts; localhost and 127.0.0.1 serve as two hosts.

Each scenario checks the lines (the rank each process started with, the
size, the number of rendezvous), horovodrun's exit status and summary,
and that no process of the job is left.
"""

import json
import os
import unittest

from torchenv import LIB, PY, PYPATH, hvdtest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "elastic_train.py")


def discovery_script(path, logfile, schedule):
    """A script printing schedule's hosts for the epoch that the number
    of lines in logfile names: [(epoch, hosts), ..., (None, hosts)]."""
    lines = ["#!/bin/sh", "epoch=0",
             "[ -f %s ] && epoch=$(wc -l < %s | tr -d ' ')" % (logfile,
                                                                 logfile)]
    lines.append("case $epoch in")
    for epoch, hosts in schedule:
        lines.append("  %s) %s ;;" % ("*" if epoch is None else epoch,
                                      "; ".join("echo %s" % h
                                                for h in hosts)))
    lines.append("esac")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o755)


class ElasticTest(hvdtest.TestCase):

    def run_elastic(self, schedule=None, hosts=None, np=2, min_np=2,
                    max_np=4, exit_schedule=None, exit_mode="exception",
                    reset_limit=None, cooldown=None, epochs=3,
                    epoch_wait=0.0, extra=()):
        # A run of its own: the discovery script counts its lines.
        self.runs = getattr(self, "runs", 0) + 1
        log = os.path.join(self.tmp, "log%d" % self.runs)
        args = ["-np", np, "--min-np", min_np]
        if hosts:
            args += ["-H", hosts]
        else:
            script = os.path.join(self.tmp, "discover%d.sh" % self.runs)
            discovery_script(script, log, schedule)
            args += ["--host-discovery-script", script, "--max-np", max_np]
        if reset_limit is not None:
            args += ["--reset-limit", reset_limit]
        if cooldown:
            args += ["--blacklist-cooldown-range", cooldown[0], cooldown[1]]
        args += list(extra)
        args += [PY, TRAIN, "--logfile", log, "--epochs", epochs,
                 "--epoch-wait", epoch_wait,
                 "--discovery-schedule", json.dumps(schedule or []),
                 "--exit-mode", exit_mode,
                 "--exit-schedule", json.dumps(exit_schedule or {})]
        r = self.run_hr(*args, timeout=120, PYTHONPATH=PYPATH,
                        HVD_LIBRARY=LIB, PYTHONDONTWRITEBYTECODE="1",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")
        self.assertEqual(hvdtest.wait_gone(self.marker), [], r.describe())
        lines = []
        if os.path.exists(log):
            with open(log) as f:
                lines = [json.loads(x) for x in f]
        return r, lines

    def check(self, line, start_rank, size, rendezvous=None, host=None):
        self.assertEqual(line["start_rank"], start_rank, line)
        self.assertEqual(line["size"], size, line)
        if rendezvous is not None:
            self.assertEqual(line["rendezvous"], rendezvous, line)
        if host is not None:
            self.assertEqual(line["hostname"], host, line)

    def test_hosts_added_and_removed(self):
        schedule = [(0, ["localhost:2"]),
                    (1, ["localhost:2", "127.0.0.1:2"]),
                    (None, ["127.0.0.1:2"])]
        r, lines = self.run_elastic(schedule)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(len(lines), 3, r.describe())
        self.check(lines[0], 0, 2, 1, "localhost")
        self.check(lines[1], 0, 4, 2, "localhost")
        # Rank 0 moved to the host that was added: it had the state.
        self.check(lines[2], 2, 2, 3, "127.0.0.1")

    def test_single_rank_failure(self):
        for mode in ("exception", "kill"):
            with self.subTest(mode=mode):
                r, lines = self.run_elastic(
                    [(None, ["localhost:2", "127.0.0.1:2"])],
                    np=4, exit_schedule={"(1, 0)": [0]}, exit_mode=mode)
                self.assertEqual(r.rc, 0, r.describe())
                self.assertEqual(len(lines), 3, r.describe())
                self.check(lines[0], 0, 4, 1)
                # localhost is blacklisted: its other rank is stopped too.
                self.check(lines[1], 2, 2, 2, "127.0.0.1")
                self.check(lines[2], 2, 2, 2, "127.0.0.1")
                self.assertTrue(any("host localhost is blacklisted" in x
                                    for x in r.warning_lines()), r.describe())

    def test_fault_tolerance_without_scaling(self):
        r, lines = self.run_elastic(hosts="localhost:2,127.0.0.1:2", np=4,
                                    exit_schedule={"(1, 0)": [0]},
                                    exit_mode="kill")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(len(lines), 3, r.describe())
        self.check(lines[0], 0, 4, 1)
        self.check(lines[1], 2, 2, 2)
        self.check(lines[2], 2, 2, 2)

    def test_all_ranks_failure(self):
        r, _ = self.run_elastic([(None, ["localhost:2", "127.0.0.1:2"])],
                                np=4, exit_schedule={"(1, 0)": [0, 1, 2, 3]})
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("elastic: every rank failed", r.err, r.describe())

    def test_all_hosts_blacklisted(self):
        r, _ = self.run_elastic([(None, ["localhost:2", "127.0.0.1:2"])],
                                np=4, exit_schedule={"(1, 0)": [0, 2]})
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("elastic: every host is blacklisted", r.err,
                      r.describe())

    def test_min_hosts_timeout(self):
        r, _ = self.run_elastic([(None, ["localhost:2", "127.0.0.1:2"])],
                                np=4, min_np=4,
                                exit_schedule={"(1, 0)": [0]},
                                extra=["--elastic-timeout", "1"])
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("elastic: fewer than 4 slots were available for 1 s "
                      "(--elastic-timeout)", r.err, r.describe())

    def test_graceful_removal_below_min_np_does_not_hang(self):
        # Horovod #3494: a host leaves (the discovery drops it) and the
        # survivors are fewer than --min-np: the job waits for hosts up to
        # --elastic-timeout, then stops; it never hangs.
        r, lines = self.run_elastic([(0, ["localhost:2", "127.0.0.1:2"]),
                                     (None, ["localhost:2"])],
                                    np=4, min_np=4, epochs=3,
                                    extra=["--elastic-timeout", "1"])
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("elastic: fewer than 4 slots were available for 1 s "
                      "(--elastic-timeout)", r.err, r.describe())
        self.assertEqual(len(lines), 1, r.describe())

    def test_reset_limit(self):
        schedule = [(0, ["localhost:2"]),
                    (1, ["localhost:2", "127.0.0.1:2"]),
                    (None, ["127.0.0.1:2"])]
        r, lines = self.run_elastic(schedule, reset_limit=1)
        self.assertEqual(r.rc, 1, r.describe())
        self.assertIn("the limit of --reset-limit 1", r.err, r.describe())
        r, lines = self.run_elastic(schedule, reset_limit=2)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(len(lines), 3, r.describe())

    def test_blacklisted_host_back_after_cooldown(self):
        # The process that started as rank 2 fails in epoch 1: 127.0.0.1
        # is out for 1 s, then the discovery lists it again and new
        # processes start there.
        r, lines = self.run_elastic(
            [(None, ["localhost:2", "127.0.0.1:2"])], np=4,
            exit_schedule={"(1, 0)": [2]}, cooldown=(1, 1), epochs=6,
            epoch_wait=1.0)
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(len(lines), 6, r.describe())
        self.check(lines[0], 0, 4, 1)
        self.check(lines[1], 0, 2, 2)
        self.assertEqual(lines[-1]["size"], 4, lines)
        self.assertGreater(lines[-1]["rendezvous"], 2, lines)

    def test_sampler_sees_the_dataset_each_epoch_across_resets(self):
        # A host added during epoch 1 and the first host removed during
        # epoch 2: each epoch's indices, over every process, are the
        # whole dataset.
        log = os.path.join(self.tmp, "log")
        script = os.path.join(self.tmp, "discover.sh")
        discovery_script(script, log, [(0, ["localhost:2"]),
                                       (1, ["localhost:2", "127.0.0.1:2"]),
                                       (None, ["127.0.0.1:2"])])
        samples = 240
        r = self.run_hr("-np", "2", "--min-np", "2", "--max-np", "4",
                        "--host-discovery-script", script, PY,
                        os.path.join(HERE, "elastic_sampler.py"), "--dir",
                        self.tmp, "--samples", samples, "--epochs", 4,
                        timeout=120, PYTHONPATH=PYPATH, HVD_LIBRARY=LIB,
                        PYTHONDONTWRITEBYTECODE="1",
                        HOROVOD_ELASTIC_DISCOVERY_INTERVAL="0.1")
        self.assertEqual(r.rc, 0, r.describe())
        self.assertEqual(hvdtest.wait_gone(self.marker), [], r.describe())
        with open(log) as f:
            sizes = [int(line.split()[1]) for line in f]
        self.assertEqual(len(sizes), 4, r.describe())
        self.assertEqual(sizes[0], 2, sizes)
        self.assertIn(4, sizes, sizes)
        seen = {}
        for name in os.listdir(self.tmp):
            if name.startswith("seen."):
                with open(os.path.join(self.tmp, name)) as f:
                    for line in f:
                        epoch, i = map(int, line.split())
                        seen.setdefault(epoch, set()).add(i)
        for epoch in range(4):
            self.assertEqual(seen.get(epoch), set(range(samples)),
                             "epoch %d" % epoch)


if __name__ == "__main__":
    unittest.main()
