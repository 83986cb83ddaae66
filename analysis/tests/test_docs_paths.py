"""Issues 50, 51 and 53: the docs name code, commands and wire formats that exist as written.

Checked mechanically against the tree, never against a copy of the docs:
- every repository path (`src/...`, `tests/...`, `scripts/...`, ...) that docs/architecture.md,
  docs/methods.md, docs/device.md and README.md name exists;
- every Rust path (`module::item`, `Type::member`) those docs name resolves in src/: its
  module segments to a file or folder, its items to a definition there (`kernels::rng_for`
  named a file that had moved to src/measure/rng.rs);
- docs/architecture.md's module table names every non-test file under each `src/X/` it
  describes (src/measure/pages.rs and dilation.rs were missing, src/sim/ listed 5 of its
  files), the kernels file it lists exists, and its rule for where compressor tests live
  matches the tree;
- docs/methods.md's summary table gives each method the rounds and aggregation its source
  declares (`fn rounds`, `fn aggregation`), and a ring method's row names no other collective
  (Marsit's scale rides in its ring message);
- every `make TARGET` the README shows is a Makefile target; every Open MPI `mpirun -np N`
  with N > 2 in the README, methods.md and device.md carries `--oversubscribe` (a 2-core machine refuses
  it otherwise: "not enough slots"); no README command starts with `sudo` (a root machine may have none);
- every flag a README command passes to `gradcomp SUBCOMMAND` is in that subcommand's
  `--help` (needs the release binary: `make test` builds it first).
"""

