#!/usr/bin/env python3
"""The layering check of docs/architecture.md ("Layers"): every path in src/ that names
an item of the crate must lead to a module of a lower layer than the code's own
top-level module, so imports only point down and no cycle can form across modules.

    python3 scripts/check_layers.py [--root DIR] [--graph] [--verbose]

How: a small Rust front end, in pure Python, reads the crate as rustc would lay it out.
 1. Lexing: comments (nested /* */ too), strings (escapes, raw r#"..."#, byte b"..",
    C c"..", cr#"..."#), char and byte literals ('"', '\\'', b'x') and lifetimes ('a) are
    tokens of their own, so a path in a message or a doc comment is not an import.
 2. The module tree, from src/lib.rs: `mod x;` (x.rs or x/mod.rs, beside a mod.rs or
    under a non-mod.rs file's own folder), `mod x { .. }` and `#[path = ".."] mod x;`.
    Code belongs to the module that declares its file, not to the folder it lies in; a
    `#[path]` into another top-level module's folder is itself an arrow to that module.
 3. Names, per module and per block: `use` trees (`use crate::{a::X, b::{c, d}}`, `self`,
    `as`, globs), `extern crate self as x;`, child modules, items, and
    `#[macro_export]` macros (which land at the crate root).
 4. Every `use` leaf and every path in code (`crate::sim::f()`, `super::super::x`,
    `gc::sim::X` after `use crate as gc;`, `$crate::..`) is resolved segment by segment
    (relative paths too, as in the 2018 edition), following each `use` binding and glob
    to the module the item really comes from: a `pub use` (in lib.rs or in a lower
    module) that re-exports a higher module's item launders nothing. The arrows of a path
    go to every top-level module it passes through, the re-exporting ones and the source.
 5. Test-only code (inside `#[cfg(test)]` items or modules, `#[cfg(all(test, ..))]`,
    `#[test]` functions, files of a `#[cfg(test)] mod x;`) is not built into the library:
    its arrows are listed apart by --verbose, with tests/'s uses of `gradcomp::` (read
    only then), and do not count.

Exit 0 when every arrow points down and the "Layers" table of docs/architecture.md
lists, per module, its layer and exactly the modules it uses; 1 with one line per
upward arrow (file:line, the two modules and their layers) or per table row that
differs from the code; 2 when a top-level module is missing from LAYERS (add it at the
layer it belongs to, here and in docs/architecture.md). `--graph` prints the arrows
with their counts; `--verbose` also the test-only arrows and any file src/ holds that
no `mod` declares (checked at the module its path names).

Not followed: `include!`, macro expansion (a macro's body counts where it is written),
and a `#[macro_use]` macro called by bare name.
"""

import argparse
import os
import re
import sys
import time
from collections import Counter, defaultdict, namedtuple

# Bottom to top: a module may use the modules listed before it, never those after it.
# Keep in step with the table in docs/architecture.md, "Layers".
LAYERS = [
    "units",
    "input",
    "measure",
    "error",
    "models",
    "roofline",
    "compress",
    "devcost",
    "comm",
    "record",
    "netmodel",
    "schedule",
    "config",
    "engine",
    "sim",
    "converge",
    "bench",
    "cli",
]
# Upward arrows accepted for now, (from, to): why, and the issue that removes them.
# Empty: the tree has none.
ALLOW = {}
# main.rs is the binary on top of every module (lib.rs, the root, is read: its
# re-exports are followed, but its own paths are arrows of no module).
EXEMPT = {"main.rs"}

# ---------------------------------------------------------------------------- lexing

TOKEN = re.compile(r"""\s*(?:
    (?P<comment>//[^\n]*|/\*)
  | (?P<raw>[bc]?r\#*")
  | (?P<str>[bc]?"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])')
  | (?P<life>'(?:r\#)?[^\W\d]\w*)
  | (?P<ident>(?:r\#|\$)?[^\W\d]\w*)
  | (?P<num>\d\w*(?:\.\d\w*)?)
  | (?P<punct>::|.)
  | (?P<end>\Z))
""", re.X | re.S)
Tok = namedtuple("Tok", "kind text line start end")
# What the tests read off code_lines: a `crate::X` path.
PATH = re.compile(r"\bcrate::(\w+)")


