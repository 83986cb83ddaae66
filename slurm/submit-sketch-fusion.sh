#!/usr/bin/env bash
# Sketch-Fusion: each compressor with and without LayerFusion (sketch_fusion), 16 ranks as
# in the paper; --scaling: one job each at 8, 16, 32, 64 ranks (sketch_scaling).
# Config: bench-configs/sketch-fusion.toml. Options and sbatch options (after --): see slurm/submit-paper.sh.
#   slurm/submit-sketch-fusion.sh [--scaling] [--np N[,N...]] [--time T] [-- -p PARTITION]
# --scaling may stand anywhere before `--`; a later --np still wins (submit-paper.sh reads
# the last --np).
np=16
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --scaling) np=8,16,32,64; shift ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; echo; exec "$(dirname "$0")/submit-paper.sh" --help ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
exec "$(dirname "$0")/submit-paper.sh" sketch-fusion --np "$np" --time 01:00:00 "${args[@]}"