import glob
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SRC = os.path.join(ROOT, "src")
BIN = os.path.join(ROOT, "target", "release", "gradcomp")
DOCS = ("docs/architecture.md", "docs/methods.md", "docs/device.md", "README.md")
TOP_DIRS = ("src", "tests", "scripts", "analysis", "bench-configs", "slurm", "tools", "examples")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The text under `heading` (a whole heading line) up to the next heading of its level."""
    level = heading.split(" ", 1)[0]
    start = text.index("\n" + heading + "\n") + 1
    m = re.compile(r"^" + re.escape(level) + r" ", re.M).search(text, start + len(heading))
    return text[start : m.start() if m else len(text)]


# ------------------------------------------------------------------ repository paths


def repo_paths(text):
    """Paths into the repository's own folders that `text` names (not URLs or foreign trees:
    `aten/src/...` is preceded by a `/`)."""
    pat = r"(?<![\w/.:-])((?:%s)/[A-Za-z0-9_./*-]*)" % "|".join(map(re.escape, TOP_DIRS))
    # A glob (`slurm/submit-*.sh`) or a placeholder is not a path; sentence ends are not part of one.
    return sorted({p.rstrip(".-") for p in re.findall(pat, text) if "*" not in p})


def missing_paths(text):
    return [p for p in repo_paths(text) if not os.path.exists(os.path.join(ROOT, p))]


@pytest.mark.parametrize("doc", DOCS)
def test_every_repository_path_exists(doc):
    assert missing_paths(read(doc)) == [], doc


def test_a_moved_path_is_caught():
    assert missing_paths("planners (`src/engine/planner.rs`)") == ["src/engine/planner.rs"]
    assert missing_paths("see aten/src/ATen/native/cuda/TensorTopK.cu and src/lib.rs") == []


# ------------------------------------------------------------------ Rust paths

_RS_FILES = None


def rs_files():
    global _RS_FILES
    if _RS_FILES is None:
        _RS_FILES = sorted(glob.glob(os.path.join(SRC, "**", "*.rs"), recursive=True))
    return _RS_FILES


def module_files(segments):
    """The files of module `a::b::...` anywhere under src/ (a path may start at any module:
    `exec::DeviceCharges` is engine's exec): `.../a/b.rs` or `.../a/b/mod.rs`, plus the
    files of its folder `.../a/b/` (its submodules, tests included)."""
    if segments == ["crate"] or segments == ["gradcomp"]:
        return [os.path.join(SRC, "lib.rs")]
    segs = [s for s in segments if s not in ("crate", "gradcomp")]
    tail = os.sep + os.path.join(*segs)
    found = []
    for f in rs_files():
        stem = f[:-3]
        if stem.endswith(tail) or stem.endswith(tail + os.sep + "mod"):
            found.append(f)
            folder = stem[:-4] if stem.endswith(os.sep + "mod") else stem
            found += [g for g in rs_files() if g.startswith(folder + os.sep) and g != f]
    return sorted(set(found))


def defines(files, name):
    """Whether `files` define `name`: an item, a method, a `mod` or an enum variant."""
    item = re.compile(
        r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+%s\b|"
        r"^\s*%s\s*(?:[({,]|$)|\bpub use [^;]*\b%s\b|"
        r"^\s*(?:pub(?:\([^)]*\))?\s+)?%s\s*:\s" % (name, name, name, name),
        re.M,
    )
    for f in files:
        with open(f, encoding="utf-8") as h:
            if item.search(h.read()):
                return True
    return False


def type_files(name):
    pat = re.compile(r"\b(?:struct|enum|trait|type)\s+%s\b" % name)
    out = []
    for f in rs_files():
        with open(f, encoding="utf-8") as h:
            if pat.search(h.read()):
                out.append(f)
    return out


def unresolved(token):
    """Why `token` (`a::b::C::d`) does not resolve in src/, or None."""
    segs = token.split("::")
    i = 0
    while i < len(segs) and segs[i][:1].islower():
        i += 1
    # Leading lowercase segments: the longest prefix that is a module; the rest are items.
    for cut in range(i, 0, -1):
        files = module_files(segs[:cut])
        if files:
            rest = segs[cut:]
            break
    else:
        if not segs[0][:1].isupper():
            return f"{token}: no module {segs[0]} under src/"
        files, rest = type_files(segs[0]), segs[1:]
        if not files:
            return f"{token}: no type {segs[0]} in src/"
    for name in rest:
        if not defines(files, name):
            return f"{token}: {name} is not defined in {', '.join(os.path.relpath(f, ROOT) for f in files[:3])}"
        if name[:1].isupper():
            # A type: its members are in the files that define it, or anywhere its impls are.
            files = type_files(name) or files
            files = sorted(set(files) | {f for f in rs_files() if _impls(f, name)})
        else:
            nested = module_files(segs[: segs.index(name) + 1])
            if nested:
                files = nested
    return None


def _impls(path, name):
    with open(path, encoding="utf-8") as h:
        return re.search(r"\bimpl(?:<[^>]*>)?\s+(?:\w+\s+for\s+)?%s\b" % name, h.read()) is not None


RUST_PATH = re.compile(r"(?<![\w:.])([A-Za-z_]\w*(?:::[A-Za-z_]\w*)+)")


def rust_paths(text):
    # Only inside code spans: prose never spells Rust paths.
    spans = code_spans(text)
    return sorted({t for s in spans for t in RUST_PATH.findall(s)})


@pytest.mark.parametrize("doc", ("docs/architecture.md", "docs/methods.md", "docs/device.md"))
def test_every_rust_path_resolves(doc):
    bad = [why for t in rust_paths(read(doc)) if (why := unresolved(t))]
    assert bad == [], doc


def test_adding_a_method_names_helpers_that_exist():
    recipe = section(read("docs/methods.md"), "## Adding a method")
    tokens = rust_paths(recipe)
    assert "measure::rng::rng_for" in tokens
    assert [why for t in tokens if (why := unresolved(t))] == []


def test_a_moved_symbol_is_caught():
    assert unresolved("kernels::rng_for") is not None
    assert unresolved("measure::rng::rng_for") is None
    assert unresolved("measure::rng::no_such_fn") is not None
    assert unresolved("Compressor::check_share") is None
    assert unresolved("Compressor::no_such_method") is not None
    assert unresolved("engine::device::Device::pause") is None


# ------------------------------------------------------------------ architecture's module table


def module_rows():
    """{`src/X/`: text} from docs/architecture.md's "Modules" table: for each module folder,
    its row's path and text together with those of the rows of its own files
    (`src/bench/harness.rs`) and of its parent file (`src/netmodel.rs` for `src/netmodel/`)."""
    table = section(read("docs/architecture.md"), "## Modules")
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*`(src/[\w/.]+)`\s*\|(.*)\|\s*$", line)
        if not m:
            continue
        path, text = m.group(1), f"`{os.path.basename(m.group(1).rstrip('/'))}` " + m.group(2)
        if path.endswith("/"):
            folder = path
        elif os.path.isdir(os.path.join(ROOT, path[:-3])):
            folder = path[:-3] + "/"
        else:
            folder = os.path.dirname(path) + "/"
        if folder == "src/":
            continue
        rows[folder] = rows.get(folder, "") + " " + text
    return rows


def unnamed_files(folder, row):
    """Non-test files under `folder` (any depth) that `row` does not name: by relative path, by
    file name or, at the folder's top, by module name (`select` for select.rs). A `mod.rs` is
    the row's own subject; a `tests.rs` and anything under a `tests/` folder are tests."""
    out = []
    base = os.path.join(ROOT, folder)
    for f in sorted(glob.glob(os.path.join(base, "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(f, base)
        parts = rel.split(os.sep)
        if parts[-1] in ("tests.rs", "mod.rs") or "tests" in parts[:-1]:
            continue
        names = {f"`{rel}`", f"`{parts[-1]}`", folder + rel}
        if len(parts) == 1:
            names.add(f"`{parts[0][:-3]}`")
        if not any(n in row for n in names):
            out.append(folder + rel)
    return out


def test_the_module_table_names_every_file():
    rows = module_rows()
    top = sorted(
        d + "/" for d in (os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(SRC, "*"))) if os.path.isdir(os.path.join(ROOT, d))
    )
    assert sorted(rows) == top
    bad = [f for d, row in rows.items() for f in unnamed_files(d, row)]
    assert bad == []


def test_an_unnamed_file_is_caught():
    assert unnamed_files("src/measure/", "`stats.rs`, `stop.rs`") != []
    assert "src/measure/pages.rs" in unnamed_files("src/measure/", "`stats.rs`")


def test_the_compressor_test_rule_matches_the_tree():
    """The row says which compress files keep their tests in `x/tests.rs`; the others keep a
    `mod tests` in the file (or have none)."""
    row = module_rows()["src/compress/"]
    m = re.search(r"in `x/tests\.rs`: ([^;.]*)", row)
    assert m, "the src/compress/ row names the files whose tests are in x/tests.rs"
    named = set(re.findall(r"`(\w+)`", m.group(1)))
    actual = {os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(SRC, "compress", "*", "tests.rs"))}
    assert named == actual
    # The shared kernels it names are files of src/compress/.
    kernels = re.search(r"shared kernels \(([^)]*)\)", row).group(1)
    for name in re.findall(r"`(\w+)`", kernels):
        assert os.path.exists(os.path.join(SRC, "compress", name + ".rs")), name


# ------------------------------------------------------------------ methods.md's summary


def declared(method_file):
    """(rounds, aggregation) a compressor's source declares: `fn rounds` (default 1) and
    `fn aggregation`'s `Aggregation::X`."""
    text = read(method_file)
    rounds = re.search(r"fn rounds\(&self\) -> usize \{\s*(\d+)\s*\}", text)
    agg = re.search(r"fn aggregation\(&self\) -> Aggregation \{\s*Aggregation::(\w+)\s*\}", text)
    return (int(rounds.group(1)) if rounds else 1), (agg.group(1) if agg else None)


AGG_WORDS = {"AllReduce": "allreduce", "AllGather": "allgather", "Ring": "ring"}


def summary_rows():
    table = section(read("docs/methods.md"), "## Summary")
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*`([\w-]+)`\s*\|([^|]*)\|\s*(\d+)\s*\|([^|]*)\|", line)
        if m:
            rows[m.group(1)] = (m.group(2).strip(), int(m.group(3)), m.group(4).strip())
    return rows


@pytest.mark.parametrize("method", ["ssgd", "topk", "powersgd", "acpsgd", "marsit", "sketch", "qsgd", "signsgd"])
def test_summary_rounds_and_aggregation_match_the_source(method):
    rounds, agg = declared(f"src/compress/{method}.rs")
    assert agg, f"src/compress/{method}.rs: no plain `fn aggregation` found"
    aggregation, doc_rounds, _ = summary_rows()[method]
    assert doc_rounds == rounds, method
    assert aggregation.split()[0].rstrip(",;") == AGG_WORDS[agg], (method, aggregation)
    if agg == "Ring":
        # A ring method's whole wire is its ring message: no other collective in its row.
        assert "allreduce" not in aggregation and "allgather" not in aggregation, aggregation


def test_sketch_wire_counts_both_rounds():
    """Round 0 all-reduces `r·c` floats, round 1 the `k` candidates' values (sketch.rs
    `wire_capacity`); the summary's bytes carry both."""
    src = read("src/compress/sketch.rs")
    assert re.search(r"\(Some\(sl\), 0\) => self\.rows \* sl\.s\.c", src)
    assert re.search(r"\(Some\(sl\), 1\) => sl\.s\.k", src)
    _, _, wire = summary_rows()["sketch"]
    assert "4·sketch_rows·c + 4k" in wire


# ------------------------------------------------------------------ README commands


def shell_lines(text):
    """Lines of the fenced ```sh blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def code_spans(text):
    """Inline code spans outside fenced blocks, whitespace collapsed (a span may wrap)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", text)]


def test_make_targets_exist():
    targets = set(re.findall(r"^([a-z][a-z-]*):", read("Makefile"), re.M))
    readme = read("README.md")
    commands = " ; ".join(shell_lines(readme) + code_spans(readme))
    named = set(re.findall(r"(?<![\w-])make\s+([a-z][a-z-]*)", commands))
    assert named and named - targets == set(), named - targets


def mpirun_lacking_oversubscribe(lines):
    bad = []
    for c in lines:
        for m in re.finditer(r"\bmpirun(?![.\w])(.*?)-np (\d+)", c):
            if int(m.group(2)) > 2 and "--oversubscribe" not in m.group(1):
                bad.append(c)
    return bad


def test_mpirun_beyond_two_ranks_oversubscribes():
    readme = read("README.md")
    lines = shell_lines(readme) + code_spans(readme)
    what_to_run = section(read("docs/methods.md"), "## What to run")
    lines += code_spans(what_to_run)
    device = read("docs/device.md")
    lines += shell_lines(device) + code_spans(device)
    assert any("-np 4" in c for c in lines)
    assert mpirun_lacking_oversubscribe(lines) == []
    # MPICH needs no flag (and Open MPI's would be refused by it).
    assert mpirun_lacking_oversubscribe(["mpirun -np 4 x"]) == ["mpirun -np 4 x"]
    assert mpirun_lacking_oversubscribe(["mpirun.mpich -np 4 x", "mpirun -np 2 x"]) == []


def test_readme_commands_need_no_sudo():
    readme = read("README.md")
    assert [c for c in shell_lines(readme) if c.startswith("sudo ")] == []


def gradcomp_invocations(text):
    """(subcommand, [flags]) of every gradcomp command the README shows: in ```sh blocks, in
    code spans (`gradcomp simulate --model ...`, `e2e --min-time 0.3`), and after netlab's `--`."""
    subs = ("micro-comm", "micro-compress", "micro", "e2e", "simulate", "choose", "fit", "devcost", "models", "converge", "run")
    out = []
    for c in shell_lines(text) + code_spans(text):
        c = c.replace("target/release/gradcomp", "gradcomp")
        m = re.search(r"(?:\bgradcomp |scripts/netlab\.sh run (?:--np \d+ )?-- |^)(%s)\b(.*)" % "|".join(map(re.escape, subs)), c)
        if not m or (m.start() == 0 and " --" not in c and not c.startswith("gradcomp")):
            continue
        flags = re.findall(r"(?<!\S)(--[a-z][a-z0-9-]*)", m.group(2))
        out.append((m.group(1), flags))
    return out


def help_flags(sub):
    r = subprocess.run([BIN, sub, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.stdout))


def unknown_flags(text):
    """`SUBCOMMAND --flag` for every flag a gradcomp command in `text` passes that the
    subcommand's `--help` does not list."""
    helps, bad = {}, []
    for sub, flags in gradcomp_invocations(text):
        known = helps.setdefault(sub, help_flags(sub))
        bad += [f"{sub} {f}" for f in flags if f not in known]
    return bad


@pytest.mark.skipif(not os.access(BIN, os.X_OK), reason="needs target/release/gradcomp (make test builds it)")
def test_readme_flags_exist():
    readme = read("README.md")
    assert len(gradcomp_invocations(readme)) >= 15
    assert unknown_flags(readme) == []
    # A flag a subcommand lacks is caught, in a block, a code span and after netlab's `--`.
    wrong = (
        "```sh\nmpirun -np 1 target/release/gradcomp micro --shape 4 --no-such-flag\n```\n"
        "`e2e --model resnet50 --max-bytes 1MiB` and\n```sh\nscripts/netlab.sh run -- micro-comm --methods x\n```\n"
    )
    assert unknown_flags(wrong) == ["micro --no-such-flag", "micro-comm --methods", "e2e --max-bytes"]


# Flags of other tools the README's code spans name, each checked in the file that parses it;
# mpirun's and cargo's own are taken as they are.
OTHER_FLAGS = {"--latex": "analysis/gradcomp_analysis/__main__.py", "--np": "scripts/netlab.sh"}
EXTERNAL_FLAGS = {"--bind-to", "--oversubscribe", "--release"}


def unknown_span_flags(text):
    """Flags in `text`'s code spans that no gradcomp subcommand, and no tool in OTHER_FLAGS or
    EXTERNAL_FLAGS, takes."""
    subs = ("micro-comm", "micro-compress", "micro", "e2e", "simulate", "choose", "fit", "devcost", "models", "converge", "run")
    known = set().union(*(help_flags(s) for s in subs)) | EXTERNAL_FLAGS
    known |= {f for f, src in OTHER_FLAGS.items() if f in read(src)}
    spans = code_spans(text)
    return sorted({f for s in spans for f in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", s)} - known)


@pytest.mark.skipif(not os.access(BIN, os.X_OK), reason="needs target/release/gradcomp (make test builds it)")
def test_readme_flags_in_prose_exist():
    assert unknown_span_flags(read("README.md")) == []
    assert unknown_span_flags("with `--case-timeout 10` or `--no-such-flag`") == ["--no-such-flag"]
