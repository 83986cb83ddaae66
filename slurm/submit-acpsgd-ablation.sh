#!/usr/bin/env bash
# ACP-SGD ablation of all-reduce / pipelining / fusion (acpsgd_ablation): 32 ranks.
# Config: bench-configs/acpsgd-ablation.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-acpsgd-ablation.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" acpsgd-ablation --np 32 --time 01:30:00 "$@"
