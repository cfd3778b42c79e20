#!/usr/bin/env python3
"""ops17: crafted packets from ops17b against the filter in ops17a.

For each case: flush state, send the packets one by one on ops17b0 with an
AF_PACKET socket, and read the filter's verdict of each from ipfstat's
"input packets" counters (blocked/passed delta). The same packets go to the
real ipftest (hex input) and the verdicts are compared."""
import socket, struct, subprocess, sys, os, time, re

SMAC = bytes.fromhex(os.environ.get('SMAC', '26a3c28d86c0'))
DMAC = bytes.fromhex(os.environ.get('DMAC', '82a63676d870'))
SRC4, DST4 = '10.217.0.2', '10.217.0.1'
SRC6, DST6 = 'fd17::2', 'fd17::1'
ENV = dict(os.environ)
IPFTEST = '/work/shared/ipf-diff/bin/ipftest'
CONF = os.environ.get('CONF', '/tmp/ops17/att.conf')


def csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def tcp(sport, dport, flags, seq=1000, ack=0, doff=5, payload=b'', opts=b'', src=SRC4, dst=DST4, v6=False, fix=True):
    h = struct.pack('!HHIIBBHHH', sport, dport, seq, ack, (doff << 4), flags, 4096, 0, 0) + opts + payload
    if fix:
        if v6:
            ph = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + struct.pack('!IxxxB', len(h), 6)
        else:
            ph = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!xBH', 6, len(h))
        c = csum(ph + h)
        h = h[:16] + struct.pack('!H', c) + h[18:]
    return h


def ip4(payload, proto=6, off=0, mf=False, df=False, ident=1, opts=b'', ttl=63, src=SRC4, dst=DST4, tot=None, ihl=None):
    hl = 20 + len(opts)
    if ihl is None:
        ihl = hl // 4
    fl = (off & 0x1fff) | (0x2000 if mf else 0) | (0x4000 if df else 0)
    if tot is None:
        tot = hl + len(payload)
    h = struct.pack('!BBHHHBBH4s4s', 0x40 | ihl, 0, tot, ident, fl, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst)) + opts
    h = h[:10] + struct.pack('!H', csum(h)) + h[12:]
    return h + payload


def ip6(nxt, payload, src=SRC6, dst=DST6, plen=None):
    if plen is None:
        plen = len(payload)
    return struct.pack('!IHBB16s16s', 0x60000000, plen, nxt, 64,
                       socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)) + payload


