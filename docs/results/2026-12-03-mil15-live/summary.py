#!/usr/bin/env python3
# pooled per-repetition ns and x floor (in and out) per binary, and the Δ rate rows of each report
import json, sys, collections, statistics, re
pool = collections.defaultdict(list)
for run in sys.argv[1:]:
    kind = 'old' if run.startswith('o') else 'new'
    reps = collections.defaultdict(dict)
    for l in open(run + '/results.jsonl'):
        d = json.loads(l)
        if d['kind'] != 'rep': continue
        r = d['rep']; ns = {}
        for b in r.get('bpf') or []:
            if b['run_cnt']: ns[b['hook']] = ns.get(b['hook'], 0) + b['run_ns'] / b['run_cnt']
        reps[r['rep']][r['config']] = ns
    for k, cs in reps.items():
        fl = cs.get('tcx-floor', {})
        for c, ns in cs.items():
            if c in ('none', 'tcx-floor') or not ns: continue
            for hk in ('ingress', 'egress'):
                pool[(c, kind)].append((ns[hk], ns[hk] / fl[hk]))
        for hk in ('ingress', 'egress'):
            if 'ingress' in fl: pool[('tcx-floor', kind)].append((fl[hk], 1))
    rows = [l for l in open(run + '/report.md') if re.match(r'^\| (sluice-nomatch-1000000|nft-nomatch-set-1000000|sluice-nomatch-10000) \|', l)]
    print(run, ' '.join(l.split('|')[1].strip() + ':' + l.split('|')[2].strip() for l in rows[:3]))
for (c, kind), v in sorted(pool.items()):
    ns = [x[0] for x in v]; rt = [x[1] for x in v]
    print('%-24s %s n=%2d ns %.0f-%.0f med %.0f  x %.2f-%.2f med %.2f' % (c, kind, len(v), min(ns), max(ns), statistics.median(ns), min(rt), max(rt), statistics.median(rt)))
