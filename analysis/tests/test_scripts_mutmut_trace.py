"""scripts/mutmut_trace.py (docs/mutation.md, report.py's run) judges mutants as mutmut's
own runner does: a small module mutated by mutmut, its mutants run by `mutmut run` (the
reference: a pytest session per mutant under every test of the function) and by the
plugin (one process, only the tests that execute the changed statement). Killed by one
means killed by the other; a mutant in a statement no test executes is `uncovered` by
the plugin where mutmut, which runs the function's tests, says `survived`; a function no
test calls is `uncovered` (mutmut: `no tests`); a signature change runs every test of
the function. A second run reads the traced baseline from MLOOP_STATS."""
import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MUTMUT = pathlib.Path(sys.executable).parent / "mutmut"

TOY = '''\
def ratio(a, b):
    if b == 0:
        return -7
    return a / b


def label(x):
    return "fast" if x < 1 else "slow"


def scale(x, k=2):
    return x * k


def unused(x):
    return x + 1
'''

TESTS = '''\
from gradcomp_analysis import toy


def test_ratio():
    assert toy.ratio(6, 3) == 2


def test_label():
    assert toy.label(0.5) == "fast"


def test_scale():
    assert toy.scale(3) == 6
'''


def env():
    """The environment without pytest-cov's subprocess hooks or pytest options."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("COV_CORE_", "PYTEST_", "MUTANT_", "MLOOP_"))}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    if not MUTMUT.exists():
        pytest.skip(f"{MUTMUT} missing: make setup installs mutmut (analysis/requirements.txt)")
    d = tmp_path_factory.mktemp("toy")
    (d / "gradcomp_analysis").mkdir()
    (d / "gradcomp_analysis" / "__init__.py").write_text("")
    (d / "gradcomp_analysis" / "toy.py").write_text(TOY)
    (d / "tests").mkdir()
    (d / "tests" / "test_toy.py").write_text(TESTS)
    (d / "setup.cfg").write_text("[mutmut]\nsource_paths=gradcomp_analysis\n"
                                 "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n")
    (d / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    r = subprocess.run([str(MUTMUT), "run", "--max-children", "1"], cwd=d, env=env(),
                       capture_output=True, text=True, timeout=300)
    res = subprocess.run([str(MUTMUT), "results", "--all", "true"], cwd=d, env=env(),
                         capture_output=True, text=True, timeout=60)
    ref = dict(line.strip().split(": ") for line in res.stdout.splitlines() if ": " in line)
    assert ref, r.stdout[-2000:] + r.stderr[-2000:]
    # each mutant's changed lines: its function's lines against the original's, either way
    # (mutmut writes `x_F__mutmut_orig` and `x_F__mutmut_N` side by side)
    src = (d / "mutants" / "gradcomp_analysis" / "toy.py").read_text()
    funcs = {n.name: ast.get_source_segment(src, n).splitlines()
             for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)}
    diffs = {}
    for name in ref:
        fn = name.rsplit(".", 1)[1]
        mine = [x.replace(fn, "F").strip() for x in funcs[fn]]
        orig = [x.replace(fn.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", "F").strip()
                for x in funcs[fn.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"]]
        diffs[name] = sorted(set(mine) ^ set(orig))
    (d / "names.txt").write_text("\n".join(ref) + "\n")
    return d, ref, diffs


def run_plugin(d, out, stats, files=("tests/test_toy.py",)):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "mutmut_trace", "-p", "no:cacheprovider",
                           *files], cwd=d / "mutants", capture_output=True, text=True, timeout=300,
                          env={**env(), "MLOOP_MUTANTS": str(d / "names.txt"), "MLOOP_OUT": str(out),
                               "MLOOP_STATS": str(d / stats), "PYTHONPATH": f".:{ROOT / 'scripts'}"})


def trace(d, tag, stats="stats.json"):
    out = d / f"{tag}.txt"
    p = run_plugin(d, out, stats)
    assert p.returncode in (0, 5), p.stdout[-2000:] + p.stderr[-2000:]   # 5: pytest's "no tests ran"
    lines = out.read_text().splitlines()
    got = {ln.split()[1]: ln.split()[0] for ln in lines if not ln.startswith("baseline ")}
    return got, [ln for ln in lines if ln.startswith("baseline ")]


def test_the_plugin_judges_as_mutmut_does(toy):
    d, ref, diffs = toy
    got, baseline = trace(d, "first", stats="first-stats.json")
    assert len(baseline) == 3 and all(" ok " in b for b in baseline)
    assert set(got) == set(ref)
    for name, want in ref.items():
        if want == "killed":
            assert got[name] == "killed", (name, diffs[name])
        elif want == "no tests":
            assert got[name] == "uncovered", (name, diffs[name])
        else:
            assert want == "survived" and got[name] in ("survived", "uncovered"), (name, want, diffs[name])
    # the cases that make the plugin worth having, each by its diff
    body = [n for n in ref if "return -7" in diffs[n]]
    assert body and all(got[n] == "uncovered" and ref[n] == "survived" for n in body)
    assert {got[n] for n in ref if ".x_unused__" in n} == {"uncovered"}
    signature = [n for n in ref if any(x.startswith("def F(") for x in diffs[n])]
    assert signature and all(got[n] == "killed" for n in signature)
    assert "killed" in got.values() and "survived" in got.values()


def test_a_second_run_reads_the_baseline_from_the_stats_file(toy):
    d, _, _ = toy
    first, _ = trace(d, "again-1")
    again, baseline = trace(d, "again-2")
    assert baseline == [] and again == first


def test_a_test_file_that_fails_to_collect_stops_the_run_before_any_mutant(toy):
    """A test file that raises at import (as test_bad_inputs did where its recorded runs were not
    beside the copy) must not leave its tests out of every mutant unnoticed: pytest's own loop
    stops at a collection error (exit code 2), and so does the plugin, saying so in MLOOP_OUT."""
    d, _, _ = toy
    bad = d / "mutants" / "tests" / "test_broken.py"
    bad.write_text("open('/nonexistent/recorded-runs.tsv')\n\ndef test_never():\n    pass\n")
    try:
        out = d / "broken.txt"
        p = run_plugin(d, out, "broken-stats.json", files=("tests/test_toy.py", "tests/test_broken.py"))
    finally:
        bad.unlink()
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    lines = out.read_text().splitlines()
    assert lines == ["error 1 collection error(s): no mutant run (pytest's log names them)"]
    assert not (d / "broken-stats.json").exists()
