#!/usr/bin/env python3
"""Checks that the tests and files the documentation cites exist.

Scans README.md, docs/*.md, man/*.1, man/*.3, man/*.8 and tests/README.md
(when there is one) for
  - every word test_NAME (in backticks or bare): a test of that name must
    exist; test_NAME* (a trailing star) stands for any test whose name
    starts with test_NAME;
  - every path tests/....py, tests/....c, tests/....sh and scripts/....sh:
    the file must exist (a path with an upper-case placeholder, such as
    tests/unit/test_MODULE.c, is a pattern and is not checked).
CHANGES.md is not scanned: it is a history, and may name tests that are
gone.

A test name exists when it is
  - a Python test function or method, `def test_NAME`, in a .py file under
    tests/;
  - a test module or C file under tests/: test_NAME.py, test_NAME.c;
  - a test registered in tests/**/meson.build: test('test_NAME', ...), or
    a unit test program test_MODULE of the unit_tests list in
    tests/meson.build.

The pages also discuss tests of other projects (Horovod's and
TensorFlow's own test suites); those names are listed in EXTERNAL below,
each with where it lives.

Fails naming file:line and the word for each citation that does not
resolve. Environment: HVD_SOURCE_ROOT, the source tree (default: two
folders above this file).
"""

import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Tests of other projects that the pages name, and where they are.
EXTERNAL = {
    "test_horovod_join_allgather":
        "Horovod 0.28.1, test/parallel/test_torch.py",
    "test_tensorflow2_keras":
        "Horovod 0.28.1, test/parallel/test_tensorflow2_keras.py",
    "test_session": "TensorFlow, tf.test.TestCase.test_session",
}

# A cited test name; a star right after it makes it a prefix.
NAME = re.compile(r"(?<![A-Za-z0-9_])(test_[a-z0-9_]+)(\*?)")
# A cited file under tests/ or scripts/.
PATH = re.compile(r"(?<![\w./-])((?:tests/[\w./-]+\.(?:py|c|sh))|"
                  r"(?:scripts/[\w./-]+\.sh))(?![\w/-])")
# A placeholder in a cited path: an upper-case word (MODULE, NAME).
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{3,}(?![a-z])")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test_[A-Za-z0-9_]+)\s*\(", re.M)
MESON_TEST = re.compile(r"\b(?:test|benchmark)\(\s*'([^']+)'")
UNIT_LIST = re.compile(r"^unit_tests\s*=\s*\[(.*?)\]", re.M | re.S)


def root_path():
    p = os.environ.get("HVD_SOURCE_ROOT")
    if p:
        return p
    return os.path.dirname(os.path.dirname(HERE))


def known_tests(root):
    """Every test name under tests/, as a set."""
    names = set()
    tests = os.path.join(root, "tests")
    for d, subdirs, files in os.walk(tests):
        subdirs[:] = [s for s in subdirs if s != "__pycache__"]
        for f in files:
            path = os.path.join(d, f)
            stem, ext = os.path.splitext(f)
            if ext in (".py", ".c") and stem.startswith("test_"):
                names.add(stem)
            if ext == ".py":
                with open(path, encoding="utf-8", errors="replace") as fh:
                    names.update(DEF.findall(fh.read()))
            elif f == "meson.build":
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                names.update(MESON_TEST.findall(text))
                m = UNIT_LIST.search(text)
                if m:
                    names.update("test_" + u
                                 for u in re.findall(r"'([^']+)'",
                                                     m.group(1)))
    return names


def pages(root):
    """The files to scan, relative to root."""
    out = ["README.md"]
    out += sorted(os.path.relpath(p, root) for p in
                  glob.glob(os.path.join(root, "docs", "*.md")))
    for sec in ("1", "3", "8"):
        out += sorted(os.path.relpath(p, root) for p in
                      glob.glob(os.path.join(root, "man", "*." + sec)))
    if os.path.exists(os.path.join(root, "tests", "README.md")):
        out.append(os.path.join("tests", "README.md"))
    return out


def plain(line, man):
    """A man page line with the roff escapes that matter undone."""
    if not man:
        return line
    line = line.replace("\\-", "-").replace("\\(hy", "-")
    line = re.sub(r"\\f(?:\[[^\]]*\]|\([A-Za-z]{2}|[A-Za-z0-9])", "", line)
    return re.sub(r"\\[&c]", "", line)


def main():
    root = root_path()
    if not os.path.isfile(os.path.join(root, "tests", "meson.build")):
        print("FAIL: %s is not the source tree (set HVD_SOURCE_ROOT)" % root)
        return 1
    names = known_tests(root)
    # A scan that silently finds nothing must not pass.
    if len(names) < 50:
        print("FAIL: found only %d test names under %s/tests: %r"
              % (len(names), root, sorted(names)))
        return 1

    errors = []
    cited = paths = external = 0
    for rel in pages(root):
        path = os.path.join(root, rel)
        man = not rel.endswith(".md")
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            errors.append("%s: cannot read it: %s" % (rel, e))
            continue
        for no, line in enumerate(lines, 1):
            line = plain(line, man)
            for word, star in NAME.findall(line):
                cited += 1
                if word in EXTERNAL:
                    external += 1
                    continue
                if star:
                    if not any(n.startswith(word) for n in names):
                        errors.append("%s:%d: %s*: no test name starts with "
                                      "it" % (rel, no, word))
                elif word not in names:
                    errors.append("%s:%d: %s: no test of that name under "
                                  "tests/" % (rel, no, word))
            for p in PATH.findall(line):
                if PLACEHOLDER.search(p):
                    continue  # a pattern, such as tests/unit/test_MODULE.c
                paths += 1
                if not os.path.exists(os.path.join(root, p)):
                    errors.append("%s:%d: %s: no such file" % (rel, no, p))
    if errors:
        for e in errors:
            print("FAIL: " + e)
        return 1
    print("ok: %d test names cited (%d of other projects' tests) and %d "
          "paths, in %s, all exist (%d test names known)"
          % (cited, external, paths, ", ".join(pages(root)), len(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
