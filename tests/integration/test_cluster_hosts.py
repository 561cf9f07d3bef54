"""Integration tests: the host list from a batch system's variables (PBS,
LSF, the MPI Operator) when neither -H nor --hostfile is given."""

import os

import hvdtest
from hvdtest import py

# A rank that records where it runs and the job's size in DIR/rank.<rank>.
RANK = r"""
import os, sys
e = os.environ
with open(os.path.join(sys.argv[1], "rank." + e["HOROVOD_RANK"]), "w") as f:
    f.write("%s %s %s" % (e["HOROVOD_HOSTNAME"], e["HOROVOD_SIZE"],
                          e["HOROVOD_LOCAL_SIZE"]))
"""

# Every source, so that the machine's own cannot leak in; each test sets one.
SOURCES = ("PBS_NODEFILE", "LSB_MCPU_HOSTS", "LSB_HOSTS",
           "OMPI_MCA_orte_default_hostfile")


class ClusterHostsTest(hvdtest.TestCase):

    def file(self, text, name="hosts"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_job(self, **vars):
        extra = dict.fromkeys(SOURCES)
        extra.update(vars)
        return self.run_hr("--verbose", *py(RANK), self.tmp, **extra)

    def ranks(self):
        """Each rank's (host, size, local size), in rank order."""
        names = sorted((n for n in os.listdir(self.tmp)
                        if n.startswith("rank.")),
                       key=lambda n: int(n.split(".")[1]))
        out = []
        for n in names:
            with open(os.path.join(self.tmp, n)) as f:
                out.append(tuple(f.read().split()))
        return out

    def check_job(self, res, source, hosts, slots):
        self.assertRc(res, 0)
        self.assertIn("hosts from %s: %d hosts, %d slots"
                      % (source, hosts, slots), res.err)
        # localhost first: ranks fill the hosts in their order.
        self.assertEqual(self.ranks(),
                         [("localhost", "3", "2")] * 2
                         + [("127.0.0.1", "3", "1")])

    def test_pbs_nodefile(self):
        path = self.file("localhost\n127.0.0.1\nlocalhost\n")
        res = self.run_job(PBS_NODEFILE=path)
        self.check_job(res, "PBS_NODEFILE (%s)" % path, 2, 3)

    def test_lsb_mcpu_hosts(self):
        res = self.run_job(LSB_MCPU_HOSTS="localhost 2 127.0.0.1 1")
        self.check_job(res, "LSB_MCPU_HOSTS", 2, 3)

    def test_lsb_hosts(self):
        res = self.run_job(LSB_HOSTS="localhost 127.0.0.1 localhost")
        self.check_job(res, "LSB_HOSTS", 2, 3)

    def test_mpi_operator_hostfile(self):
        for text in ("localhost slots=2 max_slots=2\n127.0.0.1 slots=1\n",
                     "localhost:2\n127.0.0.1:1\n"):
            for n in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, n))
            path = self.file(text)
            res = self.run_job(OMPI_MCA_orte_default_hostfile=path)
            self.check_job(res, "OMPI_MCA_orte_default_hostfile (%s)" % path,
                           2, 3)
            self.assertEqual("max_slots" in res.err, "max_slots" in text)

    def test_pbs_wins_over_lsf(self):
        path = self.file("localhost\n127.0.0.1\nlocalhost\n")
        res = self.run_job(PBS_NODEFILE=path, LSB_HOSTS="localhost")
        self.check_job(res, "PBS_NODEFILE (%s)" % path, 2, 3)

    def test_hostfile_wins_over_the_environment(self):
        path = self.file("127.0.0.1 slots=1\n")
        extra = dict.fromkeys(SOURCES)
        extra["LSB_HOSTS"] = "localhost localhost"
        res = self.run_hr("--hostfile", path, *py(RANK), self.tmp, **extra)
        self.assertRc(res, 2)
        self.assertIn("-np is required", res.err)

    def test_malformed_sources(self):
        missing = os.path.join(self.tmp, "missing")
        bad = self.file("localhost\nlocalhost x\n", "bad")
        cases = [
            ({"LSB_MCPU_HOSTS": "a 4 b"},
             "LSB_MCPU_HOSTS: 'a 4 b': a host without a slot count"),
            ({"LSB_HOSTS": "a,b"},
             "LSB_HOSTS: 'a,b': 'a,b' is not a host name"),
            ({"PBS_NODEFILE": missing},
             "PBS_NODEFILE: cannot read hostfile '%s': No such file or "
             "directory" % missing),
            ({"OMPI_MCA_orte_default_hostfile": bad},
             "OMPI_MCA_orte_default_hostfile: %s:2: expected 'host', "
             "'host:N' or 'host slots=N', got 'localhost x'" % bad),
        ]
        for vars, msg in cases:
            res = self.run_job(**vars)
            self.assertRc(res, 2)
            self.assertIn(msg, res.err)
            self.assertEqual(len(res.err.strip().splitlines()), 1, res.err)
        self.assertEqual(self.ranks(), [])


if __name__ == "__main__":
    hvdtest.main()
