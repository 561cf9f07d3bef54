"""A cluster of real OpenSSH servers on loopback addresses, for tests.

SshCluster(n) starts n sshd instances (Debian's openssh-server) listening on
127.0.0.2, 127.0.0.3, ... at one common port, with throwaway ed25519 host
keys, a throwaway user key pair and a fake HOME whose .ssh/known_hosts lists
every host as "[127.0.0.K]:PORT". horovodrun treats every address but
127.0.0.1 as remote, so these look like separate machines to it. Nothing
leaves loopback. Standard library only.

    with SshCluster(2) as c:
        subprocess.run([HOROVODRUN, "-np", "4", "-p", str(c.port),
                        "-H", c.hosts_arg(2), "true"], env=c.env())
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
SSH = shutil.which("ssh") or "/usr/bin/ssh"
PRIVSEP_DIR = "/run/sshd"

# Addresses 127.0.0.2 ... are the cluster's hosts; a few addresses above the
# hosts are handed out as "spare" ones (no sshd; closed or silent ports).
FIRST_HOST = 2


class FixtureError(RuntimeError):
    """The fixture could not be set up (not a failure of the code under
    test); the message says what is missing."""


def _run(args, **kw):
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, **kw)
    if p.returncode != 0:
        raise FixtureError("%s failed (%d): %s" % (" ".join(args),
                                                    p.returncode,
                                                    p.stderr.strip()))
    return p.stdout


def keygen(path, comment="hvdtest"):
    """Writes a new ed25519 key pair, no passphrase, at path and path.pub;
    returns the public key line."""
    for p in (path, path + ".pub"):
        if os.path.exists(p):
            os.unlink(p)
    _run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment,
          "-f", path])
    os.chmod(path, 0o600)
    with open(path + ".pub") as f:
        return f.read().strip()


def fingerprint(pub_path):
    """'SHA256:...' of a public key file, as ssh-keygen -l prints it."""
    out = _run([SSH_KEYGEN, "-l", "-E", "sha256", "-f", pub_path])
    return out.split()[1]


def _ppid_map():
    """{pid: ppid} of all live processes."""
    m = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(b")") + 2:].split()
        if rest[0] in (b"Z", b"X"):
            continue
        m[int(name)] = int(rest[1])
    return m


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8",
                                                        "replace").strip()
    except OSError:
        return None


def descendants(pid):
    """Live descendants of pid (not pid itself), parents before children."""
    ppid = _ppid_map()
    kids = {}
    for c, p in ppid.items():
        kids.setdefault(p, []).append(c)
    out = []
    queue = list(kids.get(pid, []))
    while queue:
        c = queue.pop(0)
        out.append(c)
        queue.extend(kids.get(c, []))
    return out


def port_is_free(addr, port):
    """True when port can be bound on addr right now (no listener, no
    connection in the way)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def connect_refused(addr, port, timeout=2.0):
    """True when a TCP connect to addr:port is refused (nothing listens)."""
    try:
        s = socket.create_connection((addr, port), timeout=timeout)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    s.close()
    return False


def _read_banner(addr, port, timeout=1.0):
    try:
        with socket.create_connection((addr, port), timeout=timeout) as s:
            s.settimeout(timeout)
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
            return data
    except OSError:
        return b""