def _block_comment_end(text, i):
    """The end of the (nested) block comment that opens at text[i]."""
    depth, k, n = 1, i + 2, len(text)
    while k < n and depth:
        if text.startswith("/*", k):
            depth, k = depth + 1, k + 2
        elif text.startswith("*/", k):
            depth, k = depth - 1, k + 2
        else:
            k += 1
    return k


def tokens(text):
    """Every token of TEXT but white space: Tok(kind, text, line, start, end), kind one of
    comment, str (raw, byte and C strings too), char, life, ident (r# stripped), num,
    punct (`::` is one). A string or comment spans lines; its line is where it starts."""
    i, n, line = 0, len(text), 1
    while i < n:
        m = TOKEN.match(text, i)
        kind, end = m.lastgroup, m.end()
        start = m.start(kind)
        line += text.count("\n", i, start)
        if kind == "end":
            return
        if kind == "comment" and text.startswith("/*", start):
            end = _block_comment_end(text, start)
        elif kind == "raw":
            close = '"' + "#" * m.group(kind).count("#")
            k = text.find(close, end)
            kind, end = "str", n if k < 0 else k + len(close)
        word = text[start:end]
        if kind == "ident" and word.startswith("r#"):
            word = word[2:]
        yield Tok(kind, word, line, start, end)
        if kind in ("str", "comment"):
            line += word.count("\n")
        i = end


def code_lines(text):
    """(line number, code) with comments and string and char literals blanked (newlines
    kept): the lexer's view of TEXT, one line at a time."""
    chars = list(text)
    for t in tokens(text):
        if t.kind in ("comment", "str", "char"):
            for k in range(t.start, t.end):
                if chars[k] != "\n":
                    chars[k] = " "
    yield from enumerate("".join(chars).split("\n"), 1)


# --------------------------------------------------------------- the module tree, names

class Module:
    """A module: its name, parent, top-level module (None at the root), whether only tests
    build it, and its scope (child modules, items, `use` bindings and globs)."""

    def __init__(self, name, parent, test=False, top=None):
        self.name, self.parent, self.test = name, parent, test
        self.top = top if top else (parent.top or name) if parent else None
        self.scope = Scope(self, None)


class Scope:
    """The names of a module or of a block (a function body, an impl) in it: name ->
    ("mod", Module) | ("use", Binding) | ("item", the Module that defines it); and the
    glob imports (Bindings). A block sees its outer scopes; a module scope sees none."""

    def __init__(self, module, parent):
        self.module, self.parent, self.names, self.globs = module, parent, {}, []


# A `use` leaf (or `extern crate self as x`): its path, read from the scope it is in.
Binding = namedtuple("Binding", "scope segs")
# What a file is while it is read: its tokens (no comments), the index of each bracket's
# partner, which tokens only tests build, and its path relative to the root.
Source = namedtuple("Source", "toks pair test rel")
OPEN, CLOSE = "{([", "})]"


def bracket_pairs(toks):
    """{index of a bracket: index of its partner}, both ways."""
    pair, stack = {}, []
    for i, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.text in OPEN:
            stack.append(i)
        elif t.text in CLOSE and stack:
            o = stack.pop()
            pair[o], pair[i] = i, o
    for o in stack:  # unbalanced (never in code that compiles): close at the end
        pair[o] = len(toks)
    return pair


def attribute_at(toks, pair, i):
    """(end, inner?, content tokens) of the attribute `#[..]` or `#![..]` at i, or None."""
    if toks[i].text != "#" or i + 1 >= len(toks):
        return None
    inner = toks[i + 1].text == "!"
    o = i + 2 if inner else i + 1
    if o >= len(toks) or toks[o].text != "[":
        return None
    return pair[o] + 1, inner, toks[o + 1:pair[o]]


def cfg_implies_test(words, k=0):
    """(whether the cfg predicate at words[k] holds only when `test` does, its end)."""
    name, k = words[k], k + 1
    if k < len(words) and words[k] == "(":
        args, k = [], k + 1
        while k < len(words) and words[k] != ")":
            if words[k] == ",":
                k += 1
                continue
            a, k = cfg_implies_test(words, k)
            args.append(a)
        k += 1
        return {"all": any(args), "any": bool(args) and all(args)}.get(name, False), k
    if k < len(words) and words[k] == "=":
        return False, k + 2
    return name == "test", k


