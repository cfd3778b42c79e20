//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"strings"
	"testing"
	"time"
)

// TestPrivilegedNATTunables: ipf -T lists NAT's tunables with the
// filter's, sets them live (before NAT is loaded too, as at boot), refuses
// values the kernel cannot take and IPFilter's NAT tunables it has nothing
// to apply to, with the reason; and what is set applies: nat_table_max
// refuses the session beyond it, fr_defnatage ends an idle UDP session.
// About 5 s.
func TestPrivilegedNATTunables(t *testing.T) {
	w := newGW(t)
	w.serve(w.s, gwS4, gwTCP, gwUDP)
	w.routeVia("192.168.77.0/24")
	w.ipf("-Fa", "-f", w.file("t.ipf", "pass in all\npass out all\n"))
	list := w.ipf("-T", "list")
	for _, l := range []string{
		"nat_table_max\tmin 1\tmax 2147483647\tcurrent 30000",
		"ftp_forcepasv\tmin 0\tmax 1\tcurrent 1",
		"ftp_insecure\tmin 0\tmax 1\tcurrent 0",
		"ftp_pasvonly\tmin 0\tmax 1\tcurrent 0",
		"ftp_single_xfer\tmin 0\tmax 1\tcurrent 0",
		"fr_defnatage\tmin 1\tmax 2147483647\tcurrent 1200",
		"fr_defnatipage\tmin 1\tmax 2147483647\tcurrent 120",
		"fr_defnaticmpage\tmin 1\tmax 2147483647\tcurrent 6",
		"udp_timeout\t",
	} {
		if !strings.Contains(list, l) {
			t.Errorf("ipf -T list lacks %q:\n%s", l, list)
		}
	}
	// set before NAT is loaded: the rules loaded after find them
	w.ipf("-T", "nat_table_max=1,ftp_insecure=1,fr_defnatage=2")
	if out := w.ipf("-T", "nat_table_max,ftp_insecure,fr_defnatage"); out != "nat_table_max\tmin 1\tmax 2147483647\tcurrent 1\n"+
		"ftp_insecure\tmin 0\tmax 1\tcurrent 1\nfr_defnatage\tmin 1\tmax 2147483647\tcurrent 2\n" {
		t.Errorf("ipf -T after setting:\n%s", out)
	}
	for arg, want := range map[string]string{
		"nat_table_max=70000": "the kernel NAT takes at most 65536",
		"nat_table_max=0":     "outside 1..2147483647",
		"nat_lock=1":          "nat_lock: not supported by the kernel NAT datapath (the kernel NAT has no lock",
		"nat_table_size":      "the kernel NAT's session hash has a fixed size",
		"ftp_debug=3":         "ftp_debug: not supported by the kernel NAT datapath (the kernel ftp proxy has no debug output",
		"tftp_read_only=1":    "only the ftp proxy runs in the kernel",
	} {
		code, out := w.run(true, "-T", arg)
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("ipf -T %s: exit %d %q, want a failure saying %q", arg, code, out, want)
		}
	}
	w.mustIPNAT("-f", w.file("t.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"))
	c, err := w.dial(w.c, gwS4, gwTCP)
	if err != nil {
		t.Fatalf("TCP through NAT: %v", err)
	}
	defer c.Close()
	// nat_table_max 1: a second flow finds no room (its packets are
	// dropped, as IPFilter blocks them)
	if err := w.udp(w.c, gwS4, gwUDP); err == nil {
		t.Errorf("a second session was made with nat_table_max 1")
	}
	if st := w.mustIPNAT("-s"); !strings.Contains(st, "\ttable max reached out\n") || strings.Contains(st, "\n0\ttable max reached out\n") {
		t.Errorf("ipnat -s counts no table max:\n%s", st)
	}
	// fr_defnatage 2 ticks: a UDP session ends a second after its last
	// packet
	w.mustIPNAT("-F")
	if err := w.udp(w.c, gwS4, gwUDP); err != nil {
		t.Fatalf("UDP through NAT after the flush: %v", err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for len(w.sessions()) != 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if s := w.sessions(); len(s) != 0 {
		t.Errorf("UDP session still there 4 s after its last packet with fr_defnatage 2: %v", s)
	}
}
