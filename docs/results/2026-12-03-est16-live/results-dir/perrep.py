import json,collections,sys,statistics
# per repetition: ns in/out and x floor; then pooled per config
pool=collections.defaultdict(lambda: {'ns':[], 'x':[]})
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
        reps[r['rep']][r['config']]={h:(v[0]/v[1]) for h,v in ns.items() if v[1]}
    for rep in sorted(reps):
        fl=reps[rep].get('tcx-floor',{})
        line=[f"{d.split('/')[-1]} r{rep} floor {fl.get('ingress',0):.0f}/{fl.get('egress',0):.0f}"]
        for c,hs in reps[rep].items():
            if not c.startswith('sluice'): continue
            x=[hs[h]/fl[h] for h in ('ingress','egress') if h in hs and fl.get(h)]
            line.append(f"{c.replace('sluice-stateful-at-','at')} {hs.get('ingress',0):.0f}/{hs.get('egress',0):.0f} ({'/'.join(f'{v:.2f}' for v in x)})")
            for h in ('ingress','egress'):
                if h in hs:
                    pool[c]['ns'].append(hs[h])
                    if fl.get(h): pool[c]['x'].append(hs[h]/fl[h])
        pool['tcx-floor']['ns'] += [fl[h] for h in fl]
        print(' | '.join(line))
def rng(v,f): return f"{f(min(v))}–{f(max(v))} ({f(statistics.median(v))})" if v else '-'
print('| config | ns | × floor | n |')
for c in sorted(pool):
    print(f"| {c} | {rng(pool[c]['ns'],lambda x:f'{x:.0f}')} | {rng(pool[c]['x'],lambda x:f'{x:.2f}')} | {len(pool[c]['ns'])} |")
