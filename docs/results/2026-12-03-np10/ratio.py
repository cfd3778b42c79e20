import json, sys, random, statistics
runs = [json.loads(l) for l in open(sys.argv[1])]
ref = sys.argv[2] if len(sys.argv) > 2 else 'C'
by = {}
for r in runs: by.setdefault(r['impl'], {})[r['rep']] = r['per']
def ci(xs):
    random.seed(1); meds = sorted(statistics.median(random.choices(xs, k=len(xs))) for _ in range(4000))
    return meds[100], meds[3900]
print(f"{sys.argv[1]}: n={len(by[ref])}, CPU us/unit medians: " + ", ".join(f"{k} {statistics.median(v.values()):.3f}" for k, v in by.items()))
for k, v in by.items():
    if k == ref: continue
    rat = [v[i] / by[ref][i] for i in v if i in by[ref]]
    lo, hi = ci(rat)
    print(f"  {k}/{ref}: median {statistics.median(rat):.3f} [{lo:.3f}, {hi:.3f}] (95% bootstrap CI)")
