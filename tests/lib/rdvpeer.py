"""Rendezvous peers for test_rdv_hardening.py: the wire format of
common/frame.h and common/rdvproto.h reimplemented in Python (stdlib
only), a flooder of garbage connections, a recording proxy that replays
what it saw, and a fake rendezvous server.

Run as a program:
  rdvpeer.py flood PORT SECONDS STATS_FILE
      from another process, open hundreds of bad connections to
      127.0.0.1:PORT again and again until SECONDS pass or SIGTERM; write
      counts to STATS_FILE as JSON.
  rdvpeer.py proxy OUT_FILE -- COMMAND...
      as a rank: run COMMAND with its rendezvous traffic through a proxy
      that records the frames, replays the REGISTER frame on a new
      connection, and writes what happened to OUT_FILE as JSON.
  rdvpeer.py badpeers OUT_FILE -- COMMAND...
      as a rank: open one connection of each kind of bad peer (or of the
      kinds in $BADPEER_KINDS, comma-separated), watch how the server ends
      each, write that to OUT_FILE, then exec COMMAND.
"""

import errno
import hashlib
import hmac
import json
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time

MAGIC = b"HV"
VERSION = 1
HDR = 8
# The rendezvous protocol version (HVD_RDV_VERSION).
RDV_VERSION = 2
(CHALLENGE, REGISTER, PEERS, FAIL, ABORT, REPORT, BYE, ASSIGN,
 HOSTS) = range(1, 10)
NONCE_LEN = 32
MAC_LEN = 32


def frame(ftype, payload, length=None):
    """A frame; length overrides the announced payload length."""
    n = len(payload) if length is None else length
    return MAGIC + struct.pack(">BBI", VERSION, ftype, n) + payload


def parse_frames(buf):
    """(frames, rest): complete frames [(type, payload, raw)] at the start
    of buf and the bytes after them."""
    out = []
    while len(buf) >= HDR:
        if buf[:2] != MAGIC:
            raise ValueError("bad magic")
        ftype = buf[3]
        n = struct.unpack(">I", buf[4:8])[0]
        if len(buf) < HDR + n:
            break
        out.append((ftype, bytes(buf[HDR:HDR + n]), bytes(buf[:HDR + n])))
        buf = buf[HDR + n:]
    return out, buf


def s32(b):
    return struct.pack(">I", len(b)) + b


def mac(secret, label, nonce, body):
    return hmac.new(secret, label + nonce + body, hashlib.sha256).digest()


def register_body(rank, size, nonce, host, addr, port):
    return (struct.pack(">II", rank, size) + nonce + s32(host.encode()) +
            s32(addr.encode()) + struct.pack(">I", port))


def register_frame(secret, server_nonce, rank, size, host="x",
                   addr="127.0.0.1", port=4242, nonce=None):
    body = register_body(rank, size, nonce or os.urandom(NONCE_LEN), host,
                         addr, port)
    return frame(REGISTER, body + mac(secret, b"hvd-register", server_nonce,
                                      body))


def register_verifies(secret, server_nonce, payload):
    body, tag = payload[:-MAC_LEN], payload[-MAC_LEN:]
    return hmac.compare_digest(mac(secret, b"hvd-register", server_nonce,
                                   body), tag)


def peers_verifies(secret, rank_nonce, payload):
    body, tag = payload[:-MAC_LEN], payload[-MAC_LEN:]
    return hmac.compare_digest(mac(secret, b"hvd-peers", rank_nonce, body),
                               tag)


def sealed_frame(ftype, label, secret, rank_nonce, body):
    """A server frame signed for one rank (PEERS, ASSIGN)."""
    return frame(ftype, body + mac(secret, label, rank_nonce, body))


def challenge_frame(nonce):
    """The server's CHALLENGE: its protocol version and nonce."""
    return frame(CHALLENGE, struct.pack(">I", RDV_VERSION) + nonce)


