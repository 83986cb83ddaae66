"""scripts/check_layers.py: the repository passes, and a tree with an upward import, a
module missing from the layer list, or a docs table that differs from the code fails;
so does each way around a line scan (issue 51 item 2), in a small synthetic crate, while
test-only arrows are listed apart and do not count."""
import importlib.util
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)],
                          capture_output=True, text=True)


def copy_tree(tmp_path):
    shutil.copytree(ROOT / "src", tmp_path / "src")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs")
    return tmp_path


def test_the_repository_points_down():
    p = check(ROOT)
    assert p.returncode == 0, p.stderr
    assert "all pointing down" in p.stdout


def test_an_upward_import_fails_with_its_line(tmp_path):
    root = copy_tree(tmp_path)
    f = root / "src" / "measure" / "stats.rs"
    f.write_text(f.read_text() + "\nfn up() { let _ = crate::bench::check::x; }\n")
    p = check(root)
    assert p.returncode == 1
    layer = LAYERS.index("measure")
    assert "src/measure/stats.rs:" in p.stderr and f"measure (layer {layer}) uses bench" in p.stderr


def test_comments_and_strings_are_not_imports(tmp_path):
    root = copy_tree(tmp_path)
    f = root / "src" / "measure" / "stats.rs"
    f.write_text(f.read_text() + '\n/// see [`crate::bench`]\nconst S: &str = "crate::bench";\n')
    assert check(root).returncode == 0


def test_a_module_without_a_layer_is_a_usage_error(tmp_path):
    root = copy_tree(tmp_path)
    (root / "src" / "newthing.rs").write_text("pub fn f() {}\n")
    p = check(root)
    assert p.returncode == 2 and "newthing" in p.stderr


def test_the_docs_table_must_match_the_code(tmp_path):
    root = copy_tree(tmp_path)
    doc = root / "docs" / "architecture.md"
    text = doc.read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {LAYERS.index('netmodel')} | `netmodel` |"))
    doc.write_text(text.replace(row, row.replace("| measure, record |", "| measure, record, comm |")))
    p = check(root)
    assert p.returncode == 1
    assert "netmodel's 'uses' differs from the code" in p.stderr and "['comm']" in p.stderr


# Issue 51 item 2: the check reads a real parse. Each bypass below, in a small crate of
# the 17 modules (each src/<m>.rs empty unless the case writes it), passed the line
# scanner before it (its `crate::X` regex saw no upward path, or a path in the wrong
# module); now each fails with the upward arrow's file and line.

BENCH = """pub mod check { pub fn x() {} }
pub mod table { pub fn y() {} }
pub struct Thing;
pub fn f() {}
"""
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
CL = importlib.util.module_from_spec(spec)
spec.loader.exec_module(CL)
LAYERS = CL.LAYERS


def synthetic(tmp_path, files, lib="", uses=None):
    """A crate under tmp_path: FILES ({path under src: text}; bench.rs is BENCH unless
    given), lib.rs declaring the 17 modules then LIB, and docs/architecture.md's table
    with USES ({module: "a, b"}) as its "uses" column."""
    src = tmp_path / "src"
    files = {"bench.rs": BENCH, **files}
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    for m in LAYERS:
        if not (src / f"{m}.rs").exists() and not (src / m / "mod.rs").exists():
            (src / f"{m}.rs").write_text("")
    (src / "lib.rs").write_text("".join(f"pub mod {m};\n" for m in LAYERS) + lib)
    rows = "".join(f"| {i} | `{m}` | {(uses or {}).get(m, '')} | |\n" for i, m in enumerate(LAYERS))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "## Layers\n\n| layer | module | uses | what |\n|---|---|---|---|\n" + rows)
    return tmp_path


def up(where, me="measure", to="bench"):
    layer = {m: i for i, m in enumerate(LAYERS)}
    return f"{where}: {me} (layer {layer[me]}) uses {to} (layer {layer[to]})"