def ext6(nxt, body=b'', kind='opts'):
    """A hop-by-hop/dest/routing options header of len 8+len(body) rounded."""
    raw = bytes([nxt, 0]) + body
    pad = (-len(raw)) % 8
    if pad == 1:
        raw += b'\0'   # Pad1
    elif pad:
        raw += bytes([1, pad - 2]) + b'\0' * (pad - 2)  # PadN
    raw = bytes([nxt, len(raw) // 8 - 1]) + raw[2:]
    return raw


def frag6(nxt, off, mf, ident=0x1234):
    return struct.pack('!BBHI', nxt, 0, (off << 3) | (1 if mf else 0), ident)


S, A, F, R, P = 0x02, 0x10, 0x01, 0x04, 0x08


def counters():
    out = subprocess.run(['nsenter', '--net=/run/netns/ops17a', 'ipfstat'], capture_output=True, text=True, env=ENV).stdout
    m = re.search(r' input packets:\s+blocked (\d+) passed (\d+) nomatch (\d+)', out)
    return tuple(int(x) for x in m.groups())


def flush():
    subprocess.run(['nsenter', '--net=/run/netns/ops17a', 'ipf', '-FS'], capture_output=True, env=ENV)


def oracle(pkts):
    hx = ''.join('[in,ops17a0]\n' + ' '.join('%02x' % b for b in p) + '\n\n' for p in pkts)
    # -6 lets it take IPv6; the IPv4 packets are read by version nibble.
    six = ['-6'] if any((p[0] >> 4) == 6 for p in pkts) else []
    r = subprocess.run([IPFTEST] + six + ['-R', '-b', '-r', CONF, '-F', 'hex', '-i', '/dev/stdin'], input=hx,
                       capture_output=True, text=True)
    return r.stdout.split(), r.stderr


def live(pkts, sock):
    flush()
    res = []
    for p in pkts:
        b0, p0, n0 = counters()
        et = 0x86dd if (p[0] >> 4) == 6 else 0x0800
        sock.send(DMAC + SMAC + struct.pack('!H', et) + p)
        v = '?'
        for _ in range(50):
            time.sleep(0.02)
            b1, p1, n1 = counters()
            if (b1, p1, n1) != (b0, p0, n0):
                v = ('block' if b1 > b0 else '') + ('pass' if p1 > p0 else '') + ('nomatch' if n1 > n0 else '')
                break
        res.append(v)
    return res


def cases():
    c = {}
    sp = 40000
    def nsp():
        nonlocal sp
        sp += 1
        return sp
    # control
    s = nsp()
    c['syn22'] = [ip4(tcp(s, 22, S))]
    c['syn23'] = [ip4(tcp(s, 23, S))]
    c['ack22-nostate'] = [ip4(tcp(nsp(), 22, A))]
    # overlapping fragments: first passes (22 SYN), second at offset 0 rewrites the port to 23
    s = nsp()
    t = tcp(s, 22, S, payload=b'A' * 16)
    t23 = tcp(s, 23, S, payload=b'A' * 16)
    c['ovl-dup-first'] = [ip4(t[:24], mf=True, ident=101), ip4(t23, off=0, ident=101)]
    c['ovl-dup-first-mf'] = [ip4(t[:24], mf=True, ident=102), ip4(t23[:24], off=0, mf=True, ident=102), ip4(t23[24:], off=3, ident=102)]
    # second fragment at offset 1 (8 bytes) overlapping flags/ports? offset 1 covers seq/ack only; offset 0 is the only port rewrite.
    t2 = tcp(s, 23, A | P, payload=b'B' * 16)
    c['ovl-off1'] = [ip4(t[:16], mf=True, ident=103), ip4(t2[8:], off=1, ident=103)]
    # tiny first fragment: 8 bytes (ports only), flags in the second
    s = nsp()
    t = tcp(s, 22, S, payload=b'C' * 8)
    c['tiny-first-8'] = [ip4(t[:8], mf=True, ident=104), ip4(t[8:], off=1, ident=104)]
    s = nsp()
    t = tcp(s, 22, A, payload=b'C' * 8)
    c['tiny-first-8-ack'] = [ip4(t[:8], mf=True, ident=105), ip4(t[8:], off=1, ident=105)]
    s = nsp()
    t = tcp(s, 22, S, payload=b'C' * 8)
    c['tiny-first-16'] = [ip4(t[:16], mf=True, ident=106), ip4(t[16:], off=2, ident=106)]
    # fragment offset 1 alone (IPFilter's FI_BAD for off==1 tcp?)
    s = nsp()
    t = tcp(s, 22, S, payload=b'D' * 24)
    c['frag-later-first'] = [ip4(t[24:], off=3, ident=107), ip4(t[:24], mf=True, ident=107)]
    # IPv4 options
    s = nsp()
    c['ipopt-rr'] = [ip4(tcp(s, 22, S), opts=bytes([7, 7, 4]) + b'\0' * 4 + b'\0')]
    c['ipopt-lsrr'] = [ip4(tcp(nsp(), 22, S), opts=bytes([0x83, 7, 4]) + socket.inet_aton('10.217.0.1') + b'\0')]
    c['ipopt-bad-len'] = [ip4(tcp(nsp(), 22, S), opts=bytes([7, 0xff, 4, 0]))]
    c['ipopt-zero-len'] = [ip4(tcp(nsp(), 22, S), opts=bytes([7, 0, 4, 0]))]
    c['ipopt-23'] = [ip4(tcp(nsp(), 23, S), opts=bytes([7, 7, 4]) + b'\0' * 4 + b'\0')]
    # TCP bad data offsets
    for d in (0, 1, 4, 6, 15):
        c['doff%d-22' % d] = [ip4(tcp(nsp(), 22, S, doff=d))]
        c['doff%d-23' % d] = [ip4(tcp(nsp(), 23, S, doff=d))]
    c['doff15-22-long'] = [ip4(tcp(nsp(), 22, S, doff=15, opts=b'\x01' * 40))]
    # truncated: ip total len shorter than tcp header
    c['short-tcp-22'] = [ip4(tcp(nsp(), 22, S)[:12])]
    c['short-tcp-23'] = [ip4(tcp(nsp(), 23, S)[:12])]
    # flags: SYN+FIN, SYN+RST, SYN+ACK to 22
    c['synfin22'] = [ip4(tcp(nsp(), 22, S | F))]
    c['synrst22'] = [ip4(tcp(nsp(), 22, S | R))]
    c['synack22'] = [ip4(tcp(nsp(), 22, S | A))]
    # state then RST/FIN storm then data
    s = nsp()
    c['state-rst-then-data'] = [ip4(tcp(s, 22, S, seq=100)), ip4(tcp(s, 22, R, seq=101)), ip4(tcp(s, 22, A, seq=101, ack=1)),
                                ip4(tcp(s, 22, R, seq=999999)), ip4(tcp(s, 22, A | P, seq=101, ack=1, payload=b'x'))]
    s = nsp()
    c['state-fin-storm'] = [ip4(tcp(s, 22, S, seq=100))] + [ip4(tcp(s, 22, F | A, seq=101 + i * 7, ack=1)) for i in range(6)] + \
        [ip4(tcp(s, 22, A, seq=101, ack=1))]
    # out-of-window RST/data on an established-by-SYN entry
    s = nsp()
    c['state-oow'] = [ip4(tcp(s, 22, S, seq=100)), ip4(tcp(s, 22, A, seq=100 + 0x40000000, ack=1)),
                      ip4(tcp(s, 22, R, seq=100 + 0x40000000))]
    # the state entry from 22 then the same 5-tuple fragments
    s = nsp()
    t = tcp(s, 22, A, seq=101, payload=b'E' * 16)
    c['state-then-frag'] = [ip4(tcp(s, 22, S, seq=100)), ip4(t[:24], mf=True, ident=108), ip4(t[24:], off=3, ident=108)]
    # IPv6
    s = nsp()
    c['v6-syn22'] = [ip6(6, tcp(s, 22, S, src=SRC6, dst=DST6, v6=True))]
    c['v6-syn23'] = [ip6(6, tcp(nsp(), 23, S, src=SRC6, dst=DST6, v6=True))]
    for n in (1, 2, 4, 8, 16):
        s = nsp()
        pl = tcp(s, 23, S, src=SRC6, dst=DST6, v6=True)
        for i in range(n):
            pl = ext6(6 if i == 0 else 60, b'') + pl
        c['v6-dstopts%d-23' % n] = [ip6(60, pl)]
        s = nsp()
        pl = tcp(s, 22, S, src=SRC6, dst=DST6, v6=True)
        for i in range(n):
            pl = ext6(6 if i == 0 else 60, b'') + pl
        c['v6-dstopts%d-22' % n] = [ip6(60, pl)]
    # one long dest opts header (2 KB)
    s = nsp()
    pl = ext6(6, b'\0' * 1400) + tcp(s, 23, S, src=SRC6, dst=DST6, v6=True)
    c['v6-dstopts-long-23'] = [ip6(60, pl)]
    # fragment header before tcp (atomic fragment: off 0, no MF)
    s = nsp()
    c['v6-atomicfrag-23'] = [ip6(44, frag6(6, 0, False) + tcp(s, 23, S, src=SRC6, dst=DST6, v6=True))]
    c['v6-atomicfrag-22'] = [ip6(44, frag6(6, 0, False) + tcp(nsp(), 22, S, src=SRC6, dst=DST6, v6=True))]
    # real fragments: first with ports only (8 bytes), flags in the second
    s = nsp()
    t = tcp(s, 22, S, src=SRC6, dst=DST6, v6=True, payload=b'F' * 8)
    c['v6-tiny-first'] = [ip6(44, frag6(6, 0, True, 0x2001) + t[:8]), ip6(44, frag6(6, 1, False, 0x2001) + t[8:])]
    # overlapping v6 frags: rewrite port
    s = nsp()
    t = tcp(s, 22, S, src=SRC6, dst=DST6, v6=True, payload=b'G' * 16)
    t23 = tcp(s, 23, S, src=SRC6, dst=DST6, v6=True, payload=b'G' * 16)
    c['v6-ovl-dup-first'] = [ip6(44, frag6(6, 0, True, 0x2002) + t[:24]), ip6(44, frag6(6, 0, False, 0x2002) + t23)]
    # tcp header split from the ext-header chain: dst opts in frag 1, tcp in frag 2
    s = nsp()
    t = tcp(s, 23, S, src=SRC6, dst=DST6, v6=True)
    d = ext6(6, b'\0' * 6)  # 8+6 -> 16 bytes
    c['v6-chain-split-23'] = [ip6(44, frag6(60, 0, True, 0x2003) + d), ip6(44, frag6(60, 2, False, 0x2003) + t)]
    # routing header type 0
    s = nsp()
    rh = bytes([6, 2, 0, 1, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, 'fd17::1')
    c['v6-rh0-23'] = [ip6(43, rh + tcp(s, 23, S, src=SRC6, dst=DST6, v6=True))]
    # hop-by-hop not first
    s = nsp()
    c['v6-hbh-second-23'] = [ip6(60, ext6(0, b'') + ext6(6, b'') + tcp(s, 23, S, src=SRC6, dst=DST6, v6=True))]
    # no next header (59) then bogus
    c['v6-nonext'] = [ip6(59, b'\0' * 20)]
    # bad doff v6
    c['v6-doff15-22'] = [ip6(6, tcp(nsp(), 22, S, src=SRC6, dst=DST6, v6=True, doff=15))]
    c['v6-doff2-23'] = [ip6(6, tcp(nsp(), 23, S, src=SRC6, dst=DST6, v6=True, doff=2))]
    # more IPv4 header oddities
    c['ip-ihl4-22'] = [ip4(tcp(nsp(), 22, S), ihl=4)]
    c['ip-totlen-long-22'] = [ip4(tcp(nsp(), 22, S), tot=200)]
    c['ip-totlen-short-22'] = [ip4(tcp(nsp(), 22, S), tot=30)]
    c['ip-ttl0-22'] = [ip4(tcp(nsp(), 22, S), ttl=0)]
    s = nsp()
    t = tcp(s, 22, S, payload=b'H' * 16)
    c['frag-past-64k'] = [ip4(t[:24], mf=True, ident=109), ip4(t[24:], off=8190, ident=109)]
    c['frag-df-mf-22'] = [ip4(tcp(nsp(), 22, S), mf=True, df=True, ident=110)]
    s = nsp()
    t = tcp(s, 23, S, payload=b'I' * 16)
    c['frag-body-first-23'] = [ip4(t[24:], off=3, mf=False, ident=111), ip4(t[:24], mf=True, ident=111)]
    return c


def main():
    sel = sys.argv[1:]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(('ops17b0', 0))
    cs = cases()
    bad = 0
    for name, pkts in cs.items():
        if sel and name not in sel:
            continue
        o, err = oracle(pkts)
        l = live(pkts, sock)
        flag = '' if o == l else '   <== DIFF'
        if flag and any(ov == 'nomatch' and lv == 'pass' for ov, lv in zip(o, l)):
            pass
        if flag:
            bad += 1
        print('%-22s oracle=%s live=%s%s' % (name, ','.join(o), ','.join(l), flag), flush=True)
        if err.strip():
            print('   oracle stderr:', err.strip()[:200])
    print('diffs:', bad)


if __name__ == '__main__':
    main()