def is_test_attribute(content):
    words = [t.text for t in content]
    if words == ["test"]:
        return True
    return len(words) > 2 and words[:2] == ["cfg", "("] and cfg_implies_test(words[2:-1])[0]


BRACED_ITEMS = {"fn", "impl", "mod", "trait", "struct", "enum", "union", "macro_rules"}


def item_end(toks, pair, k):
    """The end of the item (or statement, field, match arm) that starts at toks[k]."""
    braced, j, n = False, k, len(toks)
    while j < n:
        t = toks[j]
        if t.kind == "ident" and t.text in BRACED_ITEMS:
            braced = True
        if t.text == "#" and attribute_at(toks, pair, j):
            k = attribute_at(toks, pair, j)[0] if j == k else k  # the item starts after them
            j = attribute_at(toks, pair, j)[0]
            continue
        if t.kind == "punct" and t.text == "{":
            arm = j > 1 and toks[j - 1].text == ">" and toks[j - 2].text == "="
            if braced or j == k or arm:
                return pair[j] + 1  # a fn body, an impl, a block, a match arm's block
            j = pair[j] + 1
        elif t.kind == "punct" and t.text in "([":
            j = pair[j] + 1
        elif t.kind == "punct" and t.text in ";,":
            return j + 1
        elif t.kind == "punct" and t.text in CLOSE:
            return j
        else:
            j += 1
    return n


def test_only(toks, pair):
    """Per token, whether only tests build it: an outer test attribute marks its item, an
    inner one (`#![cfg(test)]`) the rest of its module or block."""
    mask, stack = [False] * len(toks), []
    for i, t in enumerate(toks):
        if t.kind == "punct" and t.text in OPEN:
            stack.append(i)
        elif t.kind == "punct" and t.text in CLOSE and stack:
            stack.pop()
        a = attribute_at(toks, pair, i)
        if not a or not is_test_attribute(a[2]):
            continue
        if a[1]:
            lo, hi = (stack[-1], pair[stack[-1]]) if stack else (0, len(toks))
        else:
            lo, hi = i, item_end(toks, pair, a[0])
        mask[lo:hi] = [True] * (hi - lo)
    return mask


def attributes_before(toks, pair, i):
    """The contents of the outer attributes of the item whose keyword is toks[i]."""
    out, k = [], i - 1
    while k >= 0:
        t = toks[k].text
        if t in ("pub", "unsafe", "async", "const", "extern"):
            k -= 1
        elif t == ")" and pair.get(k, 0) > 0 and toks[pair[k] - 1].text == "pub":
            k = pair[k] - 2
        elif t == "]" and pair.get(k, 0) > 0 and toks[pair[k] - 1].text == "#":
            out.append(toks[pair[k] + 1:k])
            k = pair[k] - 2
        else:
            break
    return out


def string_value(tok):
    """The text of a string literal token (enough of Rust's escapes for a file path)."""
    s = tok.text.lstrip("bcr")
    hashes = len(s) - len(s.lstrip("#"))
    body = s[hashes + 1:len(s) - hashes - 1]
    if tok.text.lstrip("bc").startswith("r"):
        return body
    return re.sub(r"\\(.)", r"\1", body)


def use_leaves(toks, pair, i, j):
    """[(path segments, bound name, token index)] of the use tree in toks[i:j]; the name
    is None for a glob and "_" for `as _`. `a::{self, b}` binds a; a leading `::` is kept
    as a segment."""
    out = []

    def tree(k, prefix):
        segs = list(prefix)
        if k < j and toks[k].text == "::":
            segs, k = segs + ["::"], k + 1
        while k < j:
            t = toks[k]
            if t.text == "{":
                close = min(pair.get(k, j), j)
                k += 1
                while k < close:
                    k = tree(k, segs) if toks[k].text != "," else k + 1
                return close + 1
            if t.text == "*":
                out.append((segs, None, k))
                return k + 1
            if t.kind != "ident":
                return k + 1
            segs, k = segs + [t.text], k + 1
            if k < j and toks[k].text == "::":
                k += 1
                continue
            name = segs[-1]
            if name == "self":
                segs = segs[:-1]
                name = segs[-1] if segs else None
            if k + 1 < j and toks[k].text == "as":
                name, k = toks[k + 1].text, k + 2
            out.append((segs, name, k - 1))
            return k
        return k

    tree(i, [])
    return [leaf for leaf in out if leaf[0] and leaf[0] != ["::"]]


