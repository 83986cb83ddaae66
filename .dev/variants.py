import pandas as pd, numpy as np, sys, os, glob
out=sys.argv[1]; tol=0.15
def case_label_map(e):
    return e
def jitters(run, mode):
    e=pd.read_csv(run+'/e2e.csv')
    e=e[e.compress_on=='host'].copy()
    e['h']=e.host_compress_s+e.host_decompress_s
    e['key']=e.method+'|'+e.pipelining
    cnt=e.groupby('key')['h'].transform('count')
    e=e[cnt>1]
    med=e.groupby('key')['h'].transform('median')
    e['r']=e.h/med; e['w']=med
    def q(df):
        r=np.sort(df.r.values)
        return np.quantile(r,0.9)-np.quantile(r,0.1) if len(r)>=10 else np.nan
    if mode=='pooled':
        j=q(e); return lambda m: j
    if mode=='method':
        d={m:q(g) for m,g in e.groupby('method')}
        return lambda m: d.get(m,np.nan)
    if mode=='weighted':
        r=e.r.values; w=e.w.values; o=np.argsort(r); r=r[o]; w=w[o]
        c=(np.cumsum(w)-0.5*w)/w.sum()
        j=np.interp(0.9,c,r)-np.interp(0.1,c,r); return lambda m: j
    if mode=='methodmax':  # per-method but at least pooled over methods with share? 
        pass
def verdicts(name,np_,mode):
    run=f'tests/data/sim-accuracy/{name}/{np_}'
    v=pd.read_csv(f'{out}/{name}/{np_}/sim_vs_measured.csv').set_index('case')
    J=jitters(run,mode)
    res={}
    for k,r in v.iterrows():
        if r.verdict=='ranks-exceed-cores': res[k]=('rec',r.rel_err); continue
        own=[x for x in (r.spread_rel,r.fit_spread_rel) if pd.notna(x)]
        own=sum(own) if own else np.nan
        j=J(r.method.split('(')[0].split(':')[0])*r.host_compress_share if r.host_compress_share>0 else np.nan
        n=np.nanmax([own,j]) if not (np.isnan(own) and np.isnan(j)) else np.nan
        if pd.notna(n) and n>tol: vv='too-noisy'
        else: vv='within' if abs(r.rel_err)<=tol else 'outside'
        res[k]=(vv,r.rel_err)
    return res,v
pairs=[('zen4-epyc-2vcpu-twice-a','zen4-epyc-2vcpu-twice-b'),('zen4-epyc-2vcpu-interleaved-a','zen4-epyc-2vcpu-interleaved-b'),('zen4-epyc-2vcpu-jitter-c','zen4-epyc-2vcpu-jitter-d'),('xeon-emr-16vcpu-a','xeon-emr-16vcpu-b'),('h200-machine-16cpu-9rounds-a','h200-machine-16cpu-9rounds-b')]
for mode in sys.argv[2:]:
  print('==',mode)
  tot={}
  for d in sorted(os.listdir(out)):
    for np_ in ['np2','np4']:
      if not os.path.exists(f'{out}/{d}/{np_}/sim_vs_measured.csv'): continue
      res,v=verdicts(d,np_,mode)
      if mode=='pooled':
        mism=[(k,res[k][0],v.verdict[k]) for k in res if res[k][0]!=v.verdict[k] and v.verdict[k]!='ranks-exceed-cores']
        if mism: print('MISMATCH',d,np_,mism[:3])
      c=pd.Series([x[0] for x in res.values()]).value_counts()
      print(f'  {d} {np_} {dict(c)}')
  for a,b in pairs:
    for np_ in ['np2','np4']:
      if not os.path.exists(f'{out}/{a}/{np_}/sim_vs_measured.csv'): continue
      A,_=verdicts(a,np_,mode);B,_=verdicts(b,np_,mode)
      diff=[k for k in A if A[k][0]!=B[k][0]]
      print(f'  pair {a[-14:]} {np_}: same {len(A)-len(diff)}/{len(A)}', '; '.join(f"{k.split('/')[1]}/{k.split('/')[3]}/{k.split('/')[-2]} {A[k][0]}->{B[k][0]}" for k in diff))