def test_the_synthetic_crate_passes(tmp_path):
    p = check(synthetic(tmp_path, {"measure.rs": "use crate::units;\npub fn g() { units::h() }\n",
                                   "units.rs": "pub fn h() {}\n"}, uses={"measure": "units"}))
    assert p.returncode == 0, p.stderr


BYPASSES = {
    "grouped": ({"measure.rs": "use crate::{bench::{check::x, table as t}};\n"},
                "", None, ["src/measure.rs:1"]),
    "grouped over lines": ({"measure.rs": "use crate::{\n    units,\n    bench::{self, check},\n};\n"},
                           "", None, ["src/measure.rs:3"]),
    "group of self as an alias": ({"measure.rs": "use crate::{self as gc};\n"
                                                 "pub fn g() { gc::bench::f() }\n"},
                                  "", None, ["src/measure.rs:2"]),
    "super chain in a use": ({"measure/mod.rs": "mod inner;\n",
                              "measure/inner.rs": "use super::super::bench::Thing;\n"},
                             "", None, ["src/measure/inner.rs:1"]),
    "super chain in an expression": ({"measure/mod.rs": "pub mod a;\n", "measure/a/mod.rs": "mod b;\n",
                                      "measure/a/b.rs": "fn g() {\n    super::super::super::bench::f();\n}\n"},
                                     "", None, ["src/measure/a/b.rs:2"]),
    "use crate as": ({"measure.rs": "use crate as gc;\npub fn g() { gc::bench::f() }\n"},
                     "", None, ["src/measure.rs:2"]),
    "extern crate self at the root": ({"measure.rs": "pub fn g() {\n    gc::bench::f();\n"
                                                     "    ::gc::bench::check::x();\n}\n"},
                                      "extern crate self as gc;\n", None,
                                      ["src/measure.rs:2", "src/measure.rs:3"]),
    "extern crate self in the module": ({"measure.rs": "extern crate self as me;\nuse me::bench::Thing;\n"},
                                        "", None, ["src/measure.rs:2"]),
    "re-export at the root": ({"measure.rs": "pub fn g() -> crate::Thing { crate::Thing }\n"},
                              "pub use bench::Thing;\n", None, ["src/measure.rs:1"]),
    "module re-exported at the root": ({"measure.rs": "use crate::b::check;\n"},
                                       "pub use bench as b;\n", None, ["src/measure.rs:1"]),
    "glob re-export at the root": ({"measure.rs": "pub fn g() { crate::f() }\n"},
                                   "pub use bench::*;\n", None, ["src/measure.rs:1"]),
    "re-export in a lower module": ({"units.rs": "pub use super::bench::Thing;\n",
                                     "measure.rs": "use crate::units::Thing;\n"},
                                    "", {"measure": "units"},
                                    ["src/measure.rs:1", up("src/units.rs:1", "units")]),
    "exported macro": ({"measure.rs": "pub fn g() { crate::up!() }\n",
                        "bench.rs": BENCH + "#[macro_export]\nmacro_rules! up { () => {} }\n"},
                       "", None, ["src/measure.rs:1"]),
    "path attribute": ({"measure.rs": '#[path = "bench/hidden.rs"]\nmod hidden;\n',
                        "bench/hidden.rs": "pub fn h() { crate::bench::f() }\n"},
                       "", None, ["src/measure.rs:2", "src/bench/hidden.rs:1"]),
    "C raw string": ({"measure.rs": 'pub fn g() { let _s = cr#"\\"#; crate::bench::f(); }\n'},
                     "", None, ["src/measure.rs:1"]),
}


@pytest.mark.parametrize("case", list(BYPASSES))
def test_a_bypass_of_the_line_scanner_fails(tmp_path, case):
    files, lib, uses, wanted = BYPASSES[case]
    p = check(synthetic(tmp_path, files, lib, uses))
    assert p.returncode == 1, p.stdout
    for w in wanted:
        assert (w if " uses " in w else up(w)) in p.stderr, p.stderr


