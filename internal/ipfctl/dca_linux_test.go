//go:build linux

package ipfctl

import "testing"

// TestPrivilegedDCAMode runs ipf -m e|d|q|t (HP-UX's DCA mode) against the
// kernel datapath: the mode switches and reads back, and the connection
// table is listed.
func TestPrivilegedDCAMode(t *testing.T) {
	tp := ownTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("dca.conf", "pass in quick proto tcp from any to any port = 25 keep limit 2\n"))
	if got := tp.mustRun("ipf", "-m", "q"); got != "DCA: enabled\n" {
		t.Errorf("ipf -m q: got %q", got)
	}
	tp.mustRun("ipf", "-m", "d")
	if got := tp.mustRun("ipf", "-m", "q"); got != "DCA: disabled\n" {
		t.Errorf("ipf -m q after -m d: got %q", got)
	}
	tp.mustRun("ipf", "-m", "e")
	if got := tp.mustRun("ipf", "-m", "q"); got != "DCA: enabled\n" {
		t.Errorf("ipf -m q after -m e: got %q", got)
	}
	if got := tp.mustRun("ipf", "-m", "t"); got != "" {
		t.Errorf("ipf -m t with no connections: got %q", got)
	}
	if code, _, _ := tp.run("ipf", "-Fa", "-f", tp.file("bad.conf", "pass in proto tcp from any to any port = 25 keep limit 2\n")); code == 0 {
		t.Error("a keep limit rule that is not quick was loaded")
	}
}
