"""The namespace cluster fixture (tests/lib/nscluster.py) on its own.

Three hosts and a launcher, each in its own network, UTS and mount
namespace with a real sshd: names, ssh between hosts, no way out, late
names, sshd stopped and started, hosts added and removed, private mounts,
an RSA user key, and nothing left after close() (also when the creation
fails half way). Needs root, iproute2, util-linux and openssh-server;
without them it fails with the fixture's message.
"""

import errno
import os
import subprocess
import tempfile
import time
import unittest

import nscluster

C = None
OUT = dict(capture_output=True, text=True, stdin=subprocess.DEVNULL,
           timeout=30)


def setUpModule():
    global C
    C = nscluster.NsCluster(3)


def tearDownModule():
    ns = C.namespaces()
    C.close()
    left = leftovers(C.prefix, ns.values())
    if left:
        raise AssertionError("left after close(): %s" % left)


def netns_list():
    return [l.split()[0] for l in subprocess.run(
        ["ip", "netns", "list"], **OUT).stdout.splitlines() if l.strip()]


def leftovers(prefix, inodes):
    """Namespaces named prefix... and processes in the inodes' netns."""
    return ([n for n in netns_list() if n.startswith(prefix)] +
            nscluster.netns_pids(set(i for i in inodes if i)))


def real_address():
    """This machine's own non-loopback IPv4 address (or a documentation
    address if it has none)."""
    for line in subprocess.run(["ip", "-4", "-o", "addr"],
                               **OUT).stdout.splitlines():
        addr = line.split()[3].split("/")[0]
        if not addr.startswith("127."):
            return addr
    return "192.0.2.1"


