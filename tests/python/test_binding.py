#!/usr/bin/env python3
"""Checks horovod's ctypes binding (worker/python/horovod/common/libhvd.py)
against the header it mirrors (worker/include/hvd.h), so that a drift
between the two fails here rather than as a crash or a wrong result in a
rank.

- Constants: every upper-case integer of libhvd.py (UINT8, SUM,
  COMPRESS_FP16, EINVAL, ...) is the header's HVD_<name>, with its value;
  an enum of which libhvd.py mirrors one member (hvd_dtype, hvd_op,
  hvd_compression) is mirrored whole.
- Structures: each ctypes.Structure of STRUCTS has the C struct's fields,
  in order, with their types.
- Functions: every function libhvd.py binds is an HVD_EXPORT function of
  the header, with a restype and argtypes that are the C prototype's
  (int: c_int, size_t: c_size_t, an enum: c_int, char *: c_char_p,
  void *: c_void_p, T *: POINTER(T), an opaque handle: c_void_p).

libhvd.py is loaded without libhvd.so and without a framework: the
library it opens records what the binding declares, and the horovod
package around it (worker/python, on PYTHONPATH) gives it its exceptions.
Plain python3 runs it.

Environment (meson sets both; without them, paths from this file):
  HVD_HEADER     worker/include/hvd.h
  HVD_LIBHVD_PY  worker/python/horovod/common/libhvd.py
"""

import ctypes
import importlib.util
import os
import re
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER = os.environ.get("HVD_HEADER") or os.path.join(
    ROOT, "worker", "include", "hvd.h")
LIBHVD_PY = os.environ.get("HVD_LIBHVD_PY") or os.path.join(
    ROOT, "worker", "python", "horovod", "common", "libhvd.py")

# The C structs the binding mirrors, and the ctypes class of each.
STRUCTS = {"hvd_allreduce_opts": "AllreduceOpts"}

# C scalar types and the ctypes type the binding must use for each.
SCALARS = {
    "int": ctypes.c_int,
    "size_t": ctypes.c_size_t,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "int32_t": ctypes.c_int32,
    "double": ctypes.c_double,
    "float": ctypes.c_float,
    "char": ctypes.c_char,
    "void": None,
}

# A parser that silently finds nothing must not pass.
MIN_FUNCTIONS = 10
MIN_CONSTANTS = 15


def strip_c(src):
    """The header without comments and with continuation lines joined."""
    src = re.sub(r"/\*.*?\*/|//[^\n]*", " ", src, flags=re.S)
    return src.replace("\\\n", " ")


class Header:
    """What hvd.h declares: constants, enums, typedefs, structs and
    exported function prototypes."""

    def __init__(self, src):
        src = strip_c(src)
        self.constants = {}   # "HVD_EINVAL" -> -1
        self.enums = {}       # "hvd_dtype" -> ["HVD_UINT8", ...]
        self.enum_types = set()
        self.handles = set()  # typedef struct x *name;
        self.structs = {}     # "hvd_allreduce_opts" -> [(name, type)]
        self.functions = {}   # "hvd_init" -> (return type, [param types])
        self._errno(src)
        code = re.sub(r"^[ \t]*#[^\n]*", " ", src, flags=re.M)
        self._enums(code)
        self._typedefs(code)
        self._functions(code)

    def _errno(self, src):
        m = re.search(r"#[ \t]*define[ \t]+HVD_ERRNO_MAP\(\s*\w+\s*\)(.*)",
                      src)
        if m is None:
            raise ValueError("no '#define HVD_ERRNO_MAP(XX)' in the header")
        for name, value in re.findall(r"XX\(\s*(\w+)\s*,\s*(-?\d+)\s*,",
                                      m.group(1)):
            self.constants["HVD_" + name] = int(value)

    def _enums(self, code):
        pat = re.compile(r"(typedef\s+)?enum\s+(\w+)\s*\{([^}]*)\}\s*(\w*)")
        for m in pat.finditer(code):
            tag, body, alias = m.group(2), m.group(3), m.group(4)
            self.enum_types.update(n for n in (tag, alias) if n)
            members, value = [], -1
            for item in body.split(","):
                item = item.strip()
                if not re.match(r"^[A-Z]\w*(\s*=\s*-?\w+)?$", item):
                    continue  # the errno enum, made by the X-macro
                name, _, expr = item.partition("=")
                value = int(expr, 0) if expr.strip() else value + 1
                self.constants[name.strip()] = value
                members.append(name.strip())
            if members:
                self.enums[tag] = members

    def _typedefs(self, code):
        for m in re.finditer(r"typedef\s+struct\s+\w+\s*\*\s*(\w+)\s*;",
                             code):
            self.handles.add(m.group(1))
        pat = re.compile(r"(?:typedef\s+)?struct\s+(\w+)\s*\{([^}]*)\}")
        for m in pat.finditer(code):
            fields = []
            for decl in m.group(2).split(";"):
                decl = " ".join(decl.split())
                if not decl:
                    continue
                base, _, names = decl.rpartition(" ")
                for name in names.split(","):
                    fields.append((name.strip(), parse_type(base)))
            self.structs[m.group(1)] = fields

    def _functions(self, code):
        pat = re.compile(r"\bHVD_EXPORT\b([^;{}()]*?)\b(hvd_\w+)\s*"
                         r"\(([^()]*)\)\s*;")
        for m in pat.finditer(code):
            params = [p.strip() for p in m.group(3).split(",")]
            if params == ["void"]:
                params = []
            self.functions[m.group(2)] = (
                parse_type(m.group(1)), [parse_param(p) for p in params])


