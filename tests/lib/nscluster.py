"""A cluster of hosts in network namespaces, for tests.

NsCluster(n) makes hosts w0 ... w(n-1) and a launcher host. Every host has
its own network namespace with one IPv4 address on a bridge, its own host
name (UTS namespace), its own mount namespace (private propagation, so a
host can be given its own /root/.ssh or /etc/mpi by a bind mount) and a
real sshd on port 22 (root, by key only). The bridge sits in a "switch"
namespace of the instance: no default route and no link to this machine's
network, so traffic stays between the hosts. Names resolve through one
hosts file bind-mounted over /etc/hosts on every host. Needs root,
iproute2, util-linux and openssh-server (FixtureError says which is
missing). Standard library only.

    with NsCluster(2) as c:
        c.run(c.launcher, c.ssh_argv("w1", "hostname"), check=True)
"""

import atexit
import itertools
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

SSHD = "/usr/sbin/sshd"
TOOLS = {"ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux",
         "mount": "mount", "ssh": "openssh-client",
         "ssh-keygen": "openssh-client"}
LISTENING = b"Server listening on 0.0.0.0 port 22"

# The holder of a host's UTS and mount namespaces: sets the host name, does
# the bind mounts (triples of source, target, rw|ro), says "ready", sleeps.
HOLDER = r"""
echo "$1" > /proc/sys/kernel/hostname || exit 1
shift
while [ $# -ge 3 ]; do
    mount --bind "$1" "$2" || exit 1
    if [ "$3" = ro ]; then mount -o remount,bind,ro "$2" || exit 1; fi
    shift 3
done
echo ready
exec sleep infinity
"""

_counter = itertools.count()
_live = set()


class FixtureError(RuntimeError):
    """The cluster could not be set up (not a failure of the code under
    test); the message says what is missing or what failed."""


def _ip(args, text="", ok=False):
    p = subprocess.run(["ip"] + args, input=text, capture_output=True,
                       text=True)
    if p.returncode and not ok:
        raise FixtureError("ip %s failed: %s" % (" ".join(args),
                                                 p.stderr.strip()))


# ssh-keygen options of each user key type: RSA in PEM, as old Kubeflow
# images made; ECDSA P-521 in PEM ("EC PRIVATE KEY"), as the MPI Operator
# v2 makes its keys.
KEYGEN = {"ed25519": [], "rsa": ["-b", "2048", "-m", "PEM"],
          "ecdsa": ["-b", "521", "-m", "PEM"]}


def _keygen(path, kind="ed25519", comment="nscluster"):
    extra = KEYGEN[kind]
    p = subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C",
                        comment, "-f", path] + extra, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    if p.returncode:
        raise FixtureError("ssh-keygen failed: %s" % p.stderr.strip())
    with open(path + ".pub") as f:
        return f.read().strip()


def _ns_inode(path):
    """The namespace inode behind a /proc/PID/ns/* link or /run/netns
    file, or None."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def netns_pids(inodes):
    """Pids of the live processes whose network namespace is one of inodes
    (namespace inode numbers, as in /proc/PID/ns/net)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                link = os.readlink("/proc/%s/ns/net" % d)
            except OSError:
                continue
            if int(link[link.index("[") + 1:-1]) in inodes:
                found.append(int(d))
    return found


def _write_in_place(path, text):
    # Bind mounts hold the inode: overwrite it, never replace it.
    with open(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "w") as f:
        f.write(text)
        f.truncate()


class Host:
    """One host. name: its host name; names: every name it is known by
    (known_hosts); addr: its IPv4 address; ns: its netns; veth: the
    switch-side end of its link; pid: the holder process, whose net, UTS
    and mount namespaces run() enters; sshd: its sshd (Popen) or None;
    log: the holder's and sshd's log file."""

    def __init__(self, name, index, addr, ns, veth):
        self.name, self.index, self.addr = name, index, addr
        self.ns, self.veth, self.names = ns, veth, [name]
        self.pid = self.ino = self.holder = self.sshd = None
        self.log = self.key_pub = self.config = None
        self.log_mark = 0

    def __repr__(self):
        return "Host(%s, %s, %s)" % (self.name, self.addr, self.ns)


