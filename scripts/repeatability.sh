#!/usr/bin/env bash
# Repeatability of the laptop paper configs: run each twice, time each run, and compare
# the two runs case by case (`python -m gradcomp_analysis compare`: every case's median
# iteration within TOLERANCE, no significant conclusion reversed; docs/reproduce.md,
# "Repeatability").
#
#   scripts/repeatability.sh OUT [CONFIG ...]      # CONFIG: acpsgd-main, omgs, ... (default: all)
#
# Writes OUT/CONFIG/{a,b}/npN (the runs), OUT/CONFIG/compare-npN/compare.md and
# OUT/summary.md (wall time of every run, cases within tolerance, conclusions). Run it on
# a quiet machine: it measures the machine as much as the code. Exit 1 when a comparison
# fails or judged nothing (every case timed once: "not judged", never a pass), 2 on bad arguments.
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    [[ $# -ge 1 ]] && exit 0 || exit 2
fi
OUT=$1
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GRADCOMP=${GRADCOMP:-$ROOT/target/release/gradcomp}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
TOLERANCE=${TOLERANCE:-0.10}
MPIRUN=${MPIRUN:-mpirun --oversubscribe --bind-to none}

# config -> world sizes it runs at (docs/reproduce.md, "Per paper table / figure")
declare -A NP=(
    [acpsgd-main]="4" [acpsgd-ablation]="4" [acpsgd-buffer-sweep]="4" [acpsgd-rank-sweep]="4"
    [acpsgd-scaling]="2 4" [dgc-ratio]="2" [omgs]="4" [marsit]="4" [sketch-fusion]="4 2"
)
ORDER=(acpsgd-main acpsgd-ablation acpsgd-buffer-sweep acpsgd-rank-sweep acpsgd-scaling dgc-ratio omgs
       marsit sketch-fusion)
CONFIGS=("$@")
[[ ${#CONFIGS[@]} -eq 0 ]] && CONFIGS=("${ORDER[@]}")
for c in "${CONFIGS[@]}"; do
    if [[ -z ${NP[$c]+x} ]]; then
        echo "repeatability.sh: unknown config '$c'; allowed: ${ORDER[*]}" >&2
        exit 2
    fi
done
[[ -x $GRADCOMP ]] || { echo "repeatability.sh: $GRADCOMP not built: run 'cargo build --release'" >&2; exit 2; }
if [[ -e $OUT ]]; then
    echo "repeatability.sh: $OUT exists; results are never overwritten: choose a new OUT" >&2
    exit 2
fi
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

summary=$OUT/summary.md
{
    echo "# Repeatability of the laptop paper configs"
    echo
    echo "gradcomp $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, $(date -u +%FT%TZ), tolerance $TOLERANCE"
    echo
    echo "| config | ranks | run a (s) | run b (s) | cases within tolerance | largest difference | conclusions: agree / one-sided / contradictions | result |"
    echo "|---|---|---|---|---|---|---|---|"
} >"$summary"

rc=0
for c in "${CONFIGS[@]}"; do
    for n in ${NP[$c]}; do
        secs=()
        for r in a b; do
            d=$OUT/$c/$r/np$n
            t0=$(date +%s.%N)
            $MPIRUN -np "$n" "$GRADCOMP" run "$ROOT/bench-configs/$c-laptop.toml" --out "$d" --quiet >"$OUT/$c-$r-np$n.log" 2>&1 || {
                echo "repeatability.sh: $c run $r at $n ranks failed: see $OUT/$c-$r-np$n.log" >&2
                exit 1
            }
            secs+=("$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')")
        done
        cmp=$OUT/$c/compare-np$n
        set +e
        PYTHONPATH=$ROOT/analysis "$PYTHON" -m gradcomp_analysis compare "$OUT/$c/a/np$n" "$OUT/$c/b/np$n" \
            --tolerance "$TOLERANCE" --out "$cmp" >/dev/null
        ok=$?
        set -e
        [[ $ok -eq 2 ]] && { echo "repeatability.sh: compare failed for $c at $n ranks" >&2; exit 1; }
        [[ $ok -ne 0 ]] && rc=1
        within=$(sed -n 's/^- times within [0-9]*%: \([0-9]* of [0-9]* judged\)\(; largest difference \([^ ]*\)\)\{0,1\}.*$/\1|\3/p' "$cmp/compare.md")
        concl=$(sed -n 's/.*: [0-9]*; agree \([0-9]*\), one-sided \([0-9]*\), contradictions \([0-9]*\)$/\1 \/ \2 \/ \3/p' "$cmp/compare.md")
        result=pass
        [[ $ok -ne 0 ]] && result=FAIL
        grep -q '^- result: NOT JUDGED' "$cmp/compare.md" && result="not judged (every case timed once)"
        echo "| $c | $n | ${secs[0]} | ${secs[1]} | ${within%%|*} | ${within#*|} | $concl | $result |" >>"$summary"
        echo "$c np$n: ${secs[0]} s / ${secs[1]} s, $(tail -n +1 "$cmp/compare.md" | grep -m1 'result:')"
    done
done
echo "summary: $summary"
exit $rc
