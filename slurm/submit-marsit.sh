#!/usr/bin/env bash
# Marsit vs S-SGD vs Sign-SGD (marsit): 16 ranks.
# Config: bench-configs/marsit.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-marsit.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" marsit --np 16 --time 01:00:00 "$@"