class NsCluster:
    """n hosts named by names (default w0 ... w(n-1)) and, with launcher
    True, a host "launcher" without sshd (else the launcher is host 0).
    binds: {name: [(source, target[, "ro"])]} mounts made at creation;
    hidden: names left out of the hosts file at first; key_type: the user
    key, "ed25519", "rsa" (2048 bits, PEM) or "ecdsa" (P-521, PEM, as
    Kubeflow's MPI Operator v2 makes). Attributes: hosts, launcher, dir,
    key, key_pub, hosts_file, known_hosts, prefix (of every netns name of
    the instance)."""

    def __init__(self, n, names=None, launcher=True, binds=None,
                 hidden=(), key_type="ed25519", timeout=20.0):
        for tool, pkg in sorted(TOOLS.items()):
            if not shutil.which(tool):
                raise FixtureError("NsCluster needs %s (Debian package %s, "
                                   "see scripts/install-deps.sh)" %
                                   (tool, pkg))
        if not os.access(SSHD, os.X_OK):
            raise FixtureError("NsCluster needs %s (Debian package "
                               "openssh-server)" % SSHD)
        if os.geteuid() != 0:
            raise FixtureError("NsCluster needs root (network namespaces, "
                               "bind mounts)")
        names = list(names or ["w%d" % i for i in range(n)])
        if len(names) != n or len(set(names)) != n:
            raise ValueError("need %d distinct names" % n)
        self.timeout, self.key_type = timeout, key_type
        self.hosts, self.launcher, self._all = [], None, []
        self._resolve, self._made, self._procs = {}, [], []
        self._ssh_dirs, self._closed, self._next = [], False, 0
        pid, count = os.getpid(), next(_counter)
        self.prefix = "nsc%d-%d-" % (pid, count)
        self._tag = "%x-%d" % (pid, count)
        self._net = random.randrange(256)
        self._own_net = _ns_inode("/proc/self/ns/net")
        self.dir = tempfile.mkdtemp(prefix="hvdnsc-")
        _live.add(self)
        _install_handlers()
        try:
            self._setup(names, launcher, binds or {}, set(hidden))
        except BaseException:
            self.close()
            raise

    def _setup(self, names, launcher, binds, hidden):
        os.chmod(self.dir, 0o755)
        self.key = os.path.join(self.dir, "id_" + self.key_type)
        self.key_pub = _keygen(self.key, self.key_type)
        self.authorized_keys = os.path.join(self.dir, "authorized_keys")
        _write_in_place(self.authorized_keys, self.key_pub + "\n")
        self.hosts_file = os.path.join(self.dir, "hosts")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self._switch = self.prefix + "sw"
        self._bridge = "b" + self._tag
        self._add_ns([self._switch])
        _ip(["-n", self._switch, "-b", "-"],
            "link set lo up\nlink add %s type bridge\nlink set %s up\n" %
            (self._bridge, self._bridge))
        specs = [(nm, binds.get(nm, ()), nm not in hidden, True)
                 for nm in names]
        if launcher:
            specs.append(("launcher", binds.get("launcher", ()),
                          "launcher" not in hidden, False))
        made = self._add(specs)
        self.hosts = made[:len(names)]
        self.launcher = made[-1] if launcher else made[0]

    # ------------------------------------------------------------ hosts

    def _add_ns(self, names):
        for nm in names:
            if os.path.exists("/run/netns/" + nm):
                raise FixtureError("netns %s exists already" % nm)
        try:
            _ip(["-b", "-"], "".join("netns add %s\n" % nm for nm in names))
        finally:
            self._made += [nm for nm in names
                           if os.path.exists("/run/netns/" + nm)]

    def _add(self, specs):
        """Makes hosts of (name, binds, resolvable, sshd) specs, together;
        on a failure removes those made."""
        for name, _, _, _ in specs:
            if self.host(name, None):
                raise ValueError("host %s exists" % name)
        hosts = []
        try:
            return self._make(specs, hosts)
        except BaseException:
            for h in hosts:
                self.remove_host(h)
            raise

    def _make(self, specs, hosts):
        for name, _, resolvable, _ in specs:
            k = self._next
            self._next += 1
            addr = "10.77.%d.%d" % ((self._net + k // 250) % 256,
                                    1 + k % 250)
            h = Host(name, k, addr, "%sh%d" % (self.prefix, k),
                     "v%s-%d" % (self._tag, k))
            h.log = os.path.join(self.dir, "host%d.log" % k)
            self._all.append(h)
            hosts.append(h)
            if resolvable:
                self._resolve[name] = h
        self._add_ns([h.ns for h in hosts])
        for h in hosts:
            h.ino = _ns_inode("/run/netns/" + h.ns)
            h.key_pub = _keygen(os.path.join(self.dir, "hostkey%d" %
                                             h.index), comment=h.name)
            _ip(["-n", h.ns, "-b", "-"],
                "link set lo up\nlink add eth0 type veth peer name %s "
                "netns %s\naddr add %s/16 dev eth0\nlink set eth0 up\n" %
                (h.veth, self._switch, h.addr))
        _ip(["-n", self._switch, "-b", "-"], "".join(
            "link set %s master %s\nlink set %s up\n" %
            (h.veth, self._bridge, h.veth) for h in hosts))
        self._write_names()
        for h, (_, binds, _, _) in zip(hosts, specs):
            args = [h.name, self.hosts_file, "/etc/hosts", "rw"]
            for b in binds:
                self._target(b[0], b[1])
                args += [b[0], b[1], b[2] if len(b) > 2 else "rw"]
            with open(h.log, "ab") as log:
                h.holder = subprocess.Popen(
                    ["ip", "netns", "exec", h.ns, "unshare", "--uts",
                     "--mount", "--propagation", "private", "--", "sh",
                     "-c", HOLDER, "holder"] + args,
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=log, start_new_session=True)
            self._procs.append(h.holder)
            h.pid = h.holder.pid
        try:
            for h in hosts:
                if h.holder.stdout.readline() != b"ready\n":
                    raise FixtureError("host %s did not start: %s" %
                                       (h.name, self.log_text(h)))
        finally:
            for h in hosts:
                h.holder.stdout.close()
        sshds = [h for h, spec in zip(hosts, specs) if spec[3]]
        for h in sshds:
            self.start_sshd(h, wait=False)
        for h in sshds:
            self._wait_sshd(h)
        return hosts

    def add_host(self, name=None, binds=(), resolvable=True, sshd=True):
        """Adds a host (name default w<N>) with its bind mounts (source,
        target[, "ro"]), sshd started and ready; returns it."""
        name = name or "w%d" % self._next
        h = self._add([(name, binds, resolvable, sshd)])[0]
        self.hosts.append(h)
        return h

    def remove_host(self, host, keep_names=False):
        """Deletes host: kills every process in its namespaces, removes its
        link and netns; its names leave the hosts file unless keep_names."""
        h = self.host(host)
        self._kill({h.ino})
        _ip(["-n", self._switch, "link", "del", h.veth], ok=True)
        _ip(["netns", "del", h.ns], ok=True)
        if h.ns in self._made:
            self._made.remove(h.ns)
        self._all.remove(h)
        if h in self.hosts:
            self.hosts.remove(h)
        if not keep_names:
            for nm in [n for n, x in self._resolve.items() if x is h]:
                del self._resolve[nm]
        self._write_names()

    def host(self, host, default=KeyError):
        """The Host of a name (any of its names) or a Host itself."""
        if isinstance(host, Host):
            return host
        for h in self._all:
            if host in h.names:
                return h
        if default is KeyError:
            raise KeyError("no host %r" % host)
        return default

    # ------------------------------------------------------------ sshd

    def start_sshd(self, host, wait=True):
        """Starts host's sshd (port 22, root by key only); with wait, only
        returns once it listens."""
        h = self.host(host)
        if h.sshd is not None and h.sshd.poll() is None:
            return
        h.config = os.path.join(self.dir, "sshd%d.conf" % h.index)
        key = os.path.join(self.dir, "hostkey%d" % h.index)
        _write_in_place(h.config, "\n".join([
            "ListenAddress 0.0.0.0:22", "AddressFamily inet",
            "HostKey " + key, "PidFile none", "StrictModes no",
            "UsePAM no", "PermitRootLogin prohibit-password",
            "AuthorizedKeysFile " + self.authorized_keys,
            "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UseDNS no", "PrintMotd no", "PrintLastLog no",
            "MaxStartups 200:30:400", "MaxSessions 100", ""]))
        with open(h.log, "ab") as log:
            h.log_mark = log.tell()
            h.sshd = self.popen(h, [SSHD, "-D", "-e", "-f", h.config],
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, start_new_session=True)
        if wait:
            self._wait_sshd(h)

    def _wait_sshd(self, h):
        deadline = time.monotonic() + self.timeout
        while True:
            with open(h.log, "rb") as f:
                f.seek(h.log_mark)
                if LISTENING in f.read():
                    return
            if h.sshd.poll() is not None or time.monotonic() > deadline:
                raise FixtureError("sshd of %s did not start: %s" %
                                   (h.name, self.log_text(h)))
            time.sleep(0.005)

    def stop_sshd(self, host):
        """Stops host's listening sshd (open sessions stay)."""
        h = self.host(host)
        if h.sshd is not None:
            h.sshd.kill()
            h.sshd.wait()
            h.sshd = None

    def log_text(self, host, tail=2000):
        """The end of host's log (holder errors and sshd's -e output)."""
        try:
            with open(self.host(host).log, errors="replace") as f:
                return f.read()[-tail:].strip()
        except OSError:
            return "(no log)"

    # ------------------------------------------------------------ names

    def add_name(self, name, host):
        """Makes name resolve to host's address on every host."""
        h = self.host(host)
        if name not in h.names:
            h.names.append(name)
        self._resolve[name] = h
        self._write_names()

    def remove_name(self, name):
        """Takes name out of the hosts file (known_hosts keeps it)."""
        self._resolve.pop(name, None)
        self._write_names()

    def _write_names(self):
        _write_in_place(self.hosts_file, "".join(
            ["127.0.0.1 localhost\n", "::1 localhost ip6-localhost\n"] +
            ["%s %s\n" % (h.addr, nm) for nm, h in self._resolve.items()]))
        kh = "".join("%s %s\n" % (",".join(h.names + [h.addr]),
                                  " ".join(h.key_pub.split()[:2]))
                     for h in self._all if h.key_pub)
        for path in [self.known_hosts] + self._ssh_dirs:
            _write_in_place(path, kh)

    def ssh_dir(self, path, config=None):
        """Fills directory path as a client's ~/.ssh: the user key
        (id_ed25519, id_rsa or id_ecdsa, and .pub), known_hosts (every host
        under its names and address, kept current) and config text if given.
        Returns path; bind it (read-only) over /root/.ssh on a host."""
        os.makedirs(path, mode=0o700, exist_ok=True)
        base = os.path.join(path, os.path.basename(self.key))
        shutil.copy(self.key, base)
        shutil.copy(self.key + ".pub", base + ".pub")
        os.chmod(base, 0o600)
        if config is not None:
            _write_in_place(os.path.join(path, "config"), config)
        self._ssh_dirs.append(os.path.join(path, "known_hosts"))
        self._write_names()
        return path

    def ssh_argv(self, target, command, user="root", extra=()):
        """argv of OpenSSH's client running command (str or list) on
        target, with the cluster's key and known_hosts, no config."""
        return (["ssh", "-F", "/dev/null"] + list(extra) + [
            "-i", self.key, "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=" + self.known_hosts,
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
            "%s@%s" % (user, target)] +
            ([command] if isinstance(command, str) else list(command)))

    # ------------------------------------------------------------ running

    def _enter(self, host, kw):
        wd = kw.pop("cwd", None) or os.getcwd()
        return ["nsenter", "-t", str(self.host(host).pid), "--net",
                "--uts", "--mount", "--wd=%s" % wd, "--"]

    def run(self, host, argv, **popen_kw):
        """subprocess.run of argv inside host's net, UTS and mount
        namespaces (the filesystem is this machine's but for its mounts)."""
        return subprocess.run(self._enter(host, popen_kw) + list(argv),
                              **popen_kw)

    def popen(self, host, argv, **popen_kw):
        """subprocess.Popen of argv on host, as run(); killed at close."""
        p = subprocess.Popen(self._enter(host, popen_kw) + list(argv),
                             **popen_kw)
        self._procs.append(p)
        return p

    def _target(self, source, target):
        # A missing mount point is made (empty) on the real filesystem.
        if not os.path.exists(target):
            if os.path.isdir(source):
                os.makedirs(target, mode=0o700, exist_ok=True)
            else:
                open(target, "a").close()

    def bind(self, host, source, target, ro=False):
        """Bind-mounts source over target in host's mount namespace only."""
        self._target(source, target)
        self.run(host, ["mount", "--bind", source, target], check=True)
        if ro:
            self.run(host, ["mount", "-o", "remount,bind,ro", target],
                     check=True)

    # ------------------------------------------------------------ teardown

    def namespaces(self):
        """{netns name: inode} of every namespace the instance made."""
        return {nm: _ns_inode("/run/netns/" + nm) for nm in self._made}

    def _kill(self, inodes):
        inodes = set(inodes) - {None, self._own_net}
        for _ in range(200):
            pids = [p for p in netns_pids(inodes) if p != os.getpid()]
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            self._procs = [p for p in self._procs if p.poll() is None]
            if not pids:
                return
            time.sleep(0.01)

    def close(self):
        """Kills every process in the instance's namespaces, deletes the
        namespaces (with their links and bridge) and the temp dir."""
        if self._closed:
            return
        self._closed = True
        _live.discard(self)
        self._kill(set(self.namespaces().values()))
        for p in self._procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self._made:
            _ip(["-force", "-b", "-"], "".join(
                "netns del %s\n" % nm for nm in self._made), ok=True)
            self._made = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _close_all():
    for c in list(_live):
        c.close()


def _on_signal(sig, frame):
    _close_all()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def _install_handlers():
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _on_signal)


atexit.register(_close_all)
