#!/usr/bin/env bash
# Regenerate src/sim/model/reference_costs.csv, the simulator's default compression costs:
# run bench-configs/reference-costs.toml on one rank, fit it (`gradcomp fit`), and keep
# the compression rows with their provenance (machine, command, date, revision).
# Usage: scripts/reference_costs.sh [OUT_DIR]   (then rebuild: the CSV is compiled in)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/reference-costs-$(date -u +%Y%m%d-%H%M%S)}
bin=target/release/gradcomp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe --bind-to none -np 1 "$bin" run bench-configs/reference-costs.toml --out "$out" --quiet
"$bin" fit "$out" --quiet
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo "+uncommitted")
{
  echo "# source: reference fit, $(date -u +%Y-%m-%d), gradcomp $rev, $cpu ($(nproc) cores), 1 rank, bench-configs/reference-costs.toml + gradcomp fit"
  echo "method,phase,fixed_s,per_element_s"
  # fits.csv: kind,name,phase,world_size,fixed_s,per_unit_s,... ; keep the compress rows
  python3 - "$out/fits.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["kind"] == "compress":
        print(f'{r["name"]},{r["phase"]},{r["fixed_s"]},{r["per_unit_s"]}')
PY
} > src/sim/model/reference_costs.csv
echo "wrote src/sim/model/reference_costs.csv from $out"
