#!/usr/bin/env bash
# Mutation testing of what changed (issue 49; docs/mutation.md says how to read it):
# mutmut on the analysis modules (analysis/gradcomp_analysis/*.py) and cargo-mutants on the
# Rust files changed against a base revision; prints each surviving mutant.
#
#   scripts/mutants.sh [BASE]         files changed against BASE (default: the merge base
#                                     with origin/main, else origin/main, else HEAD~1)
#   scripts/mutants.sh --all          every analysis module, and every Rust file
#   scripts/mutants.sh --python-only [BASE|--all]   skip cargo-mutants
#   scripts/mutants.sh --rust-only   [BASE|--all]   skip mutmut
#
# MUTMUT_MODULES="compare.py simagree.py"  these analysis modules instead of the changed ones;
# MUTANTS_RUST_FILES="src/schedule/*.rs"  these Rust files (globs) whole instead of the diff;
# MUTANTS_TEST_FILTER="a:: b::"  pass 1's unit-test filter; MUTANTS_PASS2_FILTER="sim::"  pass 2's
#   (default: every unit test and the integration tests that reach the files; neither pass
#   runs sim::tests::engine_vs_sim or sketch's 1,000-step test, minutes each at opt-level 0);
# MUTANTS_OUT=DIR  where the mutmut copy and the logs go [default: a fresh mktemp -d];
# MUTANTS_TREE=DIR  cargo-mutants' copy of the tree [default: target/mutants-tree];
# MUTANTS_TARGET_DIR=DIR  its build directory [default: target/mutants-build, apart from target/];
# MUTMUT_CHILDREN=N  mutmut's parallel workers [default: the cores, at most 4].
# Exit 0 when no mutant survived, 1 when some did, 2 on a usage or tool error.
# mutmut runs in a copy of analysis/ (never in the working tree); the tests that need the
# repository around them or the release binary (test_report, test_docs*, test_slurm*,
# test_check_layers*, test_scripts*, test_profile_compress) are left out of its runs: they
# check files, scripts and the binary, not the analysis functions mutated here.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

python_on=1 rust_on=1 all=0 base=""
for a in "$@"; do
  case "$a" in
    --all) all=1 ;;
    --python-only) rust_on=0 ;;
    --rust-only) python_on=0 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "mutants.sh: unknown option $a" >&2; exit 2 ;;
    *) base=$a ;;
  esac
done
if ((!all)) && [[ -z $base ]]; then
  if git rev-parse -q --verify origin/main >/dev/null; then
    base=$(git merge-base HEAD origin/main)
    # on origin/main itself the merge base is HEAD: judge the last commit
    [[ $base == "$(git rev-parse HEAD)" ]] && base=HEAD~1
  else
    base=HEAD~1
  fi
fi
if ((!all)) && ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "mutants.sh: $base is not a revision" >&2; exit 2
fi
# Changed files (committed since BASE, staged, unstaged and untracked alike).
changed() {  # PATHSPEC...
  { git diff --name-only "$base" -- "$@"; git ls-files --others --exclude-standard -- "$@"; } | sort -u
}

OUT=${MUTANTS_OUT:-$(mktemp -d -t gradcomp-mutants.XXXXXX)}
mkdir -p "$OUT"
survived=0 rc_tool=0
echo "mutants: revision $(git rev-parse --short HEAD), base ${base:-(all)}, output $OUT"

