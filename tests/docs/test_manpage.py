#!/usr/bin/env python3
"""Checks that every option of horovodrun's table appears in horovodrun.1.

The option list comes from `horovodrun --help`, which is generated from
the option table in launcher/horovodrun/cli_options.c, so an option added to the
table without a man page entry fails here. Every spelling counts: the long name (--hosts),
the short form (-H) and the alias (-np).

Environment:
  HVD_HOROVODRUN  the built horovodrun binary
  HVD_MANPAGE     man/horovodrun.1
Without them, paths relative to this file and ../../build are tried.
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


def manpage_path():
    p = os.environ.get("HVD_MANPAGE")
    if p:
        return p
    return os.path.join(ROOT, "man", "horovodrun.1")


def help_options(exe):
    """Returns a list of option entries, each a list of spellings."""
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
    return entries


def roff_to_text(src):
    """Undoes the roff spellings that matter for option names."""
    text = src.replace("\\-", "-").replace("\\(hy", "-")
    # Font changes: \fB, \fI, \fR, \fP, \f(CW, \f[CB].
    text = re.sub(r"\\f(?:\[[^\]]*\]|\([A-Za-z]{2}|[A-Za-z0-9])", "", text)
    # Zero-width characters and \c joins.
    text = re.sub(r"\\[&c]", "", text)
    return text


def section(text, name):
    """The lines of one .SH section, or '' when there is none."""
    m = re.search(r"^\.SH\s+\"?%s\"?\s*$(.*?)(?=^\.SH\s|\Z)" % re.escape(name),
                  text, re.M | re.S)
    return m.group(1) if m else ""


def appears(spelling, text):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(spelling),
                     text) is not None


def main():
    exe = horovodrun_path()
    man = manpage_path()
    if not os.access(exe, os.X_OK):
        fail("horovodrun not found at %s (set HVD_HOROVODRUN)" % exe)
    try:
        with open(man, encoding="utf-8") as f:
            src = f.read()
    except OSError as e:
        fail("cannot read the man page %s: %s (set HVD_MANPAGE)" % (man, e))

    entries = help_options(exe)
    longs = [s for e in entries for s in e if s.startswith("--")]
    # A parser that silently finds nothing must not pass.
    if len(entries) < 10 or len(longs) < 10:
        fail("--help lists %d options (%d long names); expected at least 10:"
             " %r" % (len(entries), len(longs), entries))
    for e in entries:
        if not any(s.startswith("--") for s in e):
            fail("option %r has no --long name in --help" % (e,))

    text = roff_to_text(src)
    options = section(text, "OPTIONS")
    if not options.strip():
        fail("%s has no OPTIONS section" % man)

    missing = []
    for e in entries:
        for s in e:
            if not appears(s, options):
                missing.append(s)
    if missing:
        fail("options in horovodrun --help but not in the OPTIONS section "
             "of %s: %s" % (man, ", ".join(missing)))

    # Each long option has its own .TP entry, written \fB\-\-name\fR.
    tags = re.findall(r"^\.TP[^\n]*\n([^\n]*)", src, re.M)
    tagtext = roff_to_text("\n".join(tags))
    untagged = [s for s in longs if not appears(s, tagtext)]
    if untagged:
        fail("options without a .TP entry in %s: %s"
             % (man, ", ".join(untagged)))

    n = sum(len(e) for e in entries)
    print("ok: all %d options (%d spellings) of horovodrun --help are in %s"
          % (len(entries), n, man))
    for e in entries:
        print("  " + ", ".join(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
