import sys; exec(open('/tmp/ops17/craft.py').read().replace("if __name__ == '__main__':\n    main()",""))
import subprocess
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); sock.bind(('ops17b0', 0))
hdr = DMAC + SMAC + b'\x08\x00'
def send(p): sock.send(hdr + p)
def st():
    out = subprocess.run(['nsenter','--net=/run/netns/ops17a','ipfstat','-s'],capture_output=True,text=True,env=ENV).stdout
    return ' | '.join(l.strip() for l in out.splitlines() if re.search(r'active|add|max|lost|full|fail|hits|misses', l))[:600]
flush()
send(ip4(tcp(30000, 22, S, seq=5)))
time.sleep(0.2)
print('before:', st())
N = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
src = [f'10.217.{1 + i // 250}.{1 + i % 250}' for i in range(N)]
for i in range(N):
    send(ip4(tcp(1024 + i % 60000, 22, S, seq=i, src=src[i]), src=src[i]))
time.sleep(0.5)
print('after flood:', st())
print(counters())
b0 = counters(); send(ip4(tcp(30000, 22, A, seq=6, ack=1))); time.sleep(0.3); b1 = counters(); print('old flow ACK', b0, b1)
b0 = counters(); send(ip4(tcp(30001, 22, S, seq=5))); time.sleep(0.3); b1 = counters(); print('new SYN', b0, b1)
for k in range(3):
    time.sleep(2)
    b0 = counters(); send(ip4(tcp(30002 + k, 22, S, seq=5))); time.sleep(0.3); b1 = counters(); print('new SYN later', k, b0, b1)
print('end:', st())
