#!/usr/bin/env python3
# per repetition: ns/packet in/out of each config, x the tcx-floor of the same repetition
import json, sys, collections
for f in sys.argv[1:]:
    reps = collections.defaultdict(dict)
    for l in open(f):
        d = json.loads(l)
        if d['kind'] != 'rep': continue
        r = d['rep']
        ns = {}
        for b in r.get('bpf') or []:
            if b['run_cnt']: ns[b['hook']] = ns.get(b['hook'], 0) + b['run_ns'] / b['run_cnt']
        reps[r['rep']][r['config']] = (ns, r['trans_per_s'])
    print('==', f)
    agg = collections.defaultdict(list)
    for k in sorted(reps):
        fl = reps[k].get('tcx-floor', ({}, 0))[0]
        out = []
        for c, (ns, tr) in reps[k].items():
            if c == 'none': out.append('none %.0f/s' % tr); continue
            i, o = ns.get('ingress', float('nan')), ns.get('egress', float('nan'))
            fi, fo = fl.get('ingress', float('nan')), fl.get('egress', float('nan'))
            out.append('%s %.0f/%.0f (%.2f/%.2f)' % (c.replace('sluice-stateful-at-', 'at'), i, o, i / fi, o / fo))
            agg[c].append((i, o, i / fi, o / fo))
        print(' rep%d ' % k + ' | '.join(out))
    for c, v in agg.items():
        ns = [x for t in v for x in t[:2]]; rt = [x for t in v for x in t[2:]]
        print('  %-24s ns %.0f-%.0f  x %.2f-%.2f' % (c, min(ns), max(ns), min(rt), max(rt)))
