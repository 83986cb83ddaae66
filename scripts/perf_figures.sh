#!/usr/bin/env bash
# Reproduces the figures of docs/performance.md on this machine (results/perf-<stamp>/):
#  1. compression kernels on one thread, ResNet-50-sized gradient (issue targets):
#     micro-compress -np 1 on 25,557,032 elements (1-D) and 5057x5054 (matrix);
#  2. e2e adds no hidden cost: ssgd, compute off, one fusion buffer, comm_s vs micro-comm
#     all-reduce of the same bytes (same ranks);
#  3. pipelined ssgd with compute longer than communication: iter_s vs
#     fwd_s + bwd_s + last_bucket_s;
#  4. BERT-Large on 4 ranks: peak memory per rank vs the fp32 gradient.
# Usage: bash scripts/perf_figures.sh [all|kernels|e2e|bert]   (run on an idle machine)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
B=target/release/gradcomp
[[ -x $B ]] || cargo build --release
OUT=results/perf-$(date -u +%Y%m%d-%H%M%S)
MPI="mpirun --oversubscribe --bind-to none"
mkdir -p "$OUT"
if [[ $what == all || $what == kernels ]]; then
  $MPI -np 1 $B micro-compress --methods ssgd,signsgd,topk,dgc,powersgd,acpsgd,marsit,sketch,qsgd \
      --shape 25557032,5057x5054 --iters 10 --warmup 2 --quiet --out "$OUT/kernels"
fi
if [[ $what == all || $what == e2e ]]; then
  # 102,228,128 bytes = ResNet-50's fp32 gradient.
  $MPI -np 2 $B micro-comm --collectives allreduce --sizes 102228128 --iters 10 --warmup 2 --quiet --out "$OUT/comm"
  $MPI -np 2 $B e2e --model resnet50 --methods ssgd --fusion single --pipelining off --compute none \
      --iters 10 --warmup 2 --quiet --out "$OUT/e2e-nocompute"
  # rtx2080ti, batch 128: backward longer than the communication (docs/performance.md,
  # "End-to-end engine": 131 ms against 67 ms on the 2-vCPU development machine).
  $MPI -np 2 $B e2e --model resnet50 --methods ssgd --fusion 25MiB --pipelining on --device rtx2080ti --batch 128 \
      --iters 10 --warmup 2 --quiet --out "$OUT/e2e-pipelined"
fi
if [[ $what == all || $what == bert ]]; then
  $MPI -np 4 $B e2e --model bert-large --methods ssgd,topk,powersgd --fusion 25MiB,single --pipelining on \
      --compute none --iters 2 --warmup 1 --quiet --out "$OUT/bert-large"
fi
python3 - "$OUT" <<'PY'
import csv, os, sys
out = sys.argv[1]
def rows(p):
    p = os.path.join(out, p)
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
for r in rows("kernels/micro_compress.csv"):
    print(f"kernels {r['method']:>9} {r['rows']}x{r['cols']}: compress {float(r['compress_s'])*1e3:8.2f} ms  feedback {float(r['feedback_s'])*1e3:7.3f} ms  "
          f"decompress {float(r['decompress_s'])*1e3:8.2f} ms  input {float(r['input_gbps']):6.2f} GB/s  mem_frac {float(r['mem_frac']):.2f}  (probe {float(r['mem_read_gbps']):.1f} GB/s)")
c, e = rows("comm/micro_comm.csv"), rows("e2e-nocompute/e2e.csv")
if c and e:
    a, b = float(c[0]["median_s"]), float(e[0]["comm_s"])
    print(f"no hidden cost: micro-comm allreduce {a*1e3:.2f} ms, e2e ssgd single comm_s {b*1e3:.2f} ms, ratio {b/a:.3f}")
for r in rows("e2e-pipelined/e2e.csv"):
    f, bw, lb, it = (float(r[k]) for k in ("fwd_s", "bwd_s", "last_bucket_s", "iter_s"))
    print(f"pipelined: iter {it*1e3:.2f} ms vs fwd+bwd+last bucket {(f+bw+lb)*1e3:.2f} ms, ratio {it/(f+bw+lb):.3f}; comm {float(r['comm_s'])*1e3:.1f} ms, bwd {bw*1e3:.1f} ms")
for r in rows("bert-large/e2e.csv"):
    print(f"bert-large {r['method']:>8} {r['fusion']:>6}: peak RSS so far {int(r['peak_rss_bytes'])/2**30:.2f} GiB = {int(r['peak_rss_bytes'])/int(r['dense_bytes']):.2f} x fp32 gradient; iter {float(r['iter_s']):.2f} s")
PY
echo "results: $OUT"