def layout_runs(hosts):
    """The layout of PEERS (common/rdvlayout.h) for host names in rank
    order: [(count, repeat, host)], host -1 for hosts not seen before."""
    runs, seen = [], []
    for i, h in enumerate(hosts):
        if i > 0 and h == hosts[i - 1]:
            c, rep, at = runs[-1]
            runs[-1] = (c + 1, rep, at)
        elif h in seen:
            runs.append((1, 1, seen.index(h)))
        else:
            seen.append(h)
            runs.append((1, 1, -1))
    merged = []
    for c, rep, at in runs:
        if merged and at < 0 and merged[-1][2] < 0 and merged[-1][0] == c:
            merged[-1] = (c, merged[-1][1] + 1, -1)
        else:
            merged.append((c, rep, at))
    return merged


def peers_frame(secret, rank_nonce, peers):
    """PEERS for one rank; peers: [(host, addr, port)] in rank order, all
    of them sent (a superset of what the rank needs)."""
    runs = layout_runs([h for h, _, _ in peers])
    body = struct.pack(">II", len(peers), len(runs)) + b"".join(
        struct.pack(">IIi", *u) for u in runs)
    body += struct.pack(">I", len(peers)) + b"".join(
        struct.pack(">I", r) + s32(h.encode()) + s32(a.encode()) +
        struct.pack(">I", p) for r, (h, a, p) in enumerate(peers))
    return sealed_frame(PEERS, b"hvd-peers", secret, rank_nonce, body)


def assign_frame(secret, rank_nonce, rank, size, local_rank, local_size,
                 cross_rank, cross_size):
    """ASSIGN for one process of an elastic job."""
    body = struct.pack(">6I", rank, size, local_rank, local_size, cross_rank,
                       cross_size)
    return sealed_frame(ASSIGN, b"hvd-assign", secret, rank_nonce, body)


def hosts_frame(timestamp, changes):
    """HOSTS: a notice of host changes."""
    return frame(HOSTS, struct.pack(">IIB", timestamp >> 32,
                                    timestamp & 0xffffffff, changes))


def register_fields(payload):
    """(rank, size, nonce, host, addr, port) of a REGISTER payload."""
    rank, size = struct.unpack(">II", payload[:8])
    nonce = payload[8:8 + NONCE_LEN]
    off = 8 + NONCE_LEN
    n = struct.unpack(">I", payload[off:off + 4])[0]
    host = payload[off + 4:off + 4 + n].decode()
    off += 4 + n
    n = struct.unpack(">I", payload[off:off + 4])[0]
    addr = payload[off + 4:off + 4 + n].decode()
    port = struct.unpack(">I", payload[off + 4 + n:off + 8 + n])[0]
    return rank, size, nonce, host, addr, port


def register_nonce(payload):
    """The rank's own nonce inside a REGISTER payload."""
    return payload[8:8 + NONCE_LEN]


def note(payload):
    """(code or rank, message) of a FAIL/ABORT/REPORT payload."""
    code = struct.unpack(">i", payload[:4])[0]
    n = struct.unpack(">I", payload[4:8])[0]
    return code, payload[8:8 + n].decode("utf-8", "replace")


def read_frames(sock, until, want=None):
    """Reads frames until the peer closes, want frames arrived, or the
    monotonic time until passes: (frames, closed, when)."""
    buf = b""
    got = []
    sock.settimeout(None)
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return got, False, time.monotonic()
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            continue
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            return got, True, time.monotonic()
        buf += chunk
        fr, buf = parse_frames(buf)
        got += fr
        if want is not None and len(got) >= want:
            return got, False, time.monotonic()


# ------------------------------------------------------------------ flood

# Silent peers are the ones that stay: they come more often, so that the
# server's limit on waiting connections is reached.
MODES = ("silent", "silent", "silent", "random", "half", "oversize",
         "badmac", "slow", "wrongtype", "hangup", "bulk")


