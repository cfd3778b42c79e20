#!/usr/bin/env python3
"""ab.py -t TEST [-m 1K] -n REPS -l SECS name=dir ...: alternate runs of each impl's
netperf->netserver pair (pinned as the parity tool pins: RR both on CPU 0, streams client 0
server 1); CPU us per unit = client rusage user+sys + server process CPU clock; user/sys per side."""
import os, sys, subprocess, time, statistics, random, argparse, json
ap = argparse.ArgumentParser()
ap.add_argument('-t', default='TCP_RR'); ap.add_argument('-m', default='')
ap.add_argument('-n', type=int, default=10); ap.add_argument('-l', type=int, default=2)
ap.add_argument('--raw', default=''); ap.add_argument('--rt', action='store_true'); ap.add_argument('impls', nargs='+')
a = ap.parse_args()
rr = a.t.endswith('RR')
ccpu, scpu = ('0', '0') if rr else ('0', '1')
def pclock(pid): return time.clock_gettime(((~pid) << 3) | 2)
def pstat(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return int(f[11]) / 100, int(f[12]) / 100
impls = []
for i, s in enumerate(a.impls):
    name, d = s.split('=')
    port = 30000 + random.randrange(1000) * 10 + i
    args = (['chrt', '-f', '10'] if a.rt else []) + ['taskset', '-c', scpu, d + '/netserver', '-D', '-L', '127.0.0.1', '-p', str(port)]
    if 'netperf-c' in d: args.append('-f')
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    impls.append(dict(name=name, dir=d, port=port, srv=p, runs=[]))
time.sleep(0.7)
raw = open(a.raw, 'a') if a.raw else None
try:
    for rep in range(a.n):
        k = rep % len(impls)
        for im in impls[k:] + impls[:k]:
            pid = im['srv'].pid
            s0, (su0, ss0) = pclock(pid), pstat(pid)
            cmd = (['chrt', '-f', '10'] if a.rt else []) + ['taskset', '-c', ccpu, im['dir'] + '/netperf', '-H', '127.0.0.1', '-p', str(im['port']),
                   '-l', str(a.l), '-P', '0', '-t', a.t, '--']
            if a.m: cmd += ['-m', a.m]
            cmd += ['-k', 'THROUGHPUT,ELAPSED_TIME,LOCAL_BYTES_SENT']
            c = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            out = c.stdout.read(); c.stdout.close()
            _, st, ru = os.wait4(c.pid, 0); c.returncode = st
            s1, (su1, ss1) = pclock(pid), pstat(pid)
            kv = dict(l.split('=', 1) for l in out.decode().split('\n') if '=' in l)
            if 'LOCAL_BYTES_SENT' not in kv:
                print('bad output', im['name'], out, file=sys.stderr); continue
            units = float(kv['LOCAL_BYTES_SENT']) / (1 if rr else 1024)
            r = dict(test=a.t + a.m, impl=im['name'], rep=rep, units=units, tput=float(kv['THROUGHPUT']),
                     cu=ru.ru_utime, cs=ru.ru_stime, srv=s1 - s0, su=su1 - su0, ss=ss1 - ss0,
                     load=open('/proc/loadavg').read().split()[0])
            r['per'] = (r['cu'] + r['cs'] + r['srv']) * 1e6 / units
            im['runs'].append(r)
            if raw: raw.write(json.dumps(r) + '\n'); raw.flush()
            print(f"rep {rep} {im['name']:6} {r['per']:8.3f} us/unit  cli u/s {r['cu']*1e6/units:6.3f}/{r['cs']*1e6/units:6.3f}"
                  f"  srv {r['srv']*1e6/units:6.3f} (u/s ticks {r['su']*1e6/units:6.3f}/{r['ss']*1e6/units:6.3f})  tput {r['tput']:.0f} load {r['load']}", flush=True)
finally:
    for im in impls: im['srv'].kill(); im['srv'].wait()
ref = impls[0]
print(f"== {a.t} {a.m}")
for im in impls:
    per = [r['per'] for r in im['runs']]
    cu = statistics.median(r['cu'] * 1e6 / r['units'] for r in im['runs'])
    su = statistics.median(r['su'] * 1e6 / r['units'] for r in im['runs'])
    q = sorted(per)
    line = f"{im['name']:6} median {statistics.median(per):8.3f} us/unit (min {q[0]:.3f} p25 {q[len(q)//4]:.3f})  client user {cu:.3f}  server user(ticks) {su:.3f}"
    if im is not ref:
        byrep = {r['rep']: r['per'] for r in ref['runs']}
        rat = sorted(r['per'] / byrep[r['rep']] for r in im['runs'] if r['rep'] in byrep)
        if rat: line += f"  ratio to {ref['name']}: median {statistics.median(rat):.3f} [{rat[len(rat)//4]:.3f}, {rat[(3*len(rat))//4]:.3f}] IQR; p25 ratio {q[len(q)//4]/sorted(r['per'] for r in ref['runs'])[len(ref['runs'])//4]:.3f}"
    print(line)
