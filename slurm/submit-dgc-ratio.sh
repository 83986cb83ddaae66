#!/usr/bin/env bash
# DGC gradient vs message size (dgc_ratio): 8 ranks (sizes do not depend on the world size).
# Config: bench-configs/dgc-ratio.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-dgc-ratio.sh [--np N[,N...]] [--time T] [-- -p PARTITION -A ACCOUNT]
for a in "$@"; do case $a in --) break ;; -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;; esac; done
exec "$(dirname "$0")/submit-paper.sh" dgc-ratio --np 8 --time 00:30:00 "$@"
