#!/usr/bin/env bash
# OMGS-SGD vs layer-wise Top-k vs S-SGD/MG-WFBP (omgs): 16 ranks as in the paper.
# Config: bench-configs/omgs.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-omgs.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" omgs --np 16 --time 01:00:00 "$@"
