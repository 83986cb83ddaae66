"""scripts/mutants.sh's cargo-mutants commands (issue 49, docs/mutation.md "What to run"),
with a stand-in `cargo` first on PATH that records its arguments: pass 1's unit-test filter
per file (a file's own module; `sim::` for src/sim; compress::tests, the registry and the
device kernels for src/compress/mod.rs; engine and bucketing beside src/schedule; none for
the crate root; MUTANTS_TEST_FILTER), the two minutes-long tests skipped in both passes,
and pass 2 run only on pass 1's survivors (the integration tests per area, or
MUTANTS_PASS2_FILTER). The expected commands are the rules of the doc written out."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutants.sh"
SKIP = ["--skip", "sim::tests::engine_vs_sim", "--skip", "residuals_stay_bounded_over_1000_steps_at_8_workers"]

FAKE_CARGO = """#!/bin/bash
# records each call, one line of tab-separated arguments; `--output DIR` gets a result
# folder with one missed mutant when FAKE_MISSED=1
printf '%s\\t' "$@" >> "$FAKE_LOG"; echo >> "$FAKE_LOG"
echo "${CARGO_TARGET_DIR:-}" >> "$FAKE_LOG.dirs"
prev=""
for a in "$@"; do
  if [[ $prev == --output ]]; then
    mkdir -p "$a/mutants.out"
    for f in caught missed timeout unviable; do : > "$a/mutants.out/$f.txt"; done
    [[ ${FAKE_MISSED:-0} == 1 ]] && echo "src/x.rs:1:1: replace f -> u32 with 0" > "$a/mutants.out/missed.txt"
  fi
  prev=$a
done
exit 0
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """One copy of the repository for every case (the script copies only what differs)."""
    return tmp_path_factory.mktemp("mutants-tree")


def run(tmp_path, tree, missed=True, extra=(), **env):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "cargo").write_text(FAKE_CARGO)
    (fake / "cargo").chmod(0o755)
    log = tmp_path / "cargo.log"
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("MUTANTS_") and k not in ("MUTMUT_MODULES", "CARGO_TARGET_DIR")}
    full.update(PATH=f"{fake}:{os.environ['PATH']}", FAKE_LOG=str(log), FAKE_MISSED="1" if missed else "0",
                MUTANTS_TREE=str(tree), MUTANTS_OUT=str(tmp_path / "out"), **env)
    p = subprocess.run(["bash", str(SCRIPT), "--rust-only", *extra], cwd=ROOT, env=full,
                       capture_output=True, text=True, timeout=120)
    calls = [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()]
    # the version probe, then the passes
    assert calls[0] == ["mutants", "--version"], p.stdout + p.stderr
    return p, calls[1:]


def passes(files, out):
    head = ["mutants", "--in-place", "--no-shuffle", "--output", f"{out}/cargo-mutants"]
    for f in files:
        head += ["--file", f]
    return head


@pytest.mark.parametrize("file, pass1, integration", [
    ("src/sim/model/clock.rs", ["sim::"], []),
    ("src/compress/mod.rs", ["compress::device_kernel_tests::", "compress::registry::", "compress::tests::"],
     ["--cargo-arg=--test=wire_formula", "--cargo-arg=--test=determinism"]),
    ("src/compress/topk.rs", ["compress::topk::"],
     ["--cargo-arg=--test=wire_formula", "--cargo-arg=--test=determinism"]),
    ("src/schedule/plan.rs", ["schedule::plan::", "engine::", "sim::tests::bucketing"],
     ["--cargo-arg=--test=wire_formula"]),
    ("src/lib.rs", [], []),
])
def test_each_file_gets_its_filter_and_the_slow_tests_are_skipped_in_both_passes(tmp_path, tree, file, pass1,
                                                                               integration):
    p, calls = run(tmp_path, tree, MUTANTS_RUST_FILES=file)
    head = passes([file], tmp_path / "out")
    assert calls == [head + ["--cargo-arg=--lib", "--", "--"] + pass1 + SKIP,
                     head + ["--iterate", "--cargo-arg=--lib"] + integration + ["--", "--"] + SKIP], p.stdout
    assert p.returncode == 1, p.stdout + p.stderr          # a mutant missed
    assert "cargo-mutants: missed (1):\n  src/x.rs:1:1: replace f -> u32 with 0" in p.stdout


def test_chosen_filters_replace_the_defaults_and_nothing_missed_means_no_second_pass(tmp_path, tree):
    files = "src/sim/run.rs src/compress/topk.rs"
    (tmp_path / "a").mkdir()
    p, calls = run(tmp_path / "a", tree, MUTANTS_RUST_FILES=files, MUTANTS_TEST_FILTER="a:: b::",
                   MUTANTS_PASS2_FILTER="c::")
    head = passes(files.split(), tmp_path / "a" / "out")
    assert calls == [head + ["--cargo-arg=--lib", "--", "--", "a::", "b::"] + SKIP,
                     head + ["--iterate", "--cargo-arg=--lib", "--", "--", "c::"] + SKIP]
    (tmp_path / "b").mkdir()
    p, calls = run(tmp_path / "b", tree, missed=False, MUTANTS_RUST_FILES="src/sim/run.rs")
    assert len(calls) == 1 and p.returncode == 0, p.stdout + p.stderr


def test_all_mutates_every_file_under_every_unit_test(tmp_path, tree):
    p, calls = run(tmp_path, tree, extra=["--all"])
    head = passes([], tmp_path / "out")
    assert calls == [head + ["--cargo-arg=--lib", "--", "--"] + SKIP,
                     head + ["--iterate", "--cargo-arg=--lib", "--cargo-arg=--test=wire_formula",
                             "--cargo-arg=--test=determinism", "--", "--"] + SKIP], p.stdout


@pytest.mark.parametrize("env, want", [
    ({}, ROOT / "target" / "mutants-build"),
    ({"CARGO_TARGET_DIR": str(ROOT / "target")}, ROOT / "target" / "mutants-build"),
    ({"MUTANTS_TARGET_DIR": "/tmp/elsewhere"}, pathlib.Path("/tmp/elsewhere")),
])
def test_mutants_build_apart_from_the_working_trees_target(tmp_path, tree, env, want):
    """cargo-mutants builds into its own directory (target/mutants-build, or
    MUTANTS_TARGET_DIR), never the working tree's target/ nor the shell's CARGO_TARGET_DIR:
    both trees' test binaries have the same name, so a shared directory lets a test run in
    the working tree pick up the last mutant's binary."""
    p, calls = run(tmp_path, tree, missed=False, MUTANTS_RUST_FILES="src/sim/model/clock.rs", **env)
    dirs = (tmp_path / "cargo.log.dirs").read_text().splitlines()
    # the version probe runs before the export; every pass after it
    assert len(dirs) == 1 + len(calls) and calls, p.stdout + p.stderr
    assert [pathlib.Path(d) for d in dirs[1:]] == [want] * len(calls)