def path_at(toks, i):
    """(segments, end) of the path of two segments or more that starts at toks[i]:
    `a::b::c`, `::a::b`, `$crate::a`; None if none starts there."""
    n, prev = len(toks), toks[i - 1] if i else None
    if prev is not None and prev.text == "::":
        return None  # the rest of a path, or `<T as X>::f`'s `f`
    segs, k = [], i
    if toks[i].text == "::":
        if prev is not None and (prev.kind == "ident" or prev.text == ">"):
            return None
        segs, k = ["::"], i + 1
    while k < n and toks[k].kind == "ident":
        segs.append(toks[k].text)
        if k + 2 < n and toks[k + 1].text == "::" and toks[k + 2].kind == "ident":
            k += 2
        else:
            k += 1
            break
    named = segs[1:] if segs[:1] == ["::"] else segs
    return (segs, k) if len(named) >= 2 else None


ITEMS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}
SKIP_AFTER_ITEM = {"fn", "mut", "unsafe", "async", "extern"}


class Crate:
    """The crate under root/src, read from lib.rs: its module tree, names and every path
    in its code (refs), resolved on demand."""

    def __init__(self, root):
        self.root_dir, self.src = root, os.path.join(root, "src")
        self.root = Module(None, None)
        self.refs = []          # (file, line, scope, segs, test)
        self.arrows = []        # (file, line, from, to, test) that are no path: #[path]
        self.aliases = set()    # `extern crate self as x;` at the root: x is the crate
        self.loaded, self.loading, self.memo = set(), [], {}
        self.load(os.path.join(self.src, "lib.rs"), self.root, modrs=True)

    def load(self, path, module, modrs):
        """Read the file of MODULE (a mod.rs-like file when MODRS: its `mod x;` live beside it)."""
        real = os.path.realpath(path)
        if real in self.loading:
            return
        self.loaded.add(real)
        with open(path, encoding="utf-8") as fh:
            toks = [t for t in tokens(fh.read()) if t.kind != "comment"]
        pair = bracket_pairs(toks)
        f = Source(toks, pair, test_only(toks, pair), os.path.relpath(path, self.root_dir))
        here = os.path.dirname(path)
        mod_dir = here if modrs else os.path.join(here, os.path.basename(path)[:-3])
        self.loading.append(real)
        self.walk(f, 0, len(toks), module.scope, (mod_dir, here))
        self.loading.pop()

    def walk(self, f, lo, hi, scope, dirs):
        """Read the items, names and paths of f.toks[lo:hi], in SCOPE. DIRS: where a
        `mod x;` here looks for x's file, and what a `#[path]` here is relative to."""
        handlers = {"use": self.on_use, "mod": self.on_mod, "extern": self.on_extern,
                    "macro_rules": self.on_macro}
        i = lo
        while i < hi:
            t = f.toks[i]
            if t.kind == "ident" and t.text in handlers:
                nxt = handlers[t.text](f, i, scope, dirs)
                if nxt is not None:
                    i = nxt
                    continue
            if t.kind == "ident" and t.text in ITEMS and scope.parent is None:
                self.on_item(f, i, scope)
            if t.kind == "ident" or t.text == "::":
                p = path_at(f.toks, i)
                if p:
                    self.ref(f, i, scope, p[0])
                    i = p[1]
                    continue
            if t.kind == "punct" and t.text == "{":
                self.walk(f, i + 1, f.pair[i], Scope(scope.module, scope), dirs)
                i = f.pair[i]
            i += 1

    def ref(self, f, i, scope, segs):
        test = f.test[i] or scope.module.test
        self.refs.append((f.rel, f.toks[i].line, scope, tuple(segs), test))

    def on_use(self, f, i, scope, dirs):
        j = i + 1
        while j < len(f.toks) and f.toks[j].text != ";":
            j = f.pair[j] + 1 if f.toks[j].text in OPEN and j in f.pair else j + 1
        for segs, name, k in use_leaves(f.toks, f.pair, i + 1, j):
            b = Binding(scope, tuple(segs))
            if name is None:
                scope.globs.append(b)
            elif name != "_" and scope.names.get(name, ("",))[0] != "mod":
                scope.names[name] = ("use", b)
            self.ref(f, k, scope, segs)
        return j + 1

    def on_extern(self, f, i, scope, dirs):
        """`extern crate self as x;`: x names the crate (everywhere, when at the root)."""
        w = [t.text for t in f.toks[i + 1:i + 6]]
        if w[:2] != ["crate", "self"] or len(w) < 4 or w[2] != "as":
            return None
        scope.names[w[3]] = ("use", Binding(scope, ("crate",)))
        if scope.module is self.root:
            self.aliases.add(w[3])
        return i + 5

    def on_item(self, f, i, scope):
        k = i + 1
        while k < len(f.toks) and f.toks[k].text in SKIP_AFTER_ITEM:
            k += 1
        if k < len(f.toks) and f.toks[k].kind == "ident" and f.toks[k].text != "_":
            scope.names.setdefault(f.toks[k].text, ("item", scope.module))

    def on_macro(self, f, i, scope, dirs):
        """`macro_rules! m`: an item of its module; at the crate root if #[macro_export]."""
        if i + 2 >= len(f.toks) or f.toks[i + 1].text != "!":
            return None
        name = f.toks[i + 2].text
        scope.names.setdefault(name, ("item", scope.module))
        attrs = attributes_before(f.toks, f.pair, i)
        if any([t.text for t in a] == ["macro_export"] for a in attrs):
            self.root.scope.names.setdefault(name, ("item", scope.module))
        return None

    def on_mod(self, f, i, scope, dirs):
        """`mod x;` (its file read as module x) or `mod x { .. }` (walked as module x)."""
        toks = f.toks
        if i + 2 >= len(toks) or toks[i + 1].kind != "ident" or toks[i + 2].text not in (";", "{"):
            return None
        name = toks[i + 1].text
        child = Module(name, scope.module, f.test[i] or scope.module.test)
        scope.names[name] = ("mod", child)
        if toks[i + 2].text == "{":
            inner = os.path.join(dirs[0], name)
            self.walk(f, i + 3, f.pair[i + 2], child.scope, (inner, inner))
            return f.pair[i + 2] + 1
        attr = [a for a in attributes_before(toks, f.pair, i)
                if len(a) == 3 and a[0].text == "path" and a[1].text == "=" and a[2].kind == "str"]
        if attr:
            path = os.path.normpath(os.path.join(dirs[1], string_value(attr[0][2])))
            self.path_arrow(f, i, child, path)
        else:
            path = os.path.join(dirs[0], name + ".rs")
            if not os.path.isfile(path):
                path = os.path.join(dirs[0], name, "mod.rs")
        if os.path.isfile(path):
            self.load(path, child, modrs=bool(attr) or os.path.basename(path) == "mod.rs")
        return i + 3

    def path_arrow(self, f, i, child, path):
        """A `#[path]` file in another top-level module's folder is an arrow to that module."""
        rel = os.path.relpath(path, self.src)
        owner = module_of(rel) if not rel.startswith("..") else None
        if owner and child.top and owner != child.top:
            self.arrows.append((f.rel, f.toks[i].line, child.top, owner, f.test[i] or child.test))

    # ------------------------------------------------------------------- resolution

    def resolve(self, scope, segs):
        """(the top-level modules the path SEGS, read in SCOPE, passes through: each module
        it enters, each `use` it follows and the module its item is defined in; the
        module the path names, or None when it names an item or leaves the crate)."""
        if segs[0] == "::":  # the extern prelude: the crate only through an alias
            if segs[1] not in self.aliases:
                return set(), None
            segs = ("crate",) + tuple(segs[2:])
        tops, cur = set(), None
        for k, seg in enumerate(segs):
            if k == 0:
                e = self.head(scope, seg)
            elif seg == "super":
                e = ("mod", cur.parent) if cur.parent else None
            else:
                e = self.lookup(cur, seg, {cur})
            if e is None:
                return tops - {None}, None
            kind, val = e
            if kind == "use":
                t, val = self.binding(val)
                tops |= t
            elif kind == "item":
                tops.add(val.top)
                val = None
            if val is None:
                return tops - {None}, None
            cur = val
            tops.add(cur.top)
        return tops - {None}, cur

    def head(self, scope, seg):
        """What the first segment of a path names in SCOPE: a keyword, a name of the scope
        or of those around it, a name their globs bring in, an alias of the crate."""
        if seg in ("crate", "$crate"):
            return ("mod", self.root)
        if seg == "self":
            return ("mod", scope.module)
        if seg == "super":
            return ("mod", scope.module.parent) if scope.module.parent else None
        s = scope
        while s:
            if seg in s.names:
                return s.names[seg]
            s = s.parent
        s = scope
        while s:
            for g in s.globs:
                e = self.in_glob(g, seg, {scope.module})
                if e:
                    return e
            s = s.parent
        return ("mod", self.root) if seg in self.aliases else None

    def lookup(self, module, name, seen):
        """What NAME is in MODULE: one of its names, or one a glob of it imports."""
        e = module.scope.names.get(name)
        if e:
            return e
        for g in module.scope.globs:
            e = self.in_glob(g, name, seen)
            if e:
                return e
        return None

    def in_glob(self, glob, name, seen):
        target = self.binding(glob)[1]
        if target is None or target in seen:
            return None
        return self.lookup(target, name, seen | {target})

    def binding(self, b):
        """resolve() of a `use` binding, once (a cycle of bindings resolves to nothing)."""
        key = id(b)
        if key not in self.memo:
            self.memo[key] = (set(), None)
            self.memo[key] = self.resolve(b.scope, b.segs)
        return self.memo[key]

    # ------------------------------------------------ what no `mod` of lib.rs reaches

    def load_strays(self):
        """Read each .rs file under src/ that no `mod` declares (rustc never builds it) as
        the module its path names, so it is still checked. Returns their paths."""
        strays = []
        for dirpath, dirs, files in os.walk(self.src):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, self.src)
                if not name.endswith(".rs") or rel in EXEMPT or os.path.realpath(path) in self.loaded:
                    continue
                strays.append(os.path.join("src", rel))
                parts = rel[:-3].split(os.sep)
                parts = parts[:-1] if parts[-1] == "mod" else parts
                module = self.root
                for part in parts:
                    e = module.scope.names.get(part)
                    module = e[1] if e and e[0] == "mod" else Module(part, module)
                self.load(path, module, modrs=name == "mod.rs")
        return strays

    def load_integration_tests(self):
        """Read tests/*.rs (each a crate of its own, built only by tests): their
        `gradcomp::` paths are test-only arrows from "tests"."""
        tests = os.path.join(self.root_dir, "tests")
        for name in sorted(os.listdir(tests)) if os.path.isdir(tests) else []:
            if name.endswith(".rs"):
                module = Module(None, None, test=True, top="tests")
                module.scope.names["gradcomp"] = ("mod", self.root)
                self.load(os.path.join(tests, name), module, modrs=True)


