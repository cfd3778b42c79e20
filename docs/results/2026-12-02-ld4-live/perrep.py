import json,sys,collections
# per repetition: none Trans/s, and per config: in/out ns and ratio to tcx-floor of same rep
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
        reps[r['rep']][r['config']]=(r.get('trans_per_s',0),{h:(v[0]/v[1] if v[1] else float('nan')) for h,v in ns.items()})
    print('==',d)
    for rep in sorted(reps):
        cf=reps[rep]; fl=cf.get('tcx-floor',(0,{}))[1]
        line=[f"rep{rep} none {cf.get('none',(0,))[0]:.0f}/s"]
        for c,(tps,h) in cf.items():
            if c=='none': continue
            s=c.replace('sluice-','s-')
            i=h.get('ingress',float('nan')); o=h.get('egress',float('nan'))
            fi=fl.get('ingress'); fo=fl.get('egress')
            rat=f" ({i/fi:.2f}x/{o/fo:.2f}x)" if fi and fo and c.startswith('sluice') else ''
            line.append(f"{s} {i:.0f}/{o:.0f}{rat}")
        print('  '+' | '.join(line))

print("== Δ rate vs none of the same repetition, median over reps (all dirs)")
import statistics
acc=collections.defaultdict(list)
for d in sys.argv[1:]:
    tag='new' if 'new' in d else 'old'
    reps=collections.defaultdict(dict)
    for l in open(d+'/results.jsonl'):
        r=json.loads(l)
        if r.get('kind')!='rep': continue
        r=r['rep']
        if r.get('rep',0)<1 or r.get('error'): continue
        reps[r['rep']][r['config']]=r.get('trans_per_s',0)
    for rep,cf in reps.items():
        n=cf.get('none')
        if not n: continue
        for c,v in cf.items():
            if c!='none': acc[(tag,c)].append(100*(v/n-1))
for (tag,c),v in sorted(acc.items(), key=lambda x:(x[0][1],x[0][0])):
    print(f"  {c:24s} {tag}: median {statistics.median(v):+.1f}%  [{min(v):+.1f}, {max(v):+.1f}]  n={len(v)}")
