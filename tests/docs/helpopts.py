"""What tests/docs share: the options of `horovodrun --help`.

The option list comes from `horovodrun --help`, which is generated from
the option table in launcher/horovodrun/cli_options.c. Each entry is the
list of its spellings: the long name (--hosts), the short form (-H) and
the alias (-np). Options the table keeps out of --help (old spellings
accepted with a warning) are not listed.

Imported by test_manpage.py and test_doc_options.py, which sit in this
folder (a script's own folder is the first entry of sys.path).
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# One option spelling: "-H", "-np", "--num-proc", "--no-gpu-pinning".
SPELLING = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][A-Za-z0-9-]*)")
# The left column of an option line: spellings, each maybe with an
# upper-case argument name, joined by ", ".
OPTION_LINE = re.compile(
    r"^\s+((?:--?[A-Za-z0-9][\w-]*(?: [A-Z][A-Z_]*)?, )*"
    r"--?[A-Za-z0-9][\w-]*(?: [A-Z][A-Z_]*)?)(?:\s|$)")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def horovodrun_path():
    p = os.environ.get("HVD_HOROVODRUN")
    if p:
        return p
    return os.path.join(ROOT, "build", "launcher", "horovodrun")


def help_options(exe):
    """Returns a list of option entries, each a list of spellings."""
    if not os.access(exe, os.X_OK):
        fail("horovodrun not found at %s (set HVD_HOROVODRUN)" % exe)
    r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30,
                       universal_newlines=True)
    if r.returncode != 0:
        fail("%s --help exited %d: %s" % (exe, r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    try:
        start = lines.index("Options:") + 1
    except ValueError:
        fail("no 'Options:' heading in --help output:\n" + r.stdout)
    entries = []
    for line in lines[start:]:
        if not line.strip():
            break  # the option table ends at the first blank line
        if line.startswith("    ") and entries:
            continue  # a long option's help, on a line of its own
        m = OPTION_LINE.match(line)
        if m is None:
            fail("cannot parse --help line %r" % line)
        entries.append(SPELLING.findall(m.group(1)))
    # A parser that silently finds nothing must not pass.
    longs = [s for e in entries for s in e if s.startswith("--")]
    if len(entries) < 10 or len(longs) < 10:
        fail("--help lists %d options (%d long names); expected at least 10:"
             " %r" % (len(entries), len(longs), entries))
    for e in entries:
        if not any(s.startswith("--") for s in e):
            fail("option %r has no --long name in --help" % (e,))
    return entries
