#!/usr/bin/env python3
"""Checks that man/hvd.3 documents every function and error of hvd.h.

The names come from the public header itself: every function declared
with HVD_EXPORT, and every entry of the HVD_ERRNO_MAP X-macro table, so a
function or error code added to the header without a man page entry fails
here. Each function must be named in the NAME section (which names no
function the header lacks), have a prototype in the SYNOPSIS and an entry
of its own: a .SS heading, or a .TP tag in the FUNCTIONS section (the
hvd_rank() family shares one subsection); each error must
appear in the ERRORS section as its name, value and hvd_strerror()
message, in that order.

Environment:
  HVD_HEADER  worker/include/hvd.h
  HVD_HVD3    man/hvd.3
Without them, paths relative to this file are used.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# A parser that silently finds nothing must not pass.
MIN_FUNCTIONS = 10
MIN_ERRORS = 15

# One XX(name, value, "message") entry of HVD_ERRNO_MAP.
ERRNO_ENTRY = re.compile(
    r'XX\(\s*([A-Z][A-Z0-9_]*)\s*,\s*(-?\d+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)')
# An exported declaration: HVD_EXPORT, a return type, the name, "(".
EXPORT_DECL = re.compile(r"\bHVD_EXPORT\b([^;{}()]*?)\b(hvd_\w+)\s*\(")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def path_from_env(var, default):
    return os.environ.get(var) or default


def read(path, var):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        fail("cannot read %s: %s (set %s)" % (path, e, var))


def strip_c_comments(src):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", src, flags=re.S)


def join_continuations(src):
    return src.replace("\\\n", " ")


def header_errors(src):
    """[(name, value, message)] of the HVD_ERRNO_MAP table."""
    src = join_continuations(strip_c_comments(src))
    m = re.search(r"^[ \t]*#[ \t]*define[ \t]+HVD_ERRNO_MAP\(\s*\w+\s*\)(.*)$",
                  src, re.M)
    if m is None:
        fail("no '#define HVD_ERRNO_MAP(XX)' in the header")
    return [("HVD_" + n, int(v), msg.replace('\\"', '"'))
            for n, v, msg in ERRNO_ENTRY.findall(m.group(1))]


def header_functions(src):
    """Names of the functions declared with HVD_EXPORT, in order."""
    src = join_continuations(strip_c_comments(src))
    # Drop preprocessor lines, among them '#define HVD_EXPORT ...' itself.
    src = re.sub(r"^[ \t]*#[^\n]*", " ", src, flags=re.M)
    names = []
    for m in EXPORT_DECL.finditer(src):
        if m.group(2) not in names:
            names.append(m.group(2))
    return names


def roff_to_text(src):
    """Undoes the roff spellings that can appear inside the names."""
    text = src.replace("\\-", "-").replace("\\(hy", "-")
    text = text.replace("\\(lq", '"').replace("\\(rq", '"')
    text = text.replace("\\(aq", "'").replace("\\e", "\\")
    # Font changes: \fB, \fI, \fR, \fP, \f(CW, \f[CB].
    text = re.sub(r"\\f(?:\[[^\]]*\]|\([A-Za-z]{2}|[A-Za-z0-9])", "", text)
    # Zero-width characters, \c joins and line continuations.
    text = re.sub(r"\\[&c]", "", text)
    return text.replace("\\\n", " ")


def section(src, name):
    """The source lines of one .SH section, or '' when there is none."""
    m = re.search(r'^\.SH\s+"?%s"?\s*$(.*?)(?=^\.SH\s|\Z)' % re.escape(name),
                  src, re.M | re.S)
    return m.group(1) if m else ""


def words(text):
    """Text with macro quotes dropped and whitespace collapsed."""
    text = re.sub(r"^\.[A-Za-z]+[ \t]*", "", text, flags=re.M)
    return " ".join(text.split())


def name_section_names(man):
    """The names the NAME section lists before its '\\-' and summary."""
    text = roff_to_text(section(man, "NAME"))
    names, dash, _ = text.partition(" - ")
    if not dash:
        names, dash, _ = text.partition("-")
    return [n.strip() for n in names.replace("\n", " ").split(",")
            if n.strip()]


def appears(name, text):
    return re.search(r"(?<![\w])%s(?![\w])" % re.escape(name), text) is not None


def main():
    hpath = path_from_env("HVD_HEADER",
                          os.path.join(ROOT, "worker", "include", "hvd.h"))
    mpath = path_from_env("HVD_HVD3", os.path.join(ROOT, "man", "hvd.3"))
    header = read(hpath, "HVD_HEADER")
    man = read(mpath, "HVD_HVD3")

    functions = header_functions(header)
    errors = header_errors(header)
    if len(functions) < MIN_FUNCTIONS:
        fail("found %d HVD_EXPORT functions in %s, expected at least %d: %r"
             % (len(functions), hpath, MIN_FUNCTIONS, functions))
    if len(errors) < MIN_ERRORS:
        fail("found %d HVD_ERRNO_MAP entries in %s, expected at least %d: %r"
             % (len(errors), hpath, MIN_ERRORS, errors))

    text = roff_to_text(man)
    problems = []

    # NAME lists every function, and no other (whatis(1) and apropos(1)
    # index the page by these names).
    listed = name_section_names(man)
    if not listed:
        problems.append("the NAME section lists no function")
    for fn in functions:
        if fn not in listed:
            problems.append("function %s is not listed in NAME" % fn)
    for name in listed:
        if name not in functions:
            problems.append("NAME lists %s, which the header does not "
                            "export" % name)

    # Every function, anywhere, in the SYNOPSIS and with a subsection.
    synopsis = words(roff_to_text(section(man, "SYNOPSIS")))
    # A function's own entry: a .SS heading, or a .TP tag under FUNCTIONS
    # (the getters share one subsection, each with its own tag).
    joined = man.replace("\\\n", " ")
    entries = re.findall(r"^\.SS[ \t]+([^\n]*)", joined, re.M)
    entries += re.findall(r"^\.TP[^\n]*\n([^\n]*)",
                          section(joined, "FUNCTIONS"), re.M)
    entries = [roff_to_text(t) for t in entries]
    for fn in functions:
        if not appears(fn, text):
            problems.append("function %s does not appear" % fn)
            continue
        if not re.search(r"\b%s\s*\(" % re.escape(fn), synopsis):
            problems.append("function %s has no prototype in SYNOPSIS" % fn)
        if not any(appears(fn, t) for t in entries):
            problems.append("function %s has no entry (.SS heading or .TP "
                            "tag under FUNCTIONS)" % fn)

    # Every error, anywhere, and in ERRORS with its value and message.
    errsec = words(roff_to_text(section(man, "ERRORS")))
    if not errsec:
        problems.append("no ERRORS section")
    for name, value, message in errors:
        if not appears(name, text):
            problems.append("error %s does not appear" % name)
            continue
        if errsec and not appears(name, errsec):
            problems.append("error %s is not in the ERRORS section" % name)
            continue
        # The entry reads: name, value, message (in any quotes or parens).
        entry = r"(?<!\w)%s[\s\"'(]*%d[\s\"')]*%s" % (
            re.escape(name), value, re.escape(message))
        if errsec and not re.search(entry, errsec):
            problems.append("error %s: no entry '%s (%d) \"%s\"' in the "
                            "ERRORS section" % (name, name, value, message))

    if problems:
        fail("%s is out of date with %s:\n  %s"
             % (mpath, hpath, "\n  ".join(problems)))
    print("ok: all %d functions and %d error codes of %s are in %s"
          % (len(functions), len(errors), hpath, mpath))
    print("  functions: " + ", ".join(functions))
    print("  errors: " + ", ".join(n for n, _, _ in errors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
