#!/usr/bin/env bash
# ACP-SGD network sweep (acpsgd_network): the main config (bench-configs/acpsgd-main.toml)
# once per network, each run labelled (network.txt) and all in one sweep folder. gradcomp
# has no network emulation: a "network" is a real interconnect, chosen by partition
# (sbatch -p) or, on an InfiniBand cluster, by forcing Open MPI onto TCP (--tcp).
#
#   slurm/submit-acpsgd-network.sh                      # default: "ib" (as is) + "tcp" (--tcp), 32 ranks
#   slurm/submit-acpsgd-network.sh LABEL [--tcp] [--np N] [-- -p PARTITION]   # one labelled run
#   # e.g. two partitions:  ... eth-10g -- -p eth ; ... ib-100g -- -p ib   (same --out for both)
# Report the sweep folder printed at the end (both runs must share it: pass --out DIR).
#   slurm/submit-acpsgd-network.sh [--dry-run] [--np N] [--out DIR] [-- ...]  # the default pair, options passed on
set -euo pipefail
here=$(dirname "$0")
usage="usage: slurm/submit-acpsgd-network.sh [LABEL [--tcp]] [--np N] [--out DIR] [--dry-run] [-- sbatch options]"
# No label (nothing, or options first): the default pair, every option passed on to both.
if [[ $# -eq 0 || $1 == -* ]]; then
  case ${1:-} in
    --tcp) echo "submit-acpsgd-network.sh: error: --tcp needs a LABEL (the default pair already runs one tcp job); $usage" >&2; exit 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
  esac
  out=results/acpsgd-network/$(date -u +%Y%m%d-%H%M%S)
  "$here/submit-paper.sh" acpsgd-main --np 32 --network ib --out "$out" "$@"
  "$here/submit-paper.sh" acpsgd-main --np 32 --network tcp --tcp --out "$out" "$@"
  exit 0
fi
label=$1; shift
[[ $label =~ ^[A-Za-z0-9._-]+$ ]] || { echo "submit-acpsgd-network.sh: error: LABEL '$label': use letters, digits, . _ -; $usage" >&2; exit 2; }
exec "$here/submit-paper.sh" acpsgd-main --np 32 --network "$label" "$@"
