#!/usr/bin/env python3
"""The layering check of docs/architecture.md ("Layers"): every `crate::X` path in
src/ (code, not comments) must name a module of a lower layer than the file's own
top-level module, so imports only point down and no cycle can form across modules.

    python3 scripts/check_layers.py [--root DIR] [--graph]

Exit 0 when every arrow points down and the "Layers" table of docs/architecture.md
lists, per module, its layer and exactly the modules it uses; 1 with one line per
upward arrow (file:line, the two modules and their layers) or per table row that
differs from the code; 2 when a top-level module is missing from LAYERS (add it at the
layer it belongs to, here and in docs/architecture.md). `--graph` prints the arrows
with their counts.
"""

import argparse
import os
import re
import sys
from collections import Counter

# Bottom to top: a module may use the modules listed before it, never those after it.
# Keep in step with the table in docs/architecture.md, "Layers".
LAYERS = [
    "units",
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
# `crate::Error` / `crate::Result` are the lib root's re-exports of `error`.
ALIASES = {"Error": "error", "Result": "error"}
# The crate root (lib.rs) declares the modules; main.rs is the binary on top of them.
EXEMPT = {"lib.rs", "main.rs"}

PATH = re.compile(r"\bcrate::(\w+)")


# A char literal: 'x', '\'', '"', '\n', '\x7f', '\u{1F600}' (a lifetime or label, 'a, is not one).
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])'")
# The start of a raw (byte) string: r"..." or r#"..."# (as many # to close as to open).
RAW = re.compile(r'b?r(#*)"')


def code_lines(text):
    """(line number, code) with comments (//, doc comments, nested /* */) and string and
    char literals blanked, so a path in a message or a doc link is not an import. Strings
    may span lines and hold escaped quotes ("a\\"b"); raw strings (r"C:\\", r#"..."#) have no
    escapes; a quote in a char literal ('"') opens no string."""
    out, i, n = [], 0, len(text)

    def blank(k):
        """Blank text[i:k] (newlines kept, so line numbers hold) and move to k."""
        nonlocal i
        out.append("".join(c if c == "\n" else " " for c in text[i:k]))
        i = k

    while i < n:
        c = text[i]
        prev = text[i - 1] if i else ""
        if text.startswith("//", i):
            end = text.find("\n", i)
            blank(n if end < 0 else end)
        elif text.startswith("/*", i):
            depth, k = 1, i + 2
            while k < n and depth:
                if text.startswith("/*", k):
                    depth, k = depth + 1, k + 2
                elif text.startswith("*/", k):
                    depth, k = depth - 1, k + 2
                else:
                    k += 1
            blank(k)
        elif c in "rb" and not (prev.isalnum() or prev == "_") and RAW.match(text, i):
            m = RAW.match(text, i)
            end = text.find('"' + m.group(1), m.end())
            blank(n if end < 0 else end + 1 + len(m.group(1)))
        elif c == '"':
            k = i + 1
            while k < n and text[k] != '"':
                k += 2 if text[k] == "\\" else 1
            blank(min(k + 1, n))
        elif c == "'" and CHAR.match(text, i):
            blank(CHAR.match(text, i).end())
        else:
            out.append(c)
            i += 1
    yield from enumerate("".join(out).split("\n"), 1)


def module_of(rel):
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def arrows(root):
    """Every (file, line, from-module, to-module) under root/src."""
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)
            if rel in EXEMPT:
                continue
            me = module_of(rel)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for n, code in code_lines(text):
                for m in PATH.finditer(code):
                    to = ALIASES.get(m.group(1), m.group(1))
                    if to != me:
                        yield os.path.join("src", rel), n, me, to


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


def doc_mismatches(path, rank, count):
    """One line per difference between the docs' table and LAYERS / the arrows."""
    rows = doc_table(path)
    uses = {m: set() for m in rank}
    for me, to in count:
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--graph", action="store_true", help="print the arrows and their counts")
    a = ap.parse_args()
    rank = {m: i for i, m in enumerate(LAYERS)}
    src = os.path.join(a.root, "src")
    found = {module_of(e) for e in os.listdir(src) if e.endswith(".rs") or os.path.isdir(os.path.join(src, e))}
    missing = sorted(found - set(rank) - {"lib", "main"})
    if missing:
        print(f"check_layers: module(s) {', '.join(missing)} not in LAYERS of {__file__}: "
              "add each at its layer (and to docs/architecture.md, 'Layers')", file=sys.stderr)
        return 2
    bad, count = [], Counter()
    for path, n, me, to in arrows(a.root):
        if to not in rank:
            continue  # not a module (a macro or item of the root)
        count[(me, to)] += 1
        if rank[to] >= rank[me]:
            bad.append(f"{path}:{n}: {me} (layer {rank[me]}) uses {to} (layer {rank[to]}): "
                       "imports must point down; move the item to a lower layer or the use to a higher one")
    doc = os.path.join(a.root, "docs", "architecture.md")
    upward = len(bad)
    bad += doc_mismatches(doc, rank, count)
    if a.graph:
        for (me, to), k in sorted(count.items(), key=lambda x: (rank[x[0][0]], rank[x[0][1]])):
            print(f"{me:9s} -> {to:9s} {k:4d}")
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print(f"check_layers: {upward} upward arrow(s), {len(bad) - upward} difference(s) "
              "between the docs' table and the code", file=sys.stderr)
        return 1
    print(f"check_layers: {sum(count.values())} paths, {len(count)} arrows between "
          f"{len(LAYERS)} modules, all pointing down; docs/architecture.md's table matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
