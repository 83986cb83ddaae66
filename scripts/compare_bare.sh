#!/usr/bin/env bash
# Compare `gradcomp micro-comm --collectives allreduce` with a bare MPI_Allreduce loop
# (tools/bare_allreduce.c) over the same sizes, iterations, warm-up and rank count.
#
# Usage (from the repository root):
#   bash scripts/compare_bare.sh [NP [MAX [ITERS]]]
#     NP     MPI ranks                                  (default 2)
#     MAX    largest message: bytes, or with KiB/MiB/GiB (default 64MiB); sizes double from 4 B
#     ITERS  timed iterations per size                  (default 200; warm-up is ITERS/10)
#   Environment: ROUNDS (default 3) interleaved rounds of each program;
#                MPIRUN (default mpirun); MPIRUN_FLAGS (default "--oversubscribe --bind-to none");
#                BARE_FLAGS (default empty): options of tools/bare_allreduce.c, e.g.
#                "--thread=funneled" or "--per-size-buffers" to measure the MPI library's
#                thread-level and buffer-placement effects (default: MPI_Init and one
#                MAX-sized buffer pair, as gradcomp's micro-comm initialises and allocates).
#
# The two programs run alternately (gradcomp, bare, bare, gradcomp, gradcomp, ...) so
# that slow machine drift hits both alike; each size's figure is the median over rounds
# of the per-run median. Prints a table (bytes, gradcomp median, bare median, ratio =
# gradcomp / bare, within 10%? i.e. |ratio - 1| <= 0.1, and each program's spread, the
# (max - min) / median of its per-round medians: the run-to-run noise) and a summary line. Exits 0 whatever the ratios are; non-zero only when
# building or running fails. Raw CSVs are kept under target/compare_bare/.
set -euo pipefail

NP=${1:-2}
MAX=${2:-64MiB}
ITERS=${3:-200}
ROUNDS=${ROUNDS:-3}
read -r -a BARE_FLAGS <<<"${BARE_FLAGS:-}"
MPIRUN=${MPIRUN:-mpirun}
read -r -a MPIRUN_FLAGS <<<"${MPIRUN_FLAGS:---oversubscribe --bind-to none}"

die() { echo "compare_bare.sh: $*" >&2; exit 2; }
[[ $NP =~ ^[1-9][0-9]*$ ]] || die "NP must be a positive integer, got '$NP'"
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "ITERS must be a positive integer, got '$ITERS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, got '$ROUNDS'"
case $MAX in
    *GiB) MAX_BYTES=$(( ${MAX%GiB} << 30 )) ;;
    *MiB) MAX_BYTES=$(( ${MAX%MiB} << 20 )) ;;
    *KiB) MAX_BYTES=$(( ${MAX%KiB} << 10 )) ;;
    *) [[ $MAX =~ ^[0-9]+$ ]] || die "MAX must be bytes or end in KiB/MiB/GiB, got '$MAX'"; MAX_BYTES=$MAX ;;
esac
[[ ${MAX%[KMG]iB} =~ ^[0-9]+$ ]] || die "MAX must be bytes or end in KiB/MiB/GiB, got '$MAX'"
(( MAX_BYTES >= 4 )) || die "MAX must be at least 4 bytes"
WARMUP=$(( ITERS / 10 ))

[[ -f Cargo.toml && -f tools/bare_allreduce.c ]] || die "run from the repository root"
if [[ $(id -u) == 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

GRADCOMP=target/release/gradcomp
BARE=target/bare_allreduce
if [[ ! -x $GRADCOMP ]]; then
    echo "building $GRADCOMP (cargo build --release)" >&2
    cargo build --release --quiet
fi
mkdir -p target
mpicc -O2 -o "$BARE" tools/bare_allreduce.c
"$MPIRUN" "${MPIRUN_FLAGS[@]}" -np 1 "$BARE" 4 4 1 0 "${BARE_FLAGS[@]}" >/dev/null ||
    die "target/bare_allreduce does not start (BARE_FLAGS='${BARE_FLAGS[*]}'?)"

mkdir -p target/compare_bare
OUT=$(mktemp -d "target/compare_bare/np${NP}-$(date -u +%Y%m%d-%H%M%S)-XXXX")

run_gradcomp() {
    "$MPIRUN" "${MPIRUN_FLAGS[@]}" -np "$NP" "$GRADCOMP" micro-comm --collectives allreduce \
        --min-bytes 4 --max-bytes "$MAX_BYTES" --iters "$ITERS" --warmup "$WARMUP" \
        --quiet --out "$OUT/gradcomp-$1" >/dev/null
}
run_bare() {
    "$MPIRUN" "${MPIRUN_FLAGS[@]}" -np "$NP" "$BARE" 4 "$MAX_BYTES" "$ITERS" "$WARMUP" "${BARE_FLAGS[@]}" >"$OUT/bare-$1.csv"
}

echo "np=$NP, sizes 4 B..$MAX_BYTES B (doubling), iters=$ITERS, warmup=$WARMUP, rounds=$ROUNDS," \
    "bare flags: ${BARE_FLAGS[*]:-none}; raw CSVs in $OUT"
for (( r = 1; r <= ROUNDS; r++ )); do
    if (( r % 2 )); then order="gradcomp bare"; else order="bare gradcomp"; fi
    for prog in $order; do
        echo "  round $r: $prog" >&2
        "run_$prog" "$r"
    done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import csv, statistics, sys

out, rounds = sys.argv[1], int(sys.argv[2])

def load(path, want_allreduce):
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        return {int(r["bytes"]): float(r["median_s"]) for r in rows
                if not want_allreduce or r["collective"] == "allreduce"}

gc = [load(f"{out}/gradcomp-{r}/micro_comm.csv", True) for r in range(1, rounds + 1)]
bare = [load(f"{out}/bare-{r}.csv", False) for r in range(1, rounds + 1)]
sizes = sorted(set.intersection(*(set(d) for d in gc + bare)))
if not sizes:
    sys.exit("compare_bare.sh: no common sizes in the two programs' output")

def human_bytes(b):
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << k and b % (1 << k) == 0:
            return f"{b >> k}{unit}"
    return f"{b}B"

def human_s(s):
    for unit, k in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= k:
            return f"{s / k:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"

def spread(xs):
    # Range of the per-round medians relative to their median: run-to-run noise.
    pct = (max(xs) - min(xs)) / statistics.median(xs) * 100
    return f"{pct:.0f}%" if pct < 1000 else ">999%"

print(f"{'bytes':>7} {'gradcomp':>10} {'bare':>10} {'ratio':>6} {'within10%':>9}"
      f" {'gc spread':>9} {'bare spread':>11}")
ok, ratios = 0, []
for b in sizes:
    g = [d[b] for d in gc]
    m = [d[b] for d in bare]
    gm, bm = statistics.median(g), statistics.median(m)
    ratio = gm / bm
    ratios.append((ratio, b))
    within = abs(ratio - 1) <= 0.10
    ok += within
    print(f"{human_bytes(b):>7} {human_s(gm):>10} {human_s(bm):>10} {ratio:6.3f} {'yes' if within else 'NO':>9}"
          f" {spread(g):>9} {spread(m):>11}")
geo = statistics.geometric_mean([r for r, _ in ratios])
worst, worst_b = max(ratios, key=lambda rb: abs(rb[0] - 1))
print(f"summary: {ok}/{len(sizes)} sizes within 10% (ratio = gradcomp median / bare median,"
      f" each the median over {rounds} rounds); geometric-mean ratio {geo:.3f};"
      f" worst {worst:.3f} at {human_bytes(worst_b)}")
PY
exit 0
