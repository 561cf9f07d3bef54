"""Checks what arrived from spew ranks against what they say they printed.

Every spew rank writes DIR/digest.RANK at exit: per stream the line count,
the byte count, the SHA-256 of the raw bytes and the SHA-256 of its lines
each ended by one newline. Tagged output ("[rank,local_rank]<stdout>:text",
or mpirun's "[job,rank]<stdout>:text") is parsed as it streams in, hashed
per rank and stream, and compared: equal counts and digests mean every line
arrived exactly once, whole, under its own prefix, in the rank's order.
Standard library only.
"""

import hashlib
import os
import re
import threading
import time

STREAMS = ("stdout", "stderr")
PREFIX_RE = re.compile(rb"\[(\d+),(\d+)\]<(stdout|stderr)>:")


def read_digests(dirname, size, missing_ok=False):
    """{rank: {stream: (lines, bytes, raw_sha, lines_sha)}}; raises when a
    rank wrote none (it did not finish), unless missing_ok."""
    out = {}
    for r in range(size):
        path = os.path.join(dirname, "digest.%d" % r)
        if missing_ok and not os.path.exists(path):
            continue
        with open(path) as f:
            words = [l.split() for l in f.read().splitlines()]
        assert words[0] == ["rank", str(r)], (path, words[0])
        d = {}
        for w in words[1:]:
            d[w[0]] = (int(w[1]), int(w[2]), w[3], w[4])
        out[r] = d
    return out


def totals(digests):
    """(lines, bytes) printed by all ranks on both streams."""
    lines = sum(d[s][0] for d in digests.values() for s in STREAMS)
    nbytes = sum(d[s][1] for d in digests.values() for s in STREAMS)
    return lines, nbytes


class TaggedParser:
    """Incremental parser of one tagged stream (horovodrun's stdout or
    stderr). rank_group is 1 for horovodrun's [rank,local_rank] and 2 for
    mpirun's [job,rank]. Lines of horovodrun's own ("horovodrun: ...") are
    kept in own."""

    def __init__(self, name, rank_group=1):
        self.name = name
        self.rank_group = rank_group
        self.tail = b""
        self.cache = {}
        self.stats = {}  # (rank, stream) -> [count, sha256, local ranks]
        self.bad = []
        self.nbad = 0
        self.own = []  # horovodrun's own messages ("horovodrun: ...")
        self.lines = 0
        self.nbytes = 0

    def _info(self, key):
        m = PREFIX_RE.fullmatch(key)
        if m is None:
            return None
        rank = int(m.group(self.rank_group))
        other = int(m.group(3 - self.rank_group))
        stream = m.group(3).decode()
        st = self.stats.setdefault((rank, stream),
                                   [0, hashlib.sha256(), set()])
        st[2].add(other)
        info = (st, stream)
        self.cache[key] = info
        return info

    def feed(self, chunk):
        self.nbytes += len(chunk)
        buf = self.tail + chunk if self.tail else chunk
        mv = memoryview(buf)
        pos = 0
        find = buf.find
        cache = self.cache
        n = 0
        while True:
            j = find(b"\n", pos)
            if j < 0:
                break
            k = find(b">:", pos, min(pos + 48, j))
            info = cache.get(buf[pos:k + 2]) if k >= 0 else None
            if info is None and k >= 0:
                info = self._info(bytes(buf[pos:k + 2]))
            if info is None and buf.startswith(b"horovodrun: ", pos):
                self.own.append(bytes(buf[pos:j]).decode("utf-8", "replace"))
            elif info is None:
                self.nbad += 1
                if len(self.bad) < 5:
                    self.bad.append(bytes(buf[pos:min(j, pos + 120)]))
            else:
                st = info[0]
                st[0] += 1
                st[1].update(mv[k + 2:j + 1])
            n += 1
            pos = j + 1
        self.lines += n
        mv.release()
        self.tail = buf[pos:]

    def finish(self):
        if self.tail:
            self.nbad += 1
            self.bad.append(b"(no newline at the end) " + self.tail[:120])
            self.tail = b""