def parse_type(text):
    """A C type as (base name, pointer depth), const dropped."""
    text = re.sub(r"\b(const|volatile|struct|enum)\b", " ", text)
    depth = text.count("*")
    base = " ".join(text.replace("*", " ").split())
    return base, depth


def parse_param(text):
    """A parameter's type, its name dropped."""
    m = re.match(r"^(.*?[\s*])(\w+)$", text)
    if m and m.group(1).strip() and m.group(1).strip() != "const":
        return parse_type(m.group(1))
    return parse_type(text)


def describe(ctype):
    """A ctypes type as a reader knows it."""
    if ctype is None:
        return "None"
    if isinstance(ctype, type) and issubclass(ctype, ctypes._Pointer):
        return "POINTER(%s)" % describe(ctype._type_)
    return getattr(ctype, "__name__", repr(ctype))


class FakeFunction:
    """A symbol of the stand-in library: keeps what the binding sets."""

    def __init__(self, name):
        self.__name__ = name
        self.restype = ctypes.c_int  # ctypes' default
        self.argtypes = None

    def __call__(self, *args):
        raise AssertionError("libhvd.py called %s while loading"
                             % self.__name__)


class FakeLibrary:
    """Stands in for ctypes.CDLL(libhvd.so): every attribute the binding
    asks for is a FakeFunction, recorded in functions."""

    def __init__(self, path, *args, **kwargs):
        self.path = path
        self.functions = {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.functions.setdefault(name, FakeFunction(name))


def load_binding(path):
    """libhvd.py, loaded against FakeLibrary, and that library."""
    import horovod.common.exceptions  # noqa: F401 (what libhvd.py imports)

    saved_cdll, saved_lib = ctypes.CDLL, os.environ.get("HVD_LIBRARY")
    opened = []

    def cdll(path, *args, **kwargs):
        opened.append(FakeLibrary(path))
        return opened[-1]

    ctypes.CDLL = cdll
    # One candidate path: no search of the system for a real libhvd.
    os.environ["HVD_LIBRARY"] = "libhvd-under-test.so"
    try:
        spec = importlib.util.spec_from_file_location(
            "horovod.common.libhvd", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        ctypes.CDLL = saved_cdll
        if saved_lib is None:
            del os.environ["HVD_LIBRARY"]
        else:
            os.environ["HVD_LIBRARY"] = saved_lib
    if len(opened) != 1:
        raise AssertionError("libhvd.py opened %d libraries, expected 1 "
                             "(libhvd): %r" % (len(opened),
                                               [o.path for o in opened]))
    return module, opened[0]


class BindingTest(unittest.TestCase):
    """libhvd.py against hvd.h."""

    @classmethod
    def setUpClass(cls):
        with open(HEADER, encoding="utf-8") as f:
            cls.h = Header(f.read())
        cls.mod, cls.lib = load_binding(LIBHVD_PY)

    def expected(self, ctype):
        """The ctypes type the binding must use for a parsed C type."""
        base, depth = ctype
        if base in self.h.handles:
            base, depth = "void", depth + 1
        if depth == 0:
            if base in SCALARS:
                return SCALARS[base]
            if base in self.h.enum_types:
                return ctypes.c_int
            if base in STRUCTS:
                return getattr(self.mod, STRUCTS[base])
            self.fail("hvd.h: no ctypes equivalent known for C type %r; "
                      "add it to SCALARS or STRUCTS" % base)
        if depth == 1 and base == "char":
            return ctypes.c_char_p
        if depth == 1 and base == "void":
            return ctypes.c_void_p
        return ctypes.POINTER(self.expected((base, depth - 1)))

    def test_header_parsed(self):
        self.assertGreaterEqual(len(self.h.functions), MIN_FUNCTIONS,
                                self.h.functions)
        self.assertGreaterEqual(len(self.h.constants), MIN_CONSTANTS,
                                self.h.constants)
        for enum in ("hvd_dtype", "hvd_op", "hvd_compression"):
            self.assertIn(enum, self.h.enums)

    def mirrored_constants(self):
        return {name: value for name, value in vars(self.mod).items()
                if re.match(r"^[A-Z][A-Z0-9_]*$", name)
                and type(value) is int}

    def test_constants(self):
        """Every constant of libhvd.py is the header's, by name and value."""
        consts = self.mirrored_constants()
        self.assertTrue(consts, "libhvd.py defines no constants")
        for name, value in sorted(consts.items()):
            with self.subTest(constant=name):
                cname = "HVD_" + name
                self.assertTrue(cname in self.h.constants,
                                "libhvd.py's %s has no %s in hvd.h"
                                % (name, cname))
                self.assertEqual(value, self.h.constants[cname],
                                 "libhvd.py's %s is %d, hvd.h's %s is %d"
                                 % (name, value, cname,
                                    self.h.constants[cname]))

    def test_enums_whole(self):
        """An enum libhvd.py mirrors at all, it mirrors whole."""
        consts = self.mirrored_constants()
        for enum, members in sorted(self.h.enums.items()):
            mirrored = [m for m in members if m[4:] in consts]
            if not mirrored:
                continue
            with self.subTest(enum=enum):
                self.assertEqual(
                    [], [m for m in members if m[4:] not in consts],
                    "libhvd.py mirrors enum %s but not these members"
                    % enum)

    def test_structs(self):
        """Each mirrored struct has the C struct's fields, in order."""
        for cname, pyname in sorted(STRUCTS.items()):
            with self.subTest(struct=cname):
                self.assertIn(cname, self.h.structs,
                              "hvd.h has no struct %s" % cname)
                cls = getattr(self.mod, pyname, None)
                self.assertIsNotNone(cls, "libhvd.py has no %s" % pyname)
                want = [(n, describe(self.expected(t)))
                        for n, t in self.h.structs[cname]]
                got = [(f[0], describe(f[1])) for f in cls._fields_]
                self.assertEqual(want, got, "%s._fields_ against struct %s"
                                 % (pyname, cname))

    def test_signatures(self):
        """Every function libhvd.py binds has the C prototype's types."""
        bound = self.lib.functions
        self.assertGreaterEqual(len(bound), MIN_FUNCTIONS, sorted(bound))
        for name in sorted(bound):
            fn = bound[name]
            with self.subTest(function=name):
                self.assertIn(name, self.h.functions,
                              "libhvd.py binds %s, which hvd.h does not "
                              "export" % name)
                ret, params = self.h.functions[name]
                self.assertIsNotNone(
                    fn.argtypes, "libhvd.py binds %s without argtypes, so "
                    "its arguments go unchecked" % name)
                want = [describe(self.expected(p)) for p in params]
                got = [describe(a) for a in fn.argtypes]
                self.assertEqual(want, got, "%s: argtypes against hvd.h's "
                                 "parameters" % name)
                self.assertEqual(describe(self.expected(ret)),
                                 describe(fn.restype),
                                 "%s: restype against hvd.h's return type"
                                 % name)

    def test_free_is_libhvds(self):
        """libhvd.py frees libhvd's buffers with hvd_free, not libc's."""
        self.assertIn("hvd_free", self.lib.functions)
        with open(LIBHVD_PY, encoding="utf-8") as f:
            src = f.read()
        self.assertNotIn("CDLL(None)", src)


if __name__ == "__main__":
    unittest.main(verbosity=2)
