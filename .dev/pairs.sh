#!/bin/bash
# replay corpus, compare verdicts of pairs. usage: pairs.sh BIN OUT
BIN=${1:-target/release/gradcomp}; OUT=${2:-/tmp/rp}
rm -rf $OUT; mkdir -p $OUT
for r in tests/data/sim-accuracy/*/np*; do
  n=$(basename $(dirname $r))/$(basename $r)
  $BIN simulate --fits $r --compare $r/e2e.csv --tolerance 0.15 --out $OUT/$n >$OUT/${n//\//_}.log 2>&1
done
.venv/bin/python - "$OUT" <<'PY'
import pandas as pd, sys, os
out=sys.argv[1]
def load(n,np_):
    p=f'{out}/{n}/{np_}/sim_vs_measured.csv'
    if not os.path.exists(p): return None
    return pd.read_csv(p).set_index('case')
pairs=[('zen4-epyc-2vcpu-twice-a','zen4-epyc-2vcpu-twice-b'),('zen4-epyc-2vcpu-interleaved-a','zen4-epyc-2vcpu-interleaved-b'),('zen4-epyc-2vcpu-jitter-c','zen4-epyc-2vcpu-jitter-d'),('xeon-emr-16vcpu-a','xeon-emr-16vcpu-b'),('h200-machine-16cpu-9rounds-a','h200-machine-16cpu-9rounds-b')]
for a,b in pairs:
  for np_ in ['np2','np4']:
    A=load(a,np_);B=load(b,np_)
    if A is None or B is None: continue
    j=A[['verdict','rel_err']].join(B[['verdict','rel_err']],rsuffix='_b')
    same=(j.verdict==j.verdict_b).sum()
    diff=j[j.verdict!=j.verdict_b]
    print(f'{a} {np_}: same {same}/{len(j)}', ' | '.join(f'{k.split("/")[0] if False else k}: {r.verdict} {r.rel_err:+.3f} -> {r.verdict_b} {r.rel_err_b:+.3f}' for k,r in diff.iterrows()))
for d in sorted(os.listdir(out)):
  for np_ in ['np2','np4']:
    A=load(d,np_)
    if A is None: continue
    print(d,np_,dict(A.verdict.value_counts()))
PY