def flood(port, seconds, stats_file, batch=300, max_open=1400):
    """Bad connections in batches from this process until seconds pass.

    Each batch opens `batch` connections of mixed kinds; connections stay
    open for a random while (most longer than the server's registration
    timeout would allow) so that the server's pending list fills up."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    max_open = min(max_open, soft - 64)
    rnd = random.Random(os.getpid())
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    stats = {m: 0 for m in MODES}
    stats.update(connected=0, refused=0, errors=0, batches=0, peak_open=0)
    live = []  # (close_at, sock, mode, slow_left)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop:
        stats["batches"] += 1
        for _ in range(batch):
            if len(live) >= max_open:
                break
            mode = rnd.choice(MODES)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex(("127.0.0.1", port))
            if rc == errno.ECONNREFUSED:
                stats["refused"] += 1
                s.close()
                continue
            if rc not in (0, errno.EINPROGRESS, errno.EAGAIN):
                stats["errors"] += 1
                s.close()
                continue
            stats["connected"] += 1
            stats[mode] += 1
            data = b""
            if mode == "random":
                data = os.urandom(rnd.randrange(1, 6000))
            elif mode == "half":
                body = os.urandom(rnd.randrange(100, 4000))
                data = frame(REGISTER, body)[:HDR + len(body) // 2]
            elif mode == "oversize":
                data = frame(REGISTER, b"", rnd.choice(
                    [0xffffffff, 1 << 30, 16 << 20, 4097]))
            elif mode == "badmac":
                data = register_frame(os.urandom(32), os.urandom(32), 0, 4)
            elif mode == "wrongtype":
                data = frame(REPORT, struct.pack(">i", 0) + s32(b"boo"))
            elif mode == "slow":
                data = frame(REGISTER, b"", 300)[:1]
            elif mode == "bulk":
                # Announces a frame under the old 16 MiB limit and sends
                # as much of it as the socket takes.
                data = frame(REGISTER, b"", (16 << 20) - 1) + bytes(1 << 17)
            try:
                if data:
                    s.send(data)
            except OSError:
                pass
            if mode == "hangup":
                s.close()
                continue
            live.append((time.monotonic() + rnd.uniform(0.2, 8.0), s))
        stats["peak_open"] = max(stats["peak_open"], len(live))
        time.sleep(rnd.uniform(0.02, 0.15))
        now = time.monotonic()
        keep = []
        for close_at, s in live:
            if close_at <= now:
                s.close()
            else:
                keep.append((close_at, s))
        live = keep
    for _, s in live:
        s.close()
    with open(stats_file, "w") as f:
        json.dump(stats, f)


# ------------------------------------------------------------------ proxy

class Recorder:
    """Relays one client connection to the real server and records the
    frames each way."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.frames = {"up": [], "down": []}
        self.lock = threading.Lock()
        self.register_seen = threading.Event()

    def pump(self, src, dst, way):
        buf = b""
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            buf += chunk
            fr, buf = parse_frames(buf)
            with self.lock:
                self.frames[way] += fr
            for f in fr:
                if way == "up" and f[0] == REGISTER:
                    self.register_seen.set()
            try:
                dst.sendall(chunk)
            except OSError:
                return


def replay(upstream, raw):
    """Presents a recorded REGISTER frame on a new connection: returns
    what the server did."""
    s = socket.create_connection(upstream, timeout=5)
    until = time.monotonic() + 5
    got, closed, _ = read_frames(s, until, want=1)
    res = {"challenge": bool(got) and got[0][0] == CHALLENGE}
    s.sendall(raw)
    got, closed, _ = read_frames(s, until)
    res["closed"] = closed
    res["frames"] = [f[0] for f in got]
    if got and got[0][0] == FAIL:
        res["code"], res["message"] = note(got[0][1])
    res["local_port"] = s.getsockname()[1]
    s.close()
    return res