def module_of(rel):
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def arrows(root, with_tests=False):
    """(every (file, line, from-module, to-module, test-only?) of the crate under root
    (WITH_TESTS: and of tests/), the src/ files no `mod` declares, the crate's top-level
    modules)."""
    crate = Crate(root)
    strays = crate.load_strays()
    if with_tests:
        crate.load_integration_tests()
    out = list(crate.arrows)
    for rel, line, scope, segs, test in crate.refs:
        me = scope.module.top
        if me is None:
            continue  # the root's own paths: lib.rs only declares and re-exports
        tops, _ = crate.resolve(scope, segs)
        out += [(rel, line, me, to, test) for to in sorted(tops - {me})]
    tops = {e[1].name for e in crate.root.scope.names.values() if e[0] == "mod"}
    return out, strays, tops


# ----------------------------------------------------------------- the check and its docs

def doc_table(path):
    """{module: (layer, set of used modules)} from the "## Layers" table of `path`."""
    rows, in_sec = {}, False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("## "):
                in_sec = line.strip() == "## Layers"
                continue
            m = re.match(r"\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|([^|]*)\|", line) if in_sec else None
            if m:
                used = {u.strip() for u in m.group(3).split(",") if u.strip()}
                rows[m.group(2)] = (int(m.group(1)), used)
    return rows