# ------------------------------------------------------------------------------ mutmut
if ((python_on)); then
  if [[ -n ${MUTMUT_MODULES:-} ]]; then
    mods=$(for m in $MUTMUT_MODULES; do echo "gradcomp_analysis/${m#gradcomp_analysis/}"; done)
  elif ((all)); then
    mods=$(cd analysis && ls gradcomp_analysis/*.py | grep -v '__init__\|__main__')
  else
    mods=$(changed 'analysis/gradcomp_analysis/*.py' | sed 's#^analysis/##' | grep -v '__init__\|__main__' \
           | while read -r f; do [[ -f analysis/$f ]] && echo "$f"; done)
  fi
  if [[ -z $mods ]]; then
    echo "mutmut: no analysis module changed against $base"
  elif [[ ! -x .venv/bin/mutmut ]]; then
    echo "mutmut: .venv/bin/mutmut missing: run make setup (analysis/requirements.txt has mutmut)" >&2
    rc_tool=1
  else
    W=$OUT/mutmut
    rm -rf "$W" && mkdir -p "$W"
    # analysis/profile_*.py: devmodel imports profile_compress from beside the package;
    # analysis/methods.json: methods.py reads it from beside the package at import
    cp -r analysis/gradcomp_analysis analysis/tests analysis/pytest.ini analysis/methods.json analysis/profile_*.py "$W"/
    find "$W" -name __pycache__ -prune -exec rm -rf {} +
    # test_io reads the repository's recorded runs at tests/../../tests/data (mutants/tests/..
    # /.. is $W): a link, which mutmut's copy of tests/ follows
    ln -s "$ROOT/tests/data" "$W/tests/data"
    children=${MUTMUT_CHILDREN:-$(nproc)}
    ((children > 4)) && children=4
    {
      echo "[mutmut]"
      echo "source_paths=gradcomp_analysis"
      echo "only_mutate="
      for m in $mods; do echo "    $m"; done
      echo "also_copy="
      (cd "$W" && ls methods.json profile_*.py) | sed 's/^/    /'
      echo "pytest_add_cli_args="
      for t in test_report.py 'test_docs*.py' 'test_slurm*.py' 'test_check_layers*.py' 'test_scripts*.py' \
               test_profile_compress.py; do
        echo "    --ignore-glob=tests/$t"
      done
      echo "    -p"
      echo "    no:cacheprovider"
    } > "$W/setup.cfg"
    echo "mutmut on:" $mods
    (cd "$W" && "$ROOT/.venv/bin/mutmut" run --max-children "$children") > "$OUT/mutmut.log" 2>&1
    mrc=$?
    tail -n 3 "$OUT/mutmut.log" | tr '\r' '\n' | tail -n 2
    (cd "$W" && "$ROOT/.venv/bin/mutmut" results --all true) > "$OUT/mutmut-results.txt" 2>&1 \
      || (cd "$W" && "$ROOT/.venv/bin/mutmut" results) > "$OUT/mutmut-results.txt" 2>&1
    if grep -q "failed to collect stats" "$OUT/mutmut.log"; then
      # the tests do not pass on the unmutated copy: nothing was judged
      tr '\r' '\n' < "$OUT/mutmut.log" | grep -A15 "ERRORS\|FAILURES" | head -n 30 >&2
      echo "mutmut: the tests fail on the unmutated code (log: $OUT/mutmut.log)" >&2; rc_tool=1
    elif ((mrc)) && ! grep -q ': ' "$OUT/mutmut-results.txt"; then
      echo "mutmut failed (exit $mrc): $OUT/mutmut.log" >&2; rc_tool=1
    else
      # per module: killed / all, and every mutant that is not killed, with its diff
      awk -F': ' '/: /{split($1, p, "."); key=p[1] "." p[2]; sub(/^ +/, "", key); n[key]++;
                  if ($2 == "killed") k[key]++ }
                  END { for (m in n) printf "  %-40s %d of %d killed (%.0f%%)\n", m, k[m], n[m], 100 * k[m] / n[m] }' \
        "$OUT/mutmut-results.txt" | sort
      bad=$(grep -v ': killed$' "$OUT/mutmut-results.txt" | grep ': ' | sed 's/^ *//')
      if [[ -n $bad ]]; then
        survived=1
        echo "mutmut: not killed ($(echo "$bad" | wc -l)):"
        # each with its diff (`mutmut show NAME` in $W), the first MUTANTS_SHOW of them [40]
        shown=0
        while read -r line; do
          name=${line%%:*}
          echo "--- $line"
          if ((shown++ < ${MUTANTS_SHOW:-40})); then
            (cd "$W" && "$ROOT/.venv/bin/mutmut" show "$name" 2>/dev/null) | grep '^[-+][^-+]' | sed 's/^/    /'
          fi
        done <<< "$bad"
      else
        echo "mutmut: every mutant killed"
      fi
    fi
  fi
fi

# ---------------------------------------------------------------------- cargo-mutants
# Each mutant is built in a fixed copy of the tree ($MUTANTS_TREE, never the working tree),
# with cargo-mutants --in-place there and the `mutants` profile (.cargo/mutants.toml,
# Cargo.toml), into this tree's target/: the copy's paths and the incremental cache stay
# the same from run to run, so a mutant rebuilds one crate incrementally (10-20 s on 2
# shared cores) instead of a release build (minutes). Files are copied only when their
# content differs (a fresh mtime, so cargo rebuilds what changed and nothing else; a
# mutant left by an interrupted run differs and is replaced).
# Tests per mutant, pass 1: the library's unit tests (`--lib`: one test binary to rebuild)
# whose path names a changed file's module (`compress::sketch::` for src/compress/sketch.rs;
# `sim::` for any file of src/sim; with `engine::` and `sim::tests::bucketing` for
# src/schedule, which they drive; MUTANTS_TEST_FILTER="a:: b::" chooses), never the two
# tests of minutes (`slow` below): at opt-level 0 the whole library but those takes 57 s
# under load 5-6, `sim::` 3-22 s, `schedule::` 2 s.
# Pass 2 (cargo-mutants --iterate: what pass 1 neither caught nor found unviable): every
# unit test, plus tests/wire_formula.rs when src/compress, src/schedule or src/engine
# changed and tests/determinism.rs for src/compress (the integration tests that reach those
# modules without MPI or the release binary; each adds the crate's rlib, the binary and a
# link to every build, minutes per mutant under load, so only for pass 1's survivors).
# MUTANTS_PASS2_FILTER="sim::" runs pass 2 under the unit tests matching it instead (the
# whole library's unit tests take 2-3 minutes a mutant at opt-level 0 on 2 shared cores).
sync_tree() {  # DIR: make DIR hold the tracked and untracked (not ignored) files, as here
  local dir=$1 f
  mkdir -p "$dir"
  git ls-files -z -co --exclude-standard > "$OUT/tree.files"
  while IFS= read -r -d '' f; do
    [[ -f $f ]] || continue
    cmp -s "$f" "$dir/$f" 2>/dev/null || { mkdir -p "$(dirname "$dir/$f")"; cp "$f" "$dir/$f"; }
  done < "$OUT/tree.files"
  # files deleted here since the last run
  (cd "$dir" && find . -type f -not -path './.git/*' | sed 's#^\./##' | sort) > "$OUT/tree.old"
  tr '\0' '\n' < "$OUT/tree.files" | sort | comm -23 "$OUT/tree.old" - | while read -r f; do rm -f "$dir/$f"; done
}
if ((rust_on)); then
  if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants: not installed (cargo install --locked cargo-mutants); Rust side skipped" >&2
    rc_tool=1
  else
    R=$OUT/cargo-mutants
    rm -rf "$R" && mkdir -p "$R"
    args=(--in-place --no-shuffle --output "$R")
    if [[ -n ${MUTANTS_RUST_FILES:-} ]]; then
      for f in $MUTANTS_RUST_FILES; do args+=(--file "$f"); done
      touched=$(cd "$ROOT" && ls $MUTANTS_RUST_FILES 2>/dev/null)
    elif ((!all)); then
      git diff "$base" -- 'src/*.rs' 'src/**/*.rs' > "$R/rust.diff"
      if [[ ! -s $R/rust.diff ]]; then
        echo "cargo-mutants: no Rust file changed against $base"
        args=()
      else
        args+=(--in-diff "$R/rust.diff")
        touched=$(git diff --name-only "$base" -- 'src/*.rs' 'src/**/*.rs')
      fi
    else
      # every file: the crate root among them, so every unit test (no filter)
      touched=$(git ls-files 'src/*.rs' 'src/**/*.rs')
    fi
    if ((${#args[@]})); then
      if [[ -n ${MUTANTS_TEST_FILTER:-} ]]; then
        read -ra filter <<< "$MUTANTS_TEST_FILTER"
      else
        # each changed file's module path (src/compress/sketch.rs: compress::sketch::),
        # except where a module's tests are elsewhere: src/sim/* is reached mostly from
        # sim::tests and other sim modules (all of `sim::`, 3 s at opt-level 0 without
        # engine_vs_sim), src/compress/mod.rs from compress::tests and the registry
        read -ra filter <<< "$(for f in $touched; do
          case $f in
            src/sim/*) echo sim:: ;;
            src/compress/mod.rs) echo compress::tests:: compress::registry:: compress::device_kernel_tests:: ;;
            *) sed 's#^src/##; s#/mod\.rs$##; s#\.rs$##; s#/#::#g; s#$#::#' <<< "$f" ;;
          esac
        done | tr ' ' '\n' | sort -u | tr '\n' ' ')"
        grep -q '^src/schedule/' <<< "$touched" && filter+=(engine:: sim::tests::bucketing)
        # the crate root reaches every module: no filter
        grep -q '^src/\(lib\|main\)\.rs$' <<< "$touched" && filter=()
      fi
      # the two tests of minutes at opt-level 0 (sim::tests::engine_vs_sim 125 s, sketch's
      # 1,000 steps at 8 workers 60 s+) never run per mutant; `make test` runs them
      slow=(--skip sim::tests::engine_vs_sim --skip residuals_stay_bounded_over_1000_steps_at_8_workers)
      tests=(--cargo-arg=--lib)
      grep -q '^src/\(compress\|schedule\|engine\)/' <<< "$touched" && tests+=(--cargo-arg=--test=wire_formula)
      grep -q '^src/compress/' <<< "$touched" && tests+=(--cargo-arg=--test=determinism)
      TREE=${MUTANTS_TREE:-$ROOT/target/mutants-tree}
      echo "cargo-mutants: copying the tree to $TREE"
      sync_tree "$TREE"
      # Its own build directory, never the working tree's (nor a CARGO_TARGET_DIR of the
      # shell, which the working tree's builds share): cargo leaves a path package's
      # location out of its artifacts' names, so both trees' unit-test binaries are
      # target/mutants/deps/gradcomp-HASH, and a `cargo test --profile mutants` in the
      # working tree would find the last mutant's binary newer than its sources and run it.
      export CARGO_TARGET_DIR=${MUTANTS_TARGET_DIR:-$ROOT/target/mutants-build}
      start_s=$SECONDS
      echo "cargo-mutants pass 1: unit tests matching ${filter[*]:-(all)}"
      (cd "$TREE" && cargo mutants "${args[@]}" --cargo-arg=--lib -- -- "${filter[@]}" "${slow[@]}") \
        > "$R/cargo-mutants.log" 2>&1
      crc=$?
      tail -n 3 "$R/cargo-mutants.log"
      M=$R/mutants.out
      if ((crc == 4)); then
        echo "cargo-mutants: the tests fail on the unmutated code (log: $R/cargo-mutants.log)" >&2; rc_tool=1
      elif ((crc != 0 && crc != 2 && crc != 3)); then
        echo "cargo-mutants failed (exit $crc): $R/cargo-mutants.log" >&2; rc_tool=1
      else
        n1=$(cat "$M"/{caught,missed,timeout,unviable}.txt 2>/dev/null | wc -l)
        echo "cargo-mutants pass 1: $(wc -l < "$M/caught.txt") caught, $(wc -l < "$M/missed.txt") missed," \
          "$(wc -l < "$M/timeout.txt") timed out, $(wc -l < "$M/unviable.txt") unviable of $n1 ($((SECONDS - start_s)) s)"
        if [[ -s $M/missed.txt || -s $M/timeout.txt ]]; then
          # pass 2: what pass 1 did not catch, under every unit test and the integration
          # tests above (--iterate skips what pass 1 caught or found unviable)
          cp -r "$M" "$R/pass1"
          # (MUTANTS_PASS2_FILTER="sim::": only the unit tests matching it, no integration test)
          if [[ -n ${MUTANTS_PASS2_FILTER:-} ]]; then
            read -ra filter2 <<< "$MUTANTS_PASS2_FILTER"
            tests2=(--cargo-arg=--lib -- -- "${filter2[@]}" "${slow[@]}") what2="unit tests matching ${filter2[*]}"
          else
            tests2=("${tests[@]}" -- -- "${slow[@]}") what2="every unit test and ${tests[*]#--cargo-arg=}"
          fi
          (cd "$TREE" && cargo mutants "${args[@]}" --iterate "${tests2[@]}") >> "$R/cargo-mutants.log" 2>&1
          crc=$?
          echo "cargo-mutants pass 2 (the survivors under $what2): $(wc -l < "$M/caught.txt") more caught"
          ((crc == 0 || crc == 2 || crc == 3)) || { echo "cargo-mutants failed (exit $crc): $R/cargo-mutants.log" >&2; rc_tool=1; }
        fi
        if [[ -s $M/missed.txt ]]; then
          survived=1
          echo "cargo-mutants: missed ($(wc -l < "$M/missed.txt")):"
          sed 's/^/  /' "$M/missed.txt"
        fi
        if [[ -s $M/timeout.txt ]]; then
          echo "cargo-mutants: timed out (not counted as caught):"
          sed 's/^/  /' "$M/timeout.txt"
        fi
      fi
    fi
  fi
fi

((rc_tool)) && exit 2
exit $survived