def check_tagged(digests, parsers, local_ranks=None):
    """Problems (list of strings) of parsed tagged output against the
    digests; parsers is {stream: TaggedParser of that stream}, the same
    parser for both when stdout and stderr were one pipe. Ranks without a
    digest (killed) are checked for well-formed lines only."""
    problems = []
    combined = parsers["stdout"] is parsers["stderr"]
    for stream, p in parsers.items():
        if combined and stream == "stderr":
            continue
        if p.nbad:
            problems.append("%s: %d lines without a well-formed prefix, "
                            "e.g. %r" % (stream, p.nbad, p.bad[:3]))
        for (rank, s) in p.stats:
            if local_ranks is not None and \
                    p.stats[(rank, s)][2] != {local_ranks.get(rank)}:
                problems.append("rank %d %s: local ranks %s in prefixes, "
                                "expected %d" % (rank, s,
                                                 sorted(p.stats[(rank, s)][2]),
                                                 local_ranks.get(rank, -1)))
            if s != stream and not combined:
                problems.append("rank %d's %s lines on horovodrun's %s" %
                                (rank, s, stream))
    for r, d in sorted(digests.items()):
        for s in STREAMS:
            want_lines, _, _, want_sha = d[s]
            st = parsers[s].stats.get((r, s))
            if st is None:
                if want_lines:
                    problems.append("rank %d %s: nothing arrived of %d "
                                    "lines" % (r, s, want_lines))
                continue
            count, h, _ = st
            if count != want_lines:
                problems.append("rank %d %s: %d lines arrived, %d printed" %
                                (r, s, count, want_lines))
            elif h.hexdigest() != want_sha:
                problems.append("rank %d %s: lines differ from those printed"
                                " (split, merged, reordered or changed)" %
                                (r, s))
    return problems


def check_files(digests, dirname):
    """Problems of --output-filename DIR against the digests: each
    DIR/rank.N/{stdout,stderr} must hold exactly the raw bytes."""
    problems = []
    width = len(str(len(digests) - 1))
    for r, d in sorted(digests.items()):
        for s in STREAMS:
            path = os.path.join(dirname, "rank.%0*d" % (width, r), s)
            h = hashlib.sha256()
            n = 0
            try:
                with open(path, "rb") as f:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        n += len(b)
                        h.update(b)
            except OSError as e:
                problems.append("%s: %s" % (path, e))
                continue
            if n != d[s][1] or h.hexdigest() != d[s][2]:
                problems.append("%s: %d bytes, %d printed%s" % (
                    path, n, d[s][1],
                    "" if n != d[s][1] else " (content differs)"))
    return problems


class Reader(threading.Thread):
    """Reads a file descriptor to its end as fast as it can, feeding a
    TaggedParser (or only counting when parser is None)."""

    def __init__(self, fd, parser=None, chunk=1 << 20):
        super().__init__(daemon=True)
        self.fd = fd
        self.parser = parser
        self.chunk = chunk
        self.nbytes = 0
        self.newlines = 0
        self.error = None

    def run(self):
        try:
            while True:
                b = os.read(self.fd, self.chunk)
                if not b:
                    break
                self.nbytes += len(b)
                if self.parser is not None:
                    self.parser.feed(b)
                else:
                    self.newlines += b.count(b"\n")
            if self.parser is not None:
                self.parser.finish()
        except Exception as e:  # reported by the test
            self.error = e


def proc_status(pid):
    """{'VmRSS': kB, 'VmHWM': kB} of a live process, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    return out if "VmHWM" in out else None


class MemWatch(threading.Thread):
    """Samples the peak RSS (VmHWM, kB) of the processes that pids()
    returns, every interval seconds, until stop()."""

    def __init__(self, pids, interval=0.02):
        super().__init__(daemon=True)
        self.pids = pids
        self.interval = interval
        self.peak = {}  # pid -> max VmHWM seen
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            for pid in self.pids():
                st = proc_status(pid)
                if st is not None:
                    self.peak[pid] = max(self.peak.get(pid, 0), st["VmHWM"])
            time.sleep(self.interval)

    def stop(self):
        self.stopped.set()
        self.join(5)


def sanitized(pid):
    """Whether a process runs with AddressSanitizer, whose shadow memory
    and quarantine make its RSS meaningless as a bound."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "libasan" in f.read()
    except OSError:
        return False


def children(pid):
    """Live children of pid."""
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None
