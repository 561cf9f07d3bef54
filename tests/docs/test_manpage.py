#!/usr/bin/env python3
"""Checks that every option of horovodrun's table appears in horovodrun.1.

The option list comes from `horovodrun --help` (parsed by helpopts.py,
shared with test_doc_options.py), which is generated from the option
table in launcher/horovodrun/cli_options.c, so an option added to the
table without a man page entry fails here. Every spelling counts: the long name (--hosts),
the short form (-H) and the alias (-np).

Environment:
  HVD_HOROVODRUN  the built horovodrun binary
  HVD_MANPAGE     man/horovodrun.1
Without them, paths relative to this file and ../../build are tried.
"""

import os
import re
import sys

from helpopts import ROOT, fail, help_options, horovodrun_path


def manpage_path():
    p = os.environ.get("HVD_MANPAGE")
    if p:
        return p
    return os.path.join(ROOT, "man", "horovodrun.1")


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
    try:
        with open(man, encoding="utf-8") as f:
            src = f.read()
    except OSError as e:
        fail("cannot read the man page %s: %s (set HVD_MANPAGE)" % (man, e))

    entries = help_options(exe)
    longs = [s for e in entries for s in e if s.startswith("--")]

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
