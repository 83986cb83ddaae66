#!/usr/bin/env bash
# ACP-SGD main table (acpsgd_main, acpsgd_speedup_summary): 32 ranks, 8 nodes x 4.
# Config: bench-configs/acpsgd-main.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-acpsgd-main.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" acpsgd-main --np 32 --time 01:00:00 "$@"
