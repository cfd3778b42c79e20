import os, subprocess, time, random, sys, statistics
def pclock(pid): return time.clock_gettime(((~pid) << 3) | 2)
res = {}
impls = [(n, d) for n, d in (a.split('=') for a in sys.argv[2:])]
test = sys.argv[1]
srv = {}
for n, d in impls:
    port = 40000 + random.randrange(5000)
    args = ['taskset', '-c', '0', d + '/netserver', '-D', '-L', '127.0.0.1', '-p', str(port)] + (['-f'] if 'netperf-c' in d else [])
    srv[n] = (subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port)
time.sleep(0.7)
for rep in range(10):
    for n, d in impls:
        p, port = srv[n]
        s0 = pclock(p.pid)
        c = subprocess.Popen(['taskset', '-c', '0', d + '/netperf', '-H', '127.0.0.1', '-p', str(port), '-l', '-1', '-P', '0', '-t', test], stdout=subprocess.DEVNULL)
        _, st, ru = os.wait4(c.pid, 0); c.returncode = st
        time.sleep(0.05)
        s1 = pclock(p.pid)
        res.setdefault(n, []).append(((ru.ru_utime + ru.ru_stime) * 1e3, (s1 - s0) * 1e3))
for n, d in impls:
    srv[n][0].kill()
    r = res[n]
    print(f"{n}: client ms median {statistics.median(x for x,_ in r):.2f}  server ms median {statistics.median(y for _,y in r):.2f}")
