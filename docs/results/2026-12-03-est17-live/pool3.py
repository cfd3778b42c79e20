import json,collections,sys,statistics,re
# est17: per repetition ns in/out and × the trivial program of the same repetition, by variant
# (the directory's name without its run number: old, a, b); then pooled per variant and config,
# and each sluice config's value minus old's of the same round and hook (rounds paired by number).
pool=collections.defaultdict(lambda: {'ns':[], 'x':[]})
byrun=collections.defaultdict(dict)   # (round, variant) -> {(config,hook): ns}
for d in sys.argv[1:]:
    name=d.rstrip('/').split('/')[-1]
    m=re.match(r'([a-z]+)(\d+)$', name); var,rnd=m.group(1),int(m.group(2))
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
        line=[f"{name} r{rep} floor {fl.get('ingress',0):.0f}/{fl.get('egress',0):.0f}"]
        for c,hs in reps[rep].items():
            if not c.startswith('sluice'): continue
            x=[hs[h]/fl[h] for h in ('ingress','egress') if h in hs and fl.get(h)]
            line.append(f"{c.replace('sluice-','')} {hs.get('ingress',0):.0f}/{hs.get('egress',0):.0f} ({'/'.join(f'{v:.2f}' for v in x)})")
            for h in ('ingress','egress'):
                if h in hs:
                    pool[(c,var)]['ns'].append(hs[h])
                    if fl.get(h): pool[(c,var)]['x'].append(hs[h]/fl[h])
                    byrun[(rnd,var)][(c,h,rep)]=hs[h]/fl[h] if fl.get(h) else None
        pool[('tcx-floor',var)]['ns'] += [fl[h] for h in fl]
        print(' | '.join(line))
def rng(v,f): return f"{f(min(v))}–{f(max(v))} ({f(statistics.median(v))})" if v else '-'
print('| config | variant | ns | × floor | n |')
for (c,var) in sorted(pool):
    p=pool[(c,var)]
    print(f"| {c} | {var} | {rng(p['ns'],lambda x:f'{x:.0f}')} | {rng(p['x'],lambda x:f'{x:.2f}')} | {len(p['ns'])} |")
print('× floor minus old\'s of the same round, repetition and hook: median (how many below 0 of n)')
diff=collections.defaultdict(list)
for (rnd,var),vals in byrun.items():
    if var=='old' or (rnd,'old') not in byrun: continue
    o=byrun[(rnd,'old')]
    for k,v in vals.items():
        if v is not None and o.get(k) is not None: diff[(k[0],var)].append(v-o[k])
for (c,var),v in sorted(diff.items()):
    print(f"  {c:20s} {var}: {statistics.median(v):+.3f}  ({sum(1 for x in v if x<0)} of {len(v)} below)")