def proxy(out_file, cmd):
    import subprocess
    upstream = (os.environ["HOROVOD_RENDEZVOUS_ADDR"],
                int(os.environ["HOROVOD_RENDEZVOUS_PORT"]))
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    rec = Recorder(upstream)

    def serve():
        c, _ = lsock.accept()
        u = socket.create_connection(upstream)
        threading.Thread(target=rec.pump, args=(c, u, "up"),
                         daemon=True).start()
        rec.pump(u, c, "down")

    threading.Thread(target=serve, daemon=True).start()
    env = dict(os.environ, HOROVOD_RENDEZVOUS_ADDR="127.0.0.1",
               HOROVOD_RENDEZVOUS_PORT=str(lsock.getsockname()[1]))
    child = subprocess.Popen(cmd, env=env)
    result = {}
    if rec.register_seen.wait(30):
        with rec.lock:
            raw = [f[2] for f in rec.frames["up"] if f[0] == REGISTER][0]
        result["replay"] = replay(upstream, raw)
    rc = child.wait()
    with rec.lock:
        result["up"] = [(t, raw.hex()) for t, _, raw in rec.frames["up"]]
        result["down"] = [(t, raw.hex()) for t, _, raw in rec.frames["down"]]
    result["child_rc"] = rc
    with open(out_file, "w") as f:
        json.dump(result, f)
    sys.exit(rc)


# --------------------------------------------------------------- bad peers

def badpeers(out_file, cmd):
    """One connection of each bad kind, all at once; records when and how
    the server ended each, then becomes cmd."""
    addr = (os.environ["HOROVOD_RENDEZVOUS_ADDR"],
            int(os.environ["HOROVOD_RENDEZVOUS_PORT"]))
    size = int(os.environ["HOROVOD_SIZE"])
    kinds = ["silent", "half", "slow", "oversize", "garbage", "wrongtype",
             "badmac", "toolong"]
    if os.environ.get("BADPEER_KINDS"):
        kinds = os.environ["BADPEER_KINDS"].split(",")
    results = {}

    def one(kind):
        t0 = time.monotonic()
        s = socket.create_connection(addr, timeout=5)
        res = {"local_port": s.getsockname()[1]}
        got, closed, _ = read_frames(s, t0 + 5, want=1)
        nonce = got[0][1][4:] if got and got[0][0] == CHALLENGE else b""
        res["challenge"] = len(nonce) == NONCE_LEN
        until = t0 + 12
        try:
            if kind == "half":
                s.sendall(frame(REGISTER, os.urandom(200))[:HDR + 100])
            elif kind == "slow":
                # A valid header, a byte a second: never a whole frame
                # in time, though never silent.
                for b in frame(REGISTER, b"", 200)[:HDR]:
                    s.sendall(bytes([b]))
                    r, _, _ = select.select([s], [], [], 1.0)
                    if r:
                        break
            elif kind == "oversize":
                s.sendall(frame(REGISTER, b"", 0xfffffff0))
            elif kind == "garbage":
                s.sendall(os.urandom(3000))
            elif kind == "wrongtype":
                s.sendall(frame(REPORT, struct.pack(">i", 0) + s32(b"hi")))
            elif kind == "badmac":
                s.sendall(register_frame(os.urandom(32), nonce, 0, size))
            elif kind == "toolong":
                s.sendall(frame(REGISTER, os.urandom(4097)))
        except OSError as e:
            res["send_error"] = str(e)
        got, closed, when = read_frames(s, until)
        res["closed"] = closed
        res["after"] = round(when - t0, 2)
        res["frames"] = [f[0] for f in got]
        if got and got[-1][0] == FAIL:
            res["code"], res["message"] = note(got[-1][1])
        s.close()
        results[kind] = res

    threads = [threading.Thread(target=one, args=(k,)) for k in kinds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out_file, "w") as f:
        json.dump(results, f)
    os.execvp(cmd[0], cmd)


def main(argv):
    if argv[1] == "flood":
        flood(int(argv[2]), float(argv[3]), argv[4])
    elif argv[1] in ("proxy", "badpeers"):
        sep = argv.index("--")
        fn = proxy if argv[1] == "proxy" else badpeers
        fn(argv[2], argv[sep + 1:])
    else:
        sys.exit("usage: see the docstring of %s" % argv[0])


if __name__ == "__main__":
    main(sys.argv)