@pytest.mark.parametrize("code,lines", [
    ("#[cfg(any(test, unix))]\nfn a() { crate::bench::f() }\n"
     "#[cfg(not(test))]\nfn b() { crate::bench::f() }\n", [2, 4]),     # built without tests too
    ("#[cfg(test)]\nmod tests {\n    use crate::bench::f;\n}\n"
     "pub fn g() { crate::bench::f() }\n", [5]),                      # after the test module's end
    ("#[cfg(test)]\nconst N: [u8; 2] = [1, 2];\npub fn g() { crate::bench::f() }\n", [3]),
    ("pub fn g(x: u8) -> u8 {\n    match x {\n        #[cfg(test)]\n"
     "        0 => { crate::bench::f(); 0 }\n        _ => { crate::bench::f(); 1 }\n    }\n}\n", [5]),
    ("#[cfg(test)]\n#[allow(unused)]\nstruct T { t: crate::bench::Thing }\n"
     "struct U { u: crate::bench::Thing }\n", [4]),
])
def test_code_beside_test_only_code_still_counts(tmp_path, code, lines):
    p = check(synthetic(tmp_path, {"measure.rs": code}))
    assert p.returncode == 1
    for n in lines:
        assert up(f"src/measure.rs:{n}") in p.stderr, p.stderr
    assert p.stderr.count(up("src/measure.rs")[len("src/measure.rs"):]) == len(lines), p.stderr


def test_a_fully_qualified_path_in_an_expression_is_an_arrow(tmp_path):
    p = check(synthetic(tmp_path, {"measure.rs": "pub fn g() {\n    let _ = crate::bench::check::x();\n}\n"}))
    # (the line scanner saw these too: kept)
    assert p.returncode == 1 and up("src/measure.rs:2") in p.stderr


def test_a_name_of_a_local_module_is_not_the_top_level_one(tmp_path):
    # units::bench is not crate::bench; measure's Thing comes from units::bench
    files = {"units/mod.rs": "mod bench;\npub use bench::X;\n"
                             "mod tests {\n    use super::*;\n    fn t() -> X { bench::X }\n}\n",
             "units/bench.rs": "pub struct X;\n",
             "measure.rs": "use crate::units::X;\nfn g() -> X { X }\n"}
    p = check(synthetic(tmp_path, files, uses={"measure": "units"}))
    assert p.returncode == 0, p.stderr


def verbose(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--verbose"],
                          capture_output=True, text=True)


def test_test_only_arrows_are_listed_apart_and_do_not_count(tmp_path):
    files = {"measure/mod.rs": "#[cfg(test)]\nmod tests;\nmod inline_tests;\n"
                               "#[cfg(test)]\nmod more {\n    use crate::bench::Thing;\n}\n"
                               "#[test]\nfn t() { crate::bench::f() }\n"
                               "#[cfg(all(test, unix))]\nfn u() { crate::bench::f() }\n"
                               "#[cfg(test)]\nimpl S { fn v() { crate::bench::f() } }\npub struct S;\n",
             "measure/tests.rs": "use crate::bench::check::x;\n",
             "measure/inline_tests.rs": "#![cfg(test)]\nuse crate::bench::table;\n"}
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "it.rs").write_text("use gradcomp::{bench::f, sim};\n")
    p = verbose(synthetic(tmp_path, files))
    assert p.returncode == 0, p.stderr
    assert "test-only arrows (not layer arrows): 8 paths, 3 arrows" in p.stdout
    assert ("measure   -> bench        6  src/measure/inline_tests.rs:2, src/measure/mod.rs:6, "
            "src/measure/mod.rs:9, ... (3 more)") in p.stdout
    assert "tests     -> bench        1  tests/it.rs:1" in p.stdout
    assert "tests     -> sim          1  tests/it.rs:1" in p.stdout


def test_a_file_no_mod_declares_is_still_checked(tmp_path):
    p = verbose(synthetic(tmp_path, {"measure/mod.rs": "", "measure/stray.rs": "use crate::bench::f;\n"}))
    assert p.returncode == 1 and up("src/measure/stray.rs:1") in p.stderr
    assert "not declared by any `mod`" in p.stdout and "src/measure/stray.rs" in p.stdout