class SilentListener:
    """A TCP socket listening on addr:port that never accepts and never
    speaks: the kernel completes the handshake, then nothing. A stand-in
    for a host that never answers."""

    def __init__(self, addr, port):
        self.addr = addr
        self.port = port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((addr, port))
        self.sock.listen(64)

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SshCluster:
    """n_hosts real sshd servers on 127.0.0.2 ... 127.0.0.(n_hosts+1).

    Attributes: hosts (addresses), port (common to all hosts), dir (the
    temporary directory), home (the fake HOME), key (user private key),
    known_hosts (path in the fake home), host_pubs {host: public key line},
    host_fingerprints {host: 'SHA256:...'}, logs {host: sshd log path}.
    """

    def __init__(self, n_hosts, user=None, first=FIRST_HOST,
                 start_timeout=20.0):
        if n_hosts < 1 or first + n_hosts > 250:
            raise ValueError("bad host count")
        self.n_hosts = n_hosts
        self.user = user or pwd.getpwuid(os.getuid()).pw_name
        self.hosts = ["127.0.0.%d" % (first + i) for i in range(n_hosts)]
        self.start_timeout = start_timeout
        self.port = None
        self.dir = None
        self.procs = {}
        self.logs = {}
        self.host_pubs = {}
        self.host_fingerprints = {}
        self._spare_next = first + n_hosts
        self._listeners = []

    # ------------------------------------------------------------ setup

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        if not os.access(SSHD, os.X_OK):
            raise FixtureError(
                "%s not found: the SSH tests need Debian's openssh-server "
                "(apt-get install openssh-server openssh-client, as "
                "scripts/install-deps.sh does)" % SSHD)
        if not os.access(SSH_KEYGEN, os.X_OK):
            raise FixtureError("ssh-keygen not found: install "
                               "openssh-client")
        try:
            self._setup_files()
            self._start_servers()
        except BaseException:
            self.stop()
            raise

    def _setup_files(self):
        self.dir = tempfile.mkdtemp(prefix="hvdssh-")
        os.chmod(self.dir, 0o755)
        d = self.dir
        os.makedirs(os.path.join(d, "hostkeys"))
        # Host keys: one per host, plus one that belongs to no host (used
        # to fake a changed host key).
        for h in self.hosts:
            path = os.path.join(d, "hostkeys", "host_%s" % h)
            self.host_pubs[h] = keygen(path, "hvdtest-hostkey-%s" % h)
            self.host_fingerprints[h] = fingerprint(path + ".pub")
        self.impostor_key = os.path.join(d, "hostkeys", "impostor")
        self.impostor_pub = keygen(self.impostor_key, "hvdtest-impostor")
        self.impostor_fingerprint = fingerprint(self.impostor_key + ".pub")
        # The user: a key that is authorized, and one that is not.
        self.home = self.new_home("home", key=True, known_hosts=None)
        self.key = os.path.join(self.home, ".ssh", "id_ed25519")
        with open(self.key + ".pub") as f:
            self.user_pub = f.read().strip()
        self.wrong_key = os.path.join(d, "wrong_id_ed25519")
        keygen(self.wrong_key, "hvdtest-unauthorized")
        self.authorized_keys = os.path.join(d, "authorized_keys")
        with open(self.authorized_keys, "w") as f:
            f.write(self.user_pub + "\n")
        os.chmod(self.authorized_keys, 0o600)
        if not os.path.isdir(PRIVSEP_DIR):
            os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)

    def new_home(self, name, key=True, known_hosts="plain"):
        """Makes another fake HOME under the temporary directory: .ssh/ with
        the authorized user key (key=True), or none (key=False: only -i can
        log in), and known_hosts written in the given mode (see
        fresh_known_hosts; None writes nothing now). Returns its path."""
        home = os.path.join(self.dir, name)
        ssh_dir = os.path.join(home, ".ssh")
        os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
        if key:
            src = getattr(self, "key", None)
            dst = os.path.join(ssh_dir, "id_ed25519")
            if src is None:
                keygen(dst, "hvdtest-user")
            else:
                shutil.copy(src, dst)
                shutil.copy(src + ".pub", dst + ".pub")
                os.chmod(dst, 0o600)
        if known_hosts is not None and self.port is not None:
            self.fresh_known_hosts(known_hosts, home=home)
        return home

    def _config(self, host, port):
        d = self.dir
        return "\n".join([
            "# sshd for the horovodrun SSH tests (host %s)" % host,
            "ListenAddress %s:%d" % (host, port),
            "AddressFamily inet",
            "HostKey %s" % os.path.join(d, "hostkeys", "host_%s" % host),
            "PidFile none",
            "StrictModes no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "AuthorizedKeysFile %s" % self.authorized_keys,
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "HostbasedAuthentication no",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowAgentForwarding no",
            "PermitUserEnvironment no",
            "LogLevel VERBOSE",
            "SyslogFacility AUTH",
            "LoginGraceTime 60",
            "MaxStartups 200:30:400",
            "MaxSessions 100",
            "MaxAuthTries 20",
            "",
        ])

    def _candidate_ports(self):
        """Ports free on every host address (and on a few spare addresses,
        so closed/silent stand-ins can share the port)."""
        addrs = self.hosts + ["127.0.0.%d" % (self._spare_next + i)
                              for i in range(4)]
        for _ in range(200):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((self.hosts[0], 0))
            port = s.getsockname()[1]
            s.close()
            if all(port_is_free(a, port) for a in addrs):
                yield port
        raise FixtureError("no port is free on all of %s" % ", ".join(addrs))

    def _start_servers(self):
        last_err = None
        for attempt, port in enumerate(self._candidate_ports()):
            if attempt >= 10:
                break
            try:
                self._start_at(port)
                self.port = port
                self.fresh_known_hosts("plain")
                return
            except FixtureError as e:
                last_err = e
                self._kill_servers()
        raise FixtureError("could not start sshd: %s" % last_err)

    def _start_at(self, port):
        for h in self.hosts:
            cfg = os.path.join(self.dir, "sshd_%s.conf" % h)
            with open(cfg, "w") as f:
                f.write(self._config(h, port))
            log = os.path.join(self.dir, "sshd_%s.log" % h)
            self.logs[h] = log
            with open(log, "ab") as lf:
                # -D: stay in the foreground (a child we can kill);
                # -e: log to stderr, which is the per-host log file.
                self.procs[h] = subprocess.Popen(
                    [SSHD, "-D", "-e", "-f", cfg], stdin=subprocess.DEVNULL,
                    stdout=lf, stderr=lf, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        pending = list(self.hosts)
        while pending:
            for h in list(pending):
                p = self.procs[h]
                if p.poll() is not None:
                    raise FixtureError("sshd for %s exited with %s: %s" %
                                       (h, p.returncode, self.log_text(h)))
                if _read_banner(h, port).startswith(b"SSH-2.0-"):
                    pending.remove(h)
            if pending and time.monotonic() > deadline:
                raise FixtureError("sshd for %s did not answer within %s s: "
                                   "%s" % (", ".join(pending),
                                           self.start_timeout,
                                           self.log_text(pending[0])))
            if pending:
                time.sleep(0.05)

    # ------------------------------------------------------------ teardown

    def _kill_servers(self):
        for h, p in list(self.procs.items()):
            if p.poll() is None:
                # Sessions first: killing only the listener leaves them.
                for pid in reversed(descendants(p.pid)):
                    if _comm(pid) == "sshd":
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
                p.kill()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = {}

    def stop(self):
        """Kills every sshd (listeners and sessions) and removes the
        temporary directory (kept if HVD_SSH_KEEP is set, for debugging)."""
        for l in self._listeners:
            l.close()
        self._listeners = []
        self._kill_servers()
        if self.dir and not os.environ.get("HVD_SSH_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # ------------------------------------------------------------ helpers

    @property
    def known_hosts(self):
        return os.path.join(self.home, ".ssh", "known_hosts")

    def known_hosts_of(self, home):
        return os.path.join(home, ".ssh", "known_hosts")

    def env(self, base=None, home=None, **extra):
        """An environment for horovodrun (or ssh): HOME is the fake home,
        so ~/.ssh/known_hosts and ~/.ssh/id_ed25519 resolve inside the
        temporary directory, and SSH_AUTH_SOCK is removed so no real agent
        is asked. extra sets variables (None removes one)."""
        env = dict(os.environ if base is None else base)
        env["HOME"] = home or self.home
        env.pop("SSH_AUTH_SOCK", None)
        env.pop("SSH_AGENT_PID", None)
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def hosts_arg(self, slots=1, hosts=None, user=None):
        """'127.0.0.2:2,127.0.0.3:2' for slots=2; slots may be a list (one
        per host); user='root' gives 'root@127.0.0.2:2,...'."""
        hosts = self.hosts if hosts is None else hosts
        if isinstance(slots, int):
            slots = [slots] * len(hosts)
        pre = "%s@" % user if user else ""
        return ",".join("%s%s:%d" % (pre, h, s) for h, s in zip(hosts, slots))

    def known_hosts_line(self, host, pub=None):
        """The known_hosts entry of host at the cluster's port."""
        pub = pub or self.host_pubs[host]
        keytype, blob = pub.split()[:2]
        return "[%s]:%d %s %s" % (host, self.port, keytype, blob)

    def fresh_known_hosts(self, mode="plain", home=None, hosts=None):
        """(Re)writes known_hosts in the fake home (or in home):
          'plain'  one "[127.0.0.K]:PORT ssh-ed25519 ..." line per host;
          'hashed' the same, then hashed with ssh-keygen -H;
          'empty'  an empty file (every host is unknown);
          'missing' no file at all;
          'wrong'  each host listed with a key it does not have (the
                   impostor key): a changed host key.
        hosts limits the entries to those hosts (the others are left out,
        so they are unknown); for 'wrong', only those hosts get the wrong
        key and the rest their right one. Returns the path."""
        path = self.known_hosts_of(home or self.home)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if mode == "missing":
            if os.path.exists(path):
                os.unlink(path)
            return path
        lines = []
        if mode in ("plain", "hashed"):
            for h in (hosts if hosts is not None else self.hosts):
                lines.append(self.known_hosts_line(h))
        elif mode == "wrong":
            bad = hosts if hosts is not None else self.hosts
            for h in self.hosts:
                lines.append(self.known_hosts_line(
                    h, self.impostor_pub if h in bad else None))
        elif mode != "empty":
            raise ValueError("unknown known_hosts mode %r" % mode)
        with open(path, "w") as f:
            f.write("".join(l + "\n" for l in lines))
        os.chmod(path, 0o600)
        if mode == "hashed" and lines:
            _run([SSH_KEYGEN, "-H", "-f", path])
            old = path + ".old"
            if os.path.exists(old):
                os.unlink(old)
        return path

    def known_hosts_has(self, host, home=None):
        """True when known_hosts (plain or hashed entries) has a key for
        host at the cluster's port (asks ssh-keygen -F)."""
        path = self.known_hosts_of(home or self.home)
        if not os.path.exists(path):
            return False
        p = subprocess.run([SSH_KEYGEN, "-F", "[%s]:%d" % (host, self.port),
                            "-f", path], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        return p.returncode == 0 and "ssh-ed25519" in p.stdout

    def spare_address(self):
        """A loopback address above the hosts on which nothing listens at
        the cluster's port (checked): a host with no sshd."""
        for _ in range(100):
            a = "127.0.0.%d" % self._spare_next
            self._spare_next += 1
            if self._spare_next > 254:
                break
            if port_is_free(a, self.port) and connect_refused(a, self.port):
                return a
        raise FixtureError("no spare loopback address is free at port %d" %
                           self.port)

    def silent_host(self):
        """A loopback address with a socket listening at the cluster's port
        that never accepts nor speaks (a host that never answers); closed
        at stop(). Returns the address."""
        for _ in range(100):
            a = "127.0.0.%d" % self._spare_next
            self._spare_next += 1
            if self._spare_next > 254:
                break
            try:
                l = SilentListener(a, self.port)
            except OSError:
                continue
            self._listeners.append(l)
            return a
        raise FixtureError("no loopback address is free for a silent host")

    def sshd_pid(self, host):
        return self.procs[host].pid

    def sessions(self, host):
        """Pids of the per-connection sshd processes of host (the children
        of its listening sshd)."""
        pid = self.sshd_pid(host)
        return [c for c, p in _ppid_map().items() if p == pid]

    def session_procs(self, host):
        """[(pid, comm, cmdline)] of everything running under host's sshd
        sessions (sshd processes and the commands they run)."""
        return [(p, _comm(p), _cmdline(p))
                for p in descendants(self.sshd_pid(host))]

    def commands(self, host):
        """[(pid, comm, cmdline)] of the non-sshd processes under host's
        sessions (e.g. hvd-agent and, through it, ranks)."""
        return [t for t in self.session_procs(host) if t[1] != "sshd"]

    def kill_sessions(self, host, sig=signal.SIGKILL):
        """Kills the per-connection sshd processes of host (the listener's
        children and the sshd processes below them, as if the connection
        dropped), not the commands they run. Returns the pids killed."""
        killed = []
        for pid in reversed(descendants(self.sshd_pid(host))):
            if _comm(pid) == "sshd":
                try:
                    os.kill(pid, sig)
                    killed.append(pid)
                except OSError:
                    pass
        return killed

    def log_text(self, host, tail=4000):
        try:
            with open(self.logs[host], errors="replace") as f:
                return f.read()[-tail:]
        except (OSError, KeyError):
            return ""

    def ssh_argv(self, host, command, key=None, known_hosts=None,
                 user=None, extra=()):
        """argv running command on host with OpenSSH's own client, strict
        host key checking against the fake known_hosts, no config file, no
        agent, only the given key."""
        # ssh keeps the first value of an option: extra comes first.
        return [SSH, "-F", "/dev/null"] + list(extra) + [
                "-i", key or self.key,
                "-o", "IdentitiesOnly=yes",
                "-o", "IdentityAgent=none",
                "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes",
                "-o", "UserKnownHostsFile=%s" % (known_hosts or
                                                 self.known_hosts),
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "ConnectTimeout=10",
                "-o", "LogLevel=ERROR",
                "-p", str(self.port),
                "%s@%s" % (user or self.user, host)] + (
                    [command] if isinstance(command, str) else list(command))
