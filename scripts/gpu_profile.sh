#!/usr/bin/env bash
# Measure the device compression profile of every paper-scale model on a GPU
# (docs/device.md, "The device model against measurements"): one script, so that a
# lent GPU's few minutes go to measurements, not to typing.
#
#   usage: scripts/gpu_profile.sh SHAPES_DIR OUT_DIR REVISION
#
# SHAPES_DIR holds `gradcomp models NAME` listings (the GPU machine needs no gradcomp
# binary): scripts/gpu_profile.sh reads resnet50 resnet152 bert-base bert-large vgg16
# alexnet-caffe lstm-ptb. OUT_DIR gets (each step bounded by `timeout`, so what finished
# is kept when a later step runs out of time):
#   log.txt              provenance (nvidia-smi, driver, CUDA, PyTorch, date, gradcomp
#                        REVISION), what the scripts printed, each step's exit status
#   profile-ws16-{a,b}.csv  every method (a: ssgd, signsgd, signsgd-mv, topk, dgc; b:
#                        powersgd, acpsgd, marsit, sketch, qsgd), every distinct shape of
#                        the seven models, 16 workers
#   kernels.csv          analysis/profile_kernels.py (kernel families over sizes)
#   profile-r32-ws32.csv powersgd, acpsgd at rank 32 on the ACP-SGD models, 32 workers
#   profile-ws{8,32,64}.csv  the all-gather methods the scalability headline runs (topk,
#                        signsgd) on its models at 8, 32 and 64 workers
#   profile-sketch-ws{16,8,32,64}.csv  Count Sketch at its own default size (density 0.0076,
#                        2 rows x 10 columns per kept element; the others above are at
#                        0.001 and 10):
#                        every shape at 16 workers, the scalability models at 8, 32, 64
# STEPS (an extended regex, default: every step) runs only the steps whose name matches,
# e.g. STEPS='^profile-sketch' for the default-size sketch profiles alone.
set -uo pipefail
SHAPES=${1:?usage: scripts/gpu_profile.sh SHAPES_DIR OUT_DIR REVISION}
OUT=${2:?usage: scripts/gpu_profile.sh SHAPES_DIR OUT_DIR REVISION}
REV=${3:?usage: scripts/gpu_profile.sh SHAPES_DIR OUT_DIR REVISION}
PY=${PYTHON:-python3}
# ITERS, WARMUP, DEVICE (cpu: a test of this script), KERNELS_QUICK, LIMIT_*: see below.
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
LOG=$OUT/log.txt

{
    echo "gradcomp revision: $REV"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name())'
    nvidia-smi
} >"$LOG" 2>&1

# union SHAPES_FILE MODEL...: the distinct ROWSxCOLS of the models, one per line.
union() {
    local out=$1
    shift
    "$PY" - "$SHAPES" "$out" "$@" <<'EOF'
import sys
sys.path.insert(0, "analysis")
import profile_compress as pc
shapes_dir, out, models = sys.argv[1], sys.argv[2], sys.argv[3:]
shapes = []
for m in models:
    shapes += pc.read_shapes_file(f"{shapes_dir}/{m}.txt")
with open(out, "w") as f:
    f.write("# distinct shapes of " + ", ".join(models) + "\n")
    for r, c in pc.distinct(shapes):
        f.write(f"{r}x{c}\n")
EOF
}

# step NAME SECONDS CMD...: run CMD with a time limit, log its status.
step() {
    local name=$1 limit=$2
    shift 2
    if ! [[ $name =~ ${STEPS:-.} ]]; then
        echo "== $name: skipped (STEPS=$STEPS)" >>"$LOG"
        return
    fi
    local t0=$SECONDS
    echo "== $name (limit ${limit}s): $*" >>"$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
}

TMP=$(mktemp -d)
union "$TMP/all.txt" resnet50 resnet152 bert-base bert-large vgg16 alexnet-caffe lstm-ptb
union "$TMP/acp.txt" resnet50 resnet152 bert-base bert-large
union "$TMP/scaling.txt" resnet50 vgg16 bert-base
DEV=${DEVICE:-cuda}
# The sizes scripts/paper_scale.sh simulates: density 0.001 for every sparsifier, Count
# Sketch's included, with 10 columns per kept element (not Count Sketch's default 0.0076
# and 20: the recorded profiles, docs/data/h200-*, h100-*, were taken at these).
PROFILE=("$PY" analysis/profile_compress.py --device "$DEV" --iters "$ITERS" --warmup "$WARMUP")
PC=("${PROFILE[@]}" --density 0.001 --sketch-cols-per-k 10)
step profile-ws16-a ${LIMIT_WS16:-150} "${PC[@]}" --shapes-from "$TMP/all.txt" \
    --methods ssgd,signsgd,signsgd-mv,topk,dgc --world-size 16 --out "$OUT/profile-ws16-a.csv"
step profile-ws16-b ${LIMIT_WS16:-150} "${PC[@]}" --shapes-from "$TMP/all.txt" \
    --methods powersgd,acpsgd,marsit,sketch,qsgd --world-size 16 --out "$OUT/profile-ws16-b.csv"
step kernels ${LIMIT_KERNELS:-90} "$PY" analysis/profile_kernels.py --device "$DEV" ${KERNELS_QUICK:+--quick} --iters "$ITERS" --warmup "$WARMUP" \
    --out "$OUT/kernels.csv"
step profile-r32-ws32 ${LIMIT_R32:-60} "${PC[@]}" --shapes-from "$TMP/acp.txt" --methods powersgd,acpsgd \
    --lowrank-rank 32 --world-size 32 --out "$OUT/profile-r32-ws32.csv"
for ws in 8 32 64; do
    step "profile-ws$ws" ${LIMIT_WS:-35} "${PC[@]}" --shapes-from "$TMP/scaling.txt" --methods topk,signsgd \
        --world-size "$ws" --out "$OUT/profile-ws$ws.csv"
done
# Count Sketch at its own default size (src/compress/params.rs: SKETCH_DENSITY,
# SKETCH_COLS_PER_K; docs/methods.md, "sketch"): no --density, no --sketch-cols-per-k.
PC0=("${PROFILE[@]}" --methods sketch)
step profile-sketch-ws16 ${LIMIT_WS16:-150} "${PC0[@]}" --shapes-from "$TMP/all.txt" --world-size 16 \
    --out "$OUT/profile-sketch-ws16.csv"
for ws in 8 32 64; do
    step "profile-sketch-ws$ws" ${LIMIT_WS:-35} "${PC0[@]}" --shapes-from "$TMP/scaling.txt" --world-size "$ws" \
        --out "$OUT/profile-sketch-ws$ws.csv"
done
rm -rf "$TMP"
