#!/usr/bin/env python3
# pooled over runs: every repetition's ingress and egress ns/packet of each
# config, and x the tcx-floor of the same repetition (range, median)
import json, sys, collections, statistics
groups = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
    g = 'old' if f.startswith('o') else 'new'
    reps = collections.defaultdict(dict)
    for l in open(f):
        d = json.loads(l)
        if d['kind'] != 'rep': continue
        r = d['rep']
        ns = {}
        for b in r.get('bpf') or []:
            if b['run_cnt']: ns[b['hook']] = ns.get(b['hook'], 0) + b['run_ns'] / b['run_cnt']
        reps[r['rep']][r['config']] = ns
    for k, cs in reps.items():
        fl = cs.get('tcx-floor', {})
        for c, ns in cs.items():
            if c == 'none' or not ns: continue
            for hk in ('ingress', 'egress'):
                if hk in ns and hk in fl:
                    groups[g][c].append((ns[hk], ns[hk] / fl[hk]))
for g in ('old', 'new'):
    print('==', g)
    for c, v in groups[g].items():
        n = [x[0] for x in v]; x = [x[1] for x in v]
        print('| %s | %s | %.0f–%.0f | %.0f | %.2f–%.2f | %.2f |' % (g, c, min(n), max(n), statistics.median(n), min(x), max(x), statistics.median(x)))
