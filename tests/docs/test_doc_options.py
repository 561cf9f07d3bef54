#!/usr/bin/env python3
"""Checks the options table of docs/horovodrun.md against horovodrun --help.

The table is the first markdown table of the page whose header row is
`| option | what it does |`. Its first column names options in backticks
(`-np`, `--num-proc N`); every spelling there counts. It fails when an
option spelling of `horovodrun --help` (parsed by helpopts.py, as
test_manpage.py parses it) is missing from the table, or when the table
names a spelling that --help does not have. The second column may mention
any option: it is not read.

Environment:
  HVD_HOROVODRUN   the built horovodrun binary
  HVD_DOC_OPTIONS  docs/horovodrun.md
Without them, paths relative to this file and ../../build are tried.
"""

import os
import re
import sys

from helpopts import ROOT, SPELLING, fail, help_options, horovodrun_path

HEADER = re.compile(r"^\|\s*option\s*\|\s*what it does\s*\|\s*$")
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
CODE = re.compile(r"`([^`]*)`")


def doc_path():
    p = os.environ.get("HVD_DOC_OPTIONS")
    if p:
        return p
    return os.path.join(ROOT, "docs", "horovodrun.md")


def first_cell(row):
    """The first cell of a table row, with escaped bars kept inside."""
    body = row.strip()[1:]
    m = re.match(r"((?:[^|\\]|\\.)*)\|", body)
    return m.group(1) if m else body


def table_options(path):
    """Returns {spelling: first line number} from the options table."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail("cannot read %s: %s (set HVD_DOC_OPTIONS)" % (path, e))
    start = None
    for i, line in enumerate(lines):
        if HEADER.match(line):
            start = i
            break
    if start is None:
        fail("%s has no options table (a header row "
             "'| option | what it does |')" % path)
    if start + 1 >= len(lines) or not SEPARATOR.match(lines[start + 1]):
        fail("%s:%d: the options table's header has no separator row"
             % (path, start + 1))
    found = {}
    for i in range(start + 2, len(lines)):
        line = lines[i]
        if not line.strip().startswith("|"):
            break  # the table ends at the first line that is no row
        cell = first_cell(line)
        spans = CODE.findall(cell)
        if not spans:
            fail("%s:%d: the row names no option in backticks: %r"
                 % (path, i + 1, line))
        for span in spans:
            for s in SPELLING.findall(span):
                found.setdefault(s, i + 1)
    return found


def main():
    doc = doc_path()
    entries = help_options(horovodrun_path())
    in_help = {s for e in entries for s in e}
    in_doc = table_options(doc)
    if len(in_doc) < 10:
        fail("%s: the options table names %d spellings; expected at least "
             "10: %r" % (doc, len(in_doc), sorted(in_doc)))

    errors = []
    for e in entries:
        for s in e:
            if s not in in_doc:
                errors.append("%s: option %s of horovodrun --help is missing "
                              "from the options table" % (doc, s))
    for s, line in sorted(in_doc.items(), key=lambda kv: kv[1]):
        if s not in in_help:
            errors.append("%s:%d: the options table names %s, which "
                          "horovodrun --help does not have" % (doc, line, s))
    if errors:
        for e in errors:
            print("FAIL: " + e)
        sys.exit(1)

    print("ok: the options table of %s names the %d options (%d spellings) "
          "of horovodrun --help, and no other" % (doc, len(entries),
                                                   len(in_help)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
