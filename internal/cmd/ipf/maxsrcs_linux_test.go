//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipf

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/bpf"
	"sluice/internal/ipfctl"
	"sluice/internal/testutil/bpffs"
)

// udpFrame is an Ethernet frame of a UDP datagram src:1000 -> dst:53.
func udpFrame(src, dst string) []byte {
	f := make([]byte, 14+20+8)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 28)
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(ip[20:], 1000)
	binary.BigEndian.PutUint16(ip[22:], 53)
	binary.BigEndian.PutUint16(ip[24:], 8)
	return f
}

// TestPrivilegedMaxSrcsLoads: ipf -f of a rule set with keep state
// (max-srcs N) on a pinned datapath. Session 12 had the kernel refuse
// such a rule (ErrUnsupported: ipf -f failed, the previous rules stayed),
// and session 13's count made the programs ipf -f specialises for the set
// (prog_ingress, what the interfaces run) pass the verifier's 512-byte
// stack. Now it loads and its limit holds on the programs the interfaces
// would run, the specialised one pinned by ipf -f and the generic one: a
// third source is refused while two have entries, and passes once ipf -FS
// has ended theirs (their counts given back).
func TestPrivilegedMaxSrcsLoads(t *testing.T) {
	pinDir := filepath.Join(bpffs.Mount(t), "sluice")
	t.Cleanup(func() { ipfctl.Remove(pinDir) })
	conf := filepath.Join(t.TempDir(), "ipf.conf")
	if err := os.WriteFile(conf, []byte("block in all\n"+
		"pass in proto udp from any to any port = 53 keep state (max-srcs 2)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ipfRun := func(args ...string) {
		t.Helper()
		b := ipfctl.NewKernel(pinDir)
		defer b.Close()
		var o, e bytes.Buffer
		c := &Command{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Backend: b}
		if code := c.Run(args); code != 0 {
			t.Fatalf("ipf %s: exit %d\n%s%s", strings.Join(args, " "), code, o.String(), e.String())
		}
	}
	ipfRun("-E")
	ipfRun("-Fa", "-f", conf)
	d, err := bpf.Load(bpf.Options{PinDir: pinDir}) // the programs, on the pinned maps
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec, err := ebpf.LoadPinnedProgram(filepath.Join(pinDir, "prog_ingress"), nil)
	if err != nil {
		t.Fatalf("the program ipf -f specialised for the set: %v", err)
	}
	defer spec.Close()
	for _, p := range []struct {
		name string
		run  func(frame []byte) (int32, []byte, error)
	}{
		{"specialised", func(f []byte) (int32, []byte, error) { return bpf.RunTC(spec, f, 0) }},
		{"generic", func(f []byte) (int32, []byte, error) { return d.RunAt(false, f, 0) }},
	} {
		verdict := func(src string) string {
			t.Helper()
			ret, _, err := p.run(udpFrame(src, "10.9.9.9"))
			if err != nil {
				t.Fatal(err)
			}
			if ret == 2 { // TC_ACT_SHOT
				return "block"
			}
			return "pass"
		}
		for _, c := range []struct{ src, want string }{
			{"10.0.0.1", "pass"}, {"10.0.0.2", "pass"}, {"10.0.0.3", "block"}, {"10.0.0.1", "pass"},
		} {
			if got := verdict(c.src); got != c.want {
				t.Errorf("%s program: from %s: %s, want %s", p.name, c.src, got, c.want)
			}
		}
		ipfRun("-FS")
		if got := verdict("10.0.0.3"); got != "pass" {
			t.Errorf("%s program: from 10.0.0.3 after ipf -FS: %s, want pass (the sources' counts given back)", p.name, got)
		}
		ipfRun("-FS")
	}
}
