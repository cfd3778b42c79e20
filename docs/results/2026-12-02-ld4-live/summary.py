import json,sys,collections,statistics as st
cfgs=['tcx-floor','sluice-stateless','sluice-nomatch-10000','sluice-nomatch-1000000']
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
        reps[r['rep']][r['config']]={h:v[0]/v[1] for h,v in ns.items() if v[1]}
    med={c:[st.median(reps[k][c][h] for k in reps) for h in ('ingress','egress')] for c in cfgs}
    rat={c:[st.median(reps[k][c][h]/reps[k]['tcx-floor'][h] for k in reps) for h in ('ingress','egress')] for c in cfgs}
    ratmin={c:[min(reps[k][c][h]/reps[k]['tcx-floor'][h] for k in reps) for h in ('ingress','egress')] for c in cfgs}
    ratmax={c:[max(reps[k][c][h]/reps[k]['tcx-floor'][h] for k in reps) for h in ('ingress','egress')] for c in cfgs}
    row=[d.split('/')[-1]]
    f=med['tcx-floor']; row.append(f"{f[0]:.0f} / {f[1]:.0f}")
    s=med['sluice-stateless']; row.append(f"{s[0]:.0f} / {s[1]:.0f} ({rat['sluice-stateless'][0]:.2f} / {rat['sluice-stateless'][1]:.2f})")
    for c in cfgs[2:]:
        m=med[c]; row.append(f"{m[0]:.0f} / {m[1]:.0f} ({rat[c][0]:.2f} / {rat[c][1]:.2f}; {m[0]-s[0]:+.0f} / {m[1]-s[1]:+.0f})")
    print('| '+' | '.join(row)+' |')
    print('   per-rep × floor ranges:', {c.replace('sluice-',''):f"{ratmin[c][0]:.2f}–{ratmax[c][0]:.2f} / {ratmin[c][1]:.2f}–{ratmax[c][1]:.2f}" for c in cfgs[1:]})
