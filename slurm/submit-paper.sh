#!/usr/bin/env bash
# Submit one paper experiment (bench-configs/EXPERIMENT.toml) through slurm/gradcomp.sbatch,
# one job per world size, results in results/EXPERIMENT/<UTC stamp>/np<N>/ (a sweep folder
# that `python -m gradcomp_analysis report` reads as a whole). The per-paper helpers
# (slurm/submit-acpsgd-main.sh, ...) call this with their defaults.
#
#   slurm/submit-paper.sh EXPERIMENT [options] [-- extra sbatch options]
#     --np N[,N...]          world sizes, one job each, 1 to 1024 (the papers used 8 to 64;
#                            below 8 a note says so)                   [default: 32]
#     --tasks-per-node K     ranks per node (nodes = ceil(N/K))        [default: 4, like 4 GPUs per node]
#     --time T               job time limit in a Slurm format: MINUTES, MM:SS, HH:MM:SS, D-HH,
#                            D-HH:MM or D-HH:MM:SS                     [default: 01:00:00]
#     --network LABEL        label the runs (network.txt) for the network table, e.g. ib, eth-10g
#     --tcp                  force Open MPI onto TCP (OMPI_MCA_pml=ob1, btl self,vader,tcp): the
#                            Ethernet run of the network sweep on an InfiniBand cluster
#     --out DIR              sweep folder; a relative DIR is relative to the directory you run this
#                            from                [default: results/EXPERIMENT/<stamp> in the repository]
#     --dry-run              print the sbatch commands, submit nothing
#     -h, --help             print this help and exit
#   Environment: everything slurm/gradcomp.sbatch reads (GRADCOMP_BIN, GRADCOMP_SRUN_MPI, ...);
#   GRADCOMP_REPORT=1 writes each job's own report as well.
#
# Examples:
#   slurm/submit-paper.sh acpsgd-main --np 32 -- -p gpu -A myproject
#   slurm/submit-paper.sh acpsgd-scaling --np 8,16,32,64
set -euo pipefail
die() { echo "submit-paper.sh: error: $*" >&2; exit 2; }
# The comment block at the top of a script (its usage), without the '# '.
help_of() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$1"; }
USAGE="usage: slurm/submit-paper.sh EXPERIMENT [--np N[,N...]] [--tasks-per-node K] [--time T] [--network LABEL] [--tcp] [--out DIR] [--dry-run] [-- sbatch options]"

# --help anywhere before `--` (the per-paper helpers pass it on after their defaults).
for a in "$@"; do
  case $a in
    --) break ;;
    -h|--help) help_of "$0"; exit 0 ;;
  esac
done
# A relative --out is the caller's, so remember where that is before moving to the repository.
CALLER_PWD=$PWD
cd "$(dirname "$0")/.."
[[ $# -ge 1 && $1 != -* ]] || die "$USAGE"
EXP=$1; shift
CONFIG=bench-configs/$EXP.toml
[[ -f $CONFIG ]] || die "no config $CONFIG; experiments: $(cd bench-configs && ls *.toml | sed 's/\.toml$//' | tr '\n' ' ')"

NPS=32; TPN=4; TIME=01:00:00; NETWORK=""; TCP=0; OUT=""; DRY=0; EXTRA=()
need() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value; $USAGE"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --np) need "$@"; NPS=$2; shift 2 ;;
    --tasks-per-node) need "$@"; TPN=$2; shift 2 ;;
    --time) need "$@"; TIME=$2; shift 2 ;;
    --network) need "$@"; NETWORK=$2; shift 2 ;;
    --tcp) TCP=1; shift ;;
    --out) need "$@"; OUT=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (sbatch options go after --)" ;;
  esac
done
[[ $TPN =~ ^[1-9][0-9]*$ ]] || die "--tasks-per-node '$TPN' is not a positive integer"
[[ -z $NETWORK || $NETWORK =~ ^[A-Za-z0-9._-]+$ ]] || die "--network '$NETWORK': use letters, digits, . _ -"
# Slurm's time formats (sbatch --time): minutes, minutes:seconds, hours:minutes:seconds,
# days-hours, days-hours:minutes, days-hours:minutes:seconds.
[[ $TIME =~ ^([0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2})$ ]] ||
  die "--time '$TIME' is not a Slurm time: give MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 01:30:00)"
# A relative --out is relative to where this was run; the default lies in the repository.
# Either way the path is absolute from here on (the dry run prints it, sbatch's job gets it).
if [[ -z $OUT ]]; then
  OUT=$PWD/results/$EXP/$(date -u +%Y%m%d-%H%M%S)
elif [[ $OUT != /* ]]; then
  OUT=$CALLER_PWD/$OUT
fi
if ((TCP)); then
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
fi

# Before anything touches the disk: sbatch must be there (a dry run needs none).
if ((!DRY)) && ! command -v sbatch >/dev/null 2>&1; then
  die "sbatch not found on PATH: run this on a Slurm login node (or --dry-run to see the commands)"
fi

IFS=, read -ra LIST <<<"$NPS"
for n in "${LIST[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--np '$n' is not a positive integer"
  ((n >= 1 && n <= 1024)) || die "--np $n: give 1 to 1024 ranks"
  ((n >= 8)) || echo "submit-paper.sh: note: --np $n is below the papers' 8 to 64 ranks; the tables will not compare with the published ones at this scale" >&2
done

for n in "${LIST[@]}"; do
  nodes=$(( (n + TPN - 1) / TPN ))
  dir=$OUT/${NETWORK:+$NETWORK-}np$n
  cmd=(sbatch -J "gradcomp-$EXP" -N "$nodes" -n "$n" --ntasks-per-node="$TPN" -t "$TIME" "${EXTRA[@]}" slurm/gradcomp.sbatch)
  if ((DRY)); then
    echo "GRADCOMP_CONFIG=$CONFIG GRADCOMP_OUT=$dir${TCP:+$( ((TCP)) && echo " OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp")} ${cmd[*]}"
    continue
  fi
  [[ ! -e $dir/e2e.csv ]] || die "$dir already holds results; choose another --out"
  created=0; [[ -d $dir ]] || created=1
  mkdir -p "$dir"
  [[ -z $NETWORK ]] || echo "$NETWORK" > "$dir/network.txt"
  if ! GRADCOMP_CONFIG=$CONFIG GRADCOMP_OUT=$dir "${cmd[@]}"; then
    # A refused submission leaves no folder behind that looks like a pending run.
    if ((created)); then rm -f "$dir/network.txt"; rmdir "$dir" 2>/dev/null || true; fi
    die "sbatch refused the job for --np $n (its message above); nothing was submitted for $dir"
  fi
done
if ((DRY)); then
  echo "submit-paper.sh: dry run: nothing submitted, nothing written (results would go to $OUT)"
  exit 0
fi
echo "submit-paper.sh: results go to $OUT; when the jobs are done:"
echo "  PYTHONPATH=analysis .venv/bin/python -m gradcomp_analysis report $OUT"
