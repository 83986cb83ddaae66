#!/usr/bin/env bash
# ACP-SGD rank sweep (acpsgd_rank_sweep): 32 ranks.
# Config: bench-configs/acpsgd-rank-sweep.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-acpsgd-rank-sweep.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" acpsgd-rank-sweep --np 32 --time 01:00:00 "$@"
