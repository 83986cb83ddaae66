#!/usr/bin/env bash
# Measure the simulator's reference compression costs (each method's
# `MethodSpec::reference_costs`, src/compress/spec.rs): run
# bench-configs/reference-costs.toml on one rank for the registry's methods (or the
# comma-separated METHODS given, as a new method is measured beside topk for scale), fit
# it (`gradcomp fit`), and print each method's `reference_costs` field, with its
# provenance (date, revision, machine, command), to paste into its SPEC.
# Usage: [METHODS=randomk,topk] scripts/reference_costs.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/reference-costs-$(date -u +%Y%m%d-%H%M%S)}
bin=target/release/gradcomp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
methods=${METHODS:-$("$bin" methods --json | python3 -c 'import json, sys; print(",".join(m["name"] for m in json.load(sys.stdin)["methods"]))')}
list=$(echo "$methods" | sed 's/[^,][^,]*/"&"/g; s/,/, /g')
mkdir -p "$out"
sed "s/^methods = .*/methods = [$list]/" bench-configs/reference-costs.toml > "$out/reference-costs.toml"
mpirun --oversubscribe --bind-to none -np 1 "$bin" run "$out/reference-costs.toml" --out "$out/run" --quiet
"$bin" fit "$out/run" --quiet
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo "+uncommitted")
src="reference fit, $(date -u +%Y-%m-%d), gradcomp $rev, $cpu ($(nproc) cores), 1 rank, bench-configs/reference-costs.toml at methods = [$list] + gradcomp fit"
# fits.csv: kind,name,phase,world_size,fixed_s,per_unit_s,... ; the compress rows per method
python3 - "$out/run/fits.csv" "$src" <<'PY'
import csv, sys
fits, src = {}, sys.argv[2].replace('"', '\\"')
for r in csv.DictReader(open(sys.argv[1])):
    if r["kind"] == "compress":
        fits.setdefault(r["name"], {})[r["phase"]] = (r["fixed_s"], r["per_unit_s"])
for m, ph in fits.items():
    print(f"// {m}")
    print("    reference_costs: super::spec::ReferenceCosts {")
    print(f'        source: "{src}",')
    for p in ("compress", "feedback", "decompress"):
        print(f"        {p}: super::spec::LinearCost::new({ph[p][0]}, {ph[p][1]}),")
    print("    },")
PY
echo "measured in $out: paste each method's field into its SPEC (src/compress/<method>.rs)" >&2
