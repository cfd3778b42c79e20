import json,sys,collections,statistics
# pools per config: ns (in and out) and x floor of the same repetition, by tag (new/old)
acc=collections.defaultdict(lambda: collections.defaultdict(lambda: {'ns':[], 'x':[]}))
fl_acc=collections.defaultdict(list)
for d in sys.argv[1:]:
    tag='new' if 'new' in d.split('/')[-1] else 'old'
    reps=collections.defaultdict(dict)
    for l in open(d+'/results.jsonl'):
        r=json.loads(l)
        if r.get('kind')!='rep': continue
        r=r['rep']
        if 'config' not in r or r.get('rep',0)<1 or r.get('error'): continue
        ns={}
        for p in r.get('bpf') or []:
            h=p['hook']; ns.setdefault(h,[0,0]); ns[h][0]+=p['run_ns']; ns[h][1]=max(ns[h][1],p['run_cnt'])
        reps[r['rep']][r['config']]={h:(v[0]/v[1]) for h,v in ns.items() if v[1]}
    for rep,cf in reps.items():
        fl=cf.get('tcx-floor') or cf.get('tcx-floor-gw') or {}
        for h in ('ingress','egress'):
            if h in fl: fl_acc[tag].append(fl[h])
        for c,hs in cf.items():
            if not c.startswith('sluice'): continue
            for h,v in hs.items():
                acc[c][tag]['ns'].append(v)
                if fl.get(h): acc[c][tag]['x'].append(v/fl[h])
def rng(v,f): return f"{f(min(v))}–{f(max(v))} ({f(statistics.median(v))})" if v else '-'
for tag in ('old','new'):
    if fl_acc[tag]: print('floor',tag,rng(fl_acc[tag],lambda x:f"{x:.0f}"))
print('| config | old ns | new ns | old × floor | new × floor |')
for c in sorted(acc):
    o,n=acc[c]['old'],acc[c]['new']
    print(f"| {c} | {rng(o['ns'],lambda x:f'{x:.0f}')} | {rng(n['ns'],lambda x:f'{x:.0f}')} | {rng(o['x'],lambda x:f'{x:.2f}')} | {rng(n['x'],lambda x:f'{x:.2f}')} |  n={len(o['x'])}/{len(n['x'])}")