class ClusterTest(unittest.TestCase):
    """One cluster of three hosts and a launcher for every case."""

    def out(self, host, argv, rc=0):
        p = C.run(host, argv, **OUT)
        self.assertEqual(p.returncode, rc, "%s on %s: %s" %
                         (argv, host, p.stderr))
        return p.stdout.strip()

    def test_host_names(self):
        for h in C.hosts + [C.launcher]:
            self.assertEqual(self.out(h, ["hostname"]), h.name)
        self.assertEqual([h.name for h in C.hosts], ["w0", "w1", "w2"])
        addrs = {h.addr for h in C.hosts + [C.launcher]}
        self.assertEqual(len(addrs), 4)

    def test_ssh_by_name(self):
        self.assertEqual(self.out("w0", C.ssh_argv("w1", "hostname")), "w1")
        self.assertEqual(self.out(C.launcher, C.ssh_argv("w2", "hostname")),
                         "w2")

    def test_no_way_out(self):
        routes = self.out(C.launcher, ["ip", "route"])
        self.assertNotIn("default", routes)
        links = self.out(C.launcher, ["ip", "-o", "link"])
        self.assertEqual(sorted(l.split(":")[1].strip().split("@")[0]
                                for l in links.splitlines()),
                         ["eth0", "lo"])
        addr = real_address()
        probe = ("import socket,sys\ntry:\n socket.create_connection("
                 "(sys.argv[1], 22), timeout=3)\nexcept OSError as e:\n"
                 " print(e.errno)\n sys.exit(1)\n")
        err = self.out(C.launcher, ["python3", "-c", probe, addr], rc=1)
        self.assertEqual(int(err), errno.ENETUNREACH, addr)

    def test_late_name(self):
        name = "job-worker-0.job.default.svc"
        h = C.add_host(name, resolvable=False)
        try:
            self.out("w0", ["getent", "hosts", name], rc=2)
            C.add_name(name, h)
            self.assertEqual(self.out("w0", ["getent", "hosts", name])
                             .split(), [h.addr, name])
            self.assertEqual(self.out("w0", C.ssh_argv(name, "hostname")),
                             name)
            C.remove_name(name)
            self.out("w1", ["getent", "hosts", name], rc=2)
        finally:
            C.remove_host(h)

    def test_stop_start_sshd(self):
        C.stop_sshd("w2")
        p = C.run("w0", C.ssh_argv("w2", "true"), **OUT)
        self.assertEqual(p.returncode, 255)
        self.assertIn("refused", p.stderr)
        C.start_sshd("w2")
        self.assertEqual(self.out("w0", C.ssh_argv("w2", "hostname")), "w2")

    def test_remove_host(self):
        h = C.add_host("gone")
        sleeper = C.popen(h, ["sleep", "1000"])
        self.assertEqual(self.out("w0", C.ssh_argv("gone", "hostname")),
                         "gone")
        ino, ns = h.ino, h.ns
        self.assertTrue(nscluster.netns_pids({ino}))
        C.remove_host(h)
        self.assertEqual(nscluster.netns_pids({ino}), [])
        self.assertIsNotNone(sleeper.poll())
        self.assertNotIn(ns, netns_list())
        self.assertNotIn(h, C.hosts)
        self.out("w0", ["getent", "hosts", "gone"], rc=2)

    def test_private_ssh_dir(self):
        d = C.ssh_dir(os.path.join(C.dir, "launcher-ssh"),
                      config="Host *\n  LogLevel ERROR\n")
        marker = "marker-" + C.prefix
        open(os.path.join(d, marker), "w").close()
        C.bind(C.launcher, d, "/root/.ssh", ro=True)
        files = self.out(C.launcher, ["ls", "/root/.ssh"]).split()
        self.assertEqual(files, ["config", "id_ed25519", "id_ed25519.pub",
                                 "known_hosts", marker])
        self.out(C.launcher, ["touch", "/root/.ssh/x"], rc=1)
        self.assertNotIn(marker, self.out("w0", ["ls", "/root/.ssh"]))
        self.assertFalse(os.path.exists("/root/.ssh/" + marker))
        # Plain ssh on the launcher uses that ~/.ssh (key, known_hosts).
        self.assertEqual(self.out(C.launcher, [
            "ssh", "-o", "BatchMode=yes", "root@w1", "hostname"]), "w1")

    def test_add_eight_hosts(self):
        t = time.monotonic()
        added = [C.add_host() for _ in range(8)]
        dt = time.monotonic() - t
        print("\n8 hosts added in %.3f s (%.1f ms per host)" %
              (dt, dt * 125))
        try:
            last = added[-1].name
            self.assertEqual(self.out("w0", C.ssh_argv(last, "hostname")),
                             last)
        finally:
            for h in added:
                C.remove_host(h)


class LifeTest(unittest.TestCase):
    """Clusters of their own: an RSA key, close(), a failed creation."""

    def test_rsa_key_and_close(self):
        c = nscluster.NsCluster(1, launcher=False, key_type="rsa")
        with c:
            with open(c.key) as f:
                self.assertIn("BEGIN RSA PRIVATE KEY", f.read())
            self.assertIs(c.launcher, c.hosts[0])
            p = c.run("w0", c.ssh_argv("w0", "hostname"), **OUT)
            self.assertEqual(p.stdout.strip(), "w0", p.stderr)
            c.popen("w0", ["sleep", "1000"])
            ns = c.namespaces()
            self.assertEqual(len(ns), 2)
            tmp = c.dir
        self.assertEqual(leftovers(c.prefix, ns.values()), [])
        self.assertFalse(os.path.exists(tmp))

    def test_failed_creation_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as target:
            with self.assertRaisesRegex(nscluster.FixtureError,
                                        "did not start"):
                nscluster.NsCluster(2, binds={"w1": [(
                    "/nonexistent/nscluster-src", target)]})
        # Only this process's namespaces: other runs may be side by side.
        tag = "nsc%d-" % os.getpid()
        self.assertEqual([n for n in netns_list() if n.startswith(tag)
                          and not n.startswith(C.prefix)], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
