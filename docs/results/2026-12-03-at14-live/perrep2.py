import json,sys,collections,statistics
# per config: ns in/out per rep, and ratio to tcx-floor of the same rep (pooled in+out)
allv=collections.defaultdict(list); allr=collections.defaultdict(list); order=[]
for d in sys.argv[1:]:
    reps=collections.defaultdict(dict)
    for l in open(d+'/results.jsonl'):
        r=json.loads(l)
        if r.get('kind')!='rep': continue
        r=r['rep']
        if 'config' not in r or r.get('rep',0)<1 or r.get('error'): continue
        ns={}
        for p in r.get('bpf') or []:
            h=p['hook']; ns.setdefault(h,[0,0]); ns[h][0]+=p['run_ns']; ns[h][1]=max(ns[h][1],p['run_cnt'])
        reps[r['rep']][r['config']]={h:(v[0]/v[1] if v[1] else float('nan')) for h,v in ns.items()}
        if r['config'] not in order: order.append(r['config'])
    for rep,cf in reps.items():
        fl=cf.get('tcx-floor',{})
        for c,h in cf.items():
            for k in ('ingress','egress'):
                if k in h:
                    allv[c].append(h[k])
                    if fl.get(k): allr[c].append(h[k]/fl[k])
fm=statistics.median(allv['tcx-floor']) if allv['tcx-floor'] else 0
print(f"{'config':24s} {'ns range':>12s} {'median':>7s} {'-floor':>7s} {'x floor range':>14s} {'median':>6s} n")
for c in order:
    v=allv[c]; r=allr[c]
    if not v: continue
    print(f"{c:24s} {min(v):5.0f}-{max(v):<5.0f} {statistics.median(v):7.0f} {statistics.median(v)-fm:+7.0f} {min(r):6.2f}-{max(r):<6.2f} {statistics.median(r):6.2f} {len(v)}")