def doc_mismatches(path, rank, arrows_used):
    """One line per difference between the docs' table and LAYERS / the arrows: the
    layer arrows and the test-only ones that point down."""
    rows = doc_table(path)
    uses = {m: set() for m in rank}
    for me, to in arrows_used:
        uses[me].add(to)
    out = []
    for m in rank:
        if m not in rows:
            out.append(f"{path}: module {m} has no row in the 'Layers' table")
            continue
        layer, used = rows[m]
        if layer != rank[m]:
            out.append(f"{path}: {m} is layer {layer} in the table, {rank[m]} in LAYERS")
        if used != uses[m]:
            extra, missing = sorted(used - uses[m]), sorted(uses[m] - used)
            out.append(f"{path}: {m}'s 'uses' differs from the code: listed but unused "
                       f"{extra or '-'}, used but not listed {missing or '-'}")
    for m in sorted(set(rows) - set(rank)):
        out.append(f"{path}: row {m} is not a module in LAYERS")
    return out


def print_verbose(tests, allowed, strays):
    """--verbose: the test-only arrows (with where each is written) and what else is
    not a plain layer arrow."""
    where = defaultdict(list)
    for path, n, me, to, _ in tests:
        where[(me, to)].append(f"{path}:{n}")
    print(f"test-only arrows (not layer arrows): {len(tests)} paths, {len(where)} arrows")
    for (me, to), locs in sorted(where.items()):
        locs.sort(key=lambda w: (w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[1])))
        more = f", ... ({len(locs) - 3} more)" if len(locs) > 3 else ""
        print(f"  {me:9s} -> {to:9s} {len(locs):4d}  {', '.join(locs[:3])}{more}")
    for line in allowed:
        print(f"allowed upward arrow: {line}")
    for s in strays:
        print(f"not declared by any `mod` (rustc does not build it; checked by its path): {s}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--graph", action="store_true", help="print the arrows and their counts")
    ap.add_argument("--verbose", action="store_true",
                    help="--graph, and the test-only arrows, listed apart")
    a = ap.parse_args()
    t0 = time.monotonic()
    rank = {m: i for i, m in enumerate(LAYERS)}
    src = os.path.join(a.root, "src")
    found = {module_of(e) for e in os.listdir(src) if e.endswith(".rs") or os.path.isdir(os.path.join(src, e))}
    all_arrows, strays, declared = arrows(a.root, with_tests=a.verbose)
    missing = sorted((found | declared) - set(rank) - {"lib", "main"})
    if missing:
        print(f"check_layers: module(s) {', '.join(missing)} not in LAYERS of {__file__}: "
              "add each at its layer (and to docs/architecture.md, 'Layers')", file=sys.stderr)
        return 2
    bad, allowed, tests, count, used = [], [], [], Counter(), {}
    for path, n, me, to, test in all_arrows:
        if test or me not in rank or to not in rank:
            tests += [(path, n, me, to, test)] if test else []
            if test and me in rank and to in rank and rank[to] < rank[me]:
                used[(me, to)] = True  # the table's "uses": what tests use too, if below
            continue
        used[(me, to)] = True
        count[(me, to)] += 1
        if rank[to] >= rank[me]:
            line = (f"{path}:{n}: {me} (layer {rank[me]}) uses {to} (layer {rank[to]}): "
                    "imports must point down; move the item to a lower layer or the use to a higher one")
            (allowed if (me, to) in ALLOW else bad).append(line)
    doc = os.path.join(a.root, "docs", "architecture.md")
    upward = len(bad)
    bad += doc_mismatches(doc, rank, used)
    if a.graph or a.verbose:
        for (me, to), k in sorted(count.items(), key=lambda x: (rank[x[0][0]], rank[x[0][1]])):
            print(f"{me:9s} -> {to:9s} {k:4d}")
    if a.verbose:
        print_verbose(tests, allowed, strays)
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"check_layers: {upward} upward arrow(s), {len(bad) - upward} difference(s) "
              "between the docs' table and the code", file=sys.stderr)
        return 1
    print(f"check_layers: {sum(count.values())} paths, {len(count)} arrows between "
          f"{len(LAYERS)} modules, all pointing down ({len(tests)} test-only paths apart); "
          f"docs/architecture.md's table matches ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
