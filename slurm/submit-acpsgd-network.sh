#!/usr/bin/env bash
# ACP-SGD network sweep (acpsgd_network): the main config (bench-configs/acpsgd-main.toml)
# once per network, each run labelled (network.txt) and all in one sweep folder. gradcomp
# has no network emulation: a "network" is a real interconnect, chosen by partition
# (sbatch -p) or, on an InfiniBand cluster, by forcing Open MPI onto TCP (--tcp).
#
#   slurm/submit-acpsgd-network.sh                      # default: "ib" (as is) + "tcp" (--tcp), 32 ranks
#   slurm/submit-acpsgd-network.sh LABEL [--tcp] [--np N] [-- -p PARTITION]   # one labelled run
#   # e.g. two partitions:  ... eth-10g -- -p eth ; ... ib-100g -- -p ib   (same --out for both)
# Report the sweep folder printed at the end (both runs must share it: pass --out DIR; a
# relative DIR is relative to the directory you run this from).
#   slurm/submit-acpsgd-network.sh [--dry-run] [--np N] [--out DIR] [-- ...]  # the default pair, options passed on
# Other options (--time T, --tasks-per-node K): slurm/submit-paper.sh --help.
set -euo pipefail
here=$(dirname "$0")
usage="usage: slurm/submit-acpsgd-network.sh [LABEL [--tcp]] [--np N] [--out DIR] [--dry-run] [-- sbatch options]"
for a in "$@"; do
  case $a in
    --) break ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$here/submit-paper.sh" --help ;;
  esac
done
# No label (nothing, or options first): the default pair, every option passed on to both.
if [[ $# -eq 0 || $1 == -* ]]; then
  case ${1:-} in
    --tcp) echo "submit-acpsgd-network.sh: error: --tcp needs a LABEL (the default pair already runs one tcp job); $usage" >&2; exit 2 ;;
  esac
  # The default sweep folder lies in the repository (a relative --out given after it is the caller's).
  out=$(cd "$here/.." && pwd)/results/acpsgd-network/$(date -u +%Y%m%d-%H%M%S)
  "$here/submit-paper.sh" acpsgd-main --np 32 --network ib --out "$out" "$@"
  "$here/submit-paper.sh" acpsgd-main --np 32 --network tcp --tcp --out "$out" "$@"
  exit 0
fi
label=$1; shift
[[ $label =~ ^[A-Za-z0-9._-]+$ ]] || { echo "submit-acpsgd-network.sh: error: LABEL '$label': use letters, digits, . _ -; $usage" >&2; exit 2; }
exec "$here/submit-paper.sh" acpsgd-main --np 32 --network "$label" "$@"
