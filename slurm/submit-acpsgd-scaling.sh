#!/usr/bin/env bash
# ACP-SGD scaling (acpsgd_scaling): one job each at 8, 16, 32, 64 ranks into one sweep folder.
# Config: bench-configs/acpsgd-scaling.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-acpsgd-scaling.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" acpsgd-scaling --np 8,16,32,64 --time 01:00:00 "$@"
