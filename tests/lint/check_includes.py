#!/usr/bin/env python3
"""Checks that every include in common/, launcher/ and worker/ goes the
allowed direction.

The tree is layered: common/ depends on nothing; launcher/lib/ on common/;
launcher/link/ on those two; each launcher program folder (horovodrun,
agent, mpirank) on common/ and launcher/lib/ (horovodrun and agent, which
starts other hosts' agents in the tree launch, also on launcher/link/) and
on its own folder, never on another program's; worker/
(libhvd) on common/ and itself. Only libhvd includes its public header,
which it spells "hvd.h". A quoted include names its header from the top of
the tree ("common/wire.h"), unless the header sits in the including file's
own folder or is one of the headers found by name: hvd.h (worker/include)
and the generated hvd_build.h and hvd_version.h (build root), which depend
on nothing.

Prints one line per include that breaks a rule, as
  file:line: #include "name": the rule it breaks
and exits 1 if there is any.

Usage: check_includes.py [ROOT]   (default: the tree this file is in)
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(os.path.dirname(HERE))

SCANNED = ("common", "launcher", "worker")
SUFFIXES = (".c", ".h", ".cu")
# Headers included by name alone, wherever the including file is.
PUBLIC = "hvd.h"
GENERATED = ("hvd_build.h", "hvd_version.h")
PUBLIC_PATH = "worker/include/hvd.h"

# The launcher's shared folders; any other folder of launcher/ is a
# program's.
LAUNCHER_SHARED = ("lib", "link")
# Which layers each layer may include (own folder always allowed for a
# program). A program folder not named here gets DEFAULT_PROGRAM.
ALLOWED = {
    "common": {"common"},
    "launcher/lib": {"common", "launcher/lib"},
    "launcher/link": {"common", "launcher/lib", "launcher/link"},
    "launcher/horovodrun": {"common", "launcher/lib", "launcher/link",
                            "launcher/horovodrun"},
    "launcher/agent": {"common", "launcher/lib", "launcher/link",
                       "launcher/agent"},
    "worker": {"common", "worker"},
}
DEFAULT_PROGRAM = {"common", "launcher/lib"}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]')
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def layer(path):
    """The layer of a tree path: 'common', 'worker', 'launcher/<folder>'."""
    parts = path.split("/")
    if parts[0] == "launcher":
        return "launcher/" + parts[1] if len(parts) > 2 else "launcher"
    return parts[0]


def is_program(lay):
    """Whether layer lay is a launcher program's folder."""
    return (lay.startswith("launcher/")
            and lay.split("/")[1] not in LAUNCHER_SHARED)


def allowed_layers(src_layer):
    """The layers a file of src_layer may include."""
    if src_layer in ALLOWED:
        return ALLOWED[src_layer]
    if src_layer.startswith("launcher/"):
        return DEFAULT_PROGRAM | {src_layer}
    return {"common"}


def blank_comments(text):
    """text with comments replaced by blanks, keeping every newline, so that
    an include mentioned in a comment is not taken for one."""
    return COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def check_include(root, rel, delim, name):
    """The rule that '#include <delim>name' in tree file rel breaks, or
    None when it breaks none."""
    src_layer = layer(rel)
    folder = os.path.dirname(rel)
    if delim == "<":
        # System headers; a tree header must be quoted like the others.
        if name.split("/")[0] in SCANNED or name in (PUBLIC,) + GENERATED:
            return "a header of this tree is included with quotes"
        return None
    if name in GENERATED:
        return None
    if name == PUBLIC:
        if src_layer == "worker":
            return None
        return ("only worker/ includes libhvd's public header; %s may not"
                % src_layer)
    if "/" not in name:
        if os.path.isfile(os.path.join(root, folder, name)):
            return None
        return ("not written from the top of the tree (no '/'), and not a "
                "header of %s/" % folder)
    if name.split("/")[0] not in SCANNED or ".." in name.split("/"):
        return ("not written from the top of the tree (%s)"
                % "/".join(SCANNED))
    if not os.path.isfile(os.path.join(root, name)):
        return "no such header in the tree"
    if name == PUBLIC_PATH:
        return 'libhvd\'s public header is included as "hvd.h"'
    dst_layer = layer(name)
    if dst_layer in allowed_layers(src_layer):
        return None
    programs = [d for d in (src_layer, dst_layer) if is_program(d)]
    if len(programs) == 2:
        return ("%s may not include another program's folder (%s); move "
                "what both need to launcher/lib" % (src_layer, dst_layer))
    return "%s may include only %s, not %s" % (
        src_layer, ", ".join(sorted(allowed_layers(src_layer))), dst_layer)


def scan(root):
    """[(rel, line, include text, rule)] of every breaking include."""
    found = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = blank_comments(f.read())
                for no, line in enumerate(text.split("\n"), 1):
                    m = INCLUDE.match(line)
                    if m is None:
                        continue
                    delim, name = m.group(1), m.group(2)
                    rule = check_include(root, rel, delim, name)
                    if rule is not None:
                        close = '"' if delim == '"' else ">"
                        found.append((rel, no, "#include %s%s%s"
                                      % (delim, name, close), rule))
    return found


def main():
    """Scans the tree given (or this one) and reports."""
    root = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_ROOT
    if not all(os.path.isdir(os.path.join(root, d)) for d in SCANNED):
        print("check_includes: %s has no %s" % (root, "/, ".join(SCANNED)))
        return 2
    found = scan(root)
    for rel, no, inc, rule in found:
        print("%s:%d: %s: %s" % (rel, no, inc, rule))
    if found:
        print("check_includes: %d include(s) against the layering"
              % len(found))
        return 1
    print("check_includes: every include goes the allowed direction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
