import pandas as pd, sys, os
out=sys.argv[1]
pairs=[('zen4-epyc-2vcpu-twice-a','zen4-epyc-2vcpu-twice-b'),('zen4-epyc-2vcpu-interleaved-a','zen4-epyc-2vcpu-interleaved-b'),('zen4-epyc-2vcpu-jitter-c','zen4-epyc-2vcpu-jitter-d'),('xeon-emr-16vcpu-a','xeon-emr-16vcpu-b'),('h200-machine-16cpu-9rounds-a','h200-machine-16cpu-9rounds-b')]
cols=['verdict','rel_err','rounds','spread_rel','host_compress_share','fit_spread_rel','host_jitter_rel']
for a,b in pairs:
  for np_ in ['np2']:
    A=pd.read_csv(f'{out}/{a}/{np_}/sim_vs_measured.csv').set_index('case')[cols]
    B=pd.read_csv(f'{out}/{b}/{np_}/sim_vs_measured.csv').set_index('case')[cols]
    for k in A.index:
      if A.verdict[k]!=B.verdict[k] or 'all' in sys.argv[2:]:
        s=k.split('/'); short=f'{s[1]}/{s[3]}/{s[-2]}'
        for n,X in ((a,A),(b,B)):
          r=X.loc[k]
          print(f'{n[-12:]:>12} {short:40} {r.verdict:10} err {r.rel_err:+.3f} spread {r.spread_rel:.3f} fit {r.fit_spread_rel:.3f} jit {r.host_jitter_rel:.3f} share {r.host_compress_share:.2f}')
