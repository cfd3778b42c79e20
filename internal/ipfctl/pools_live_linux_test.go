package ipfctl

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPrivilegedPoolFollowsIppool loads `block in quick from pool/100`
// (a rule naming a table that does not exist is refused), then drives the
// pool with ippool and checks that the peer's traffic follows its
// contents without any ipf run.
func TestPrivilegedPoolFollowsIppool(t *testing.T) {
	tp := sharedTopo(t)
	t.Cleanup(func() { tp.t = t; tp.mustRun("ippool", "-F") })
	conf := tp.file("pool.conf", "block in quick from pool/100 to any\npass in all\npass out all\n")
	code, _, stderr := tp.run("ipf", "-Fa", "-f", conf)
	if code != 1 || !strings.Contains(stderr, "pool.conf:1: pool/100: no such ippool table") {
		t.Errorf("ipf -f naming a missing table: exit %d, stderr %q; want 1 and file:line", code, stderr)
	}
	tp.mustRun("ippool", "-f", tp.file("ippool0.conf", "table role = ipf type = tree number = 100 { 10.99.0.0/16; };\n"))
	tp.mustRun("ipf", "-Fa", "-f", conf)
	blocked := func(when string) {
		t.Helper()
		if err := tp.tcpEcho(tp.a, addrB, 400*time.Millisecond); err == nil {
			t.Errorf("%s: TCP from %s passed, want it blocked", when, addrA)
		}
	}
	passes := func(when string) {
		t.Helper()
		if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
			t.Errorf("%s: TCP from %s: %v, want it to pass", when, addrA, err)
		}
	}
	passes("not in pool 100 yet")

	pools := tp.file("ippool.conf", fmt.Sprintf("table role = ipf type = tree number = 100 { 10.99.0.0/16; %s; };\n", addrA))
	tp.mustRun("ippool", "-f", pools)
	blocked("after ippool -f")
	want := fmt.Sprintf("table role=ipf type=tree number=100\n\t{ 10.99.0.0/16; %s/32; };\n", addrA)
	if got := tp.mustRun("ippool", "-l"); got != want {
		t.Errorf("ippool -l:\n%s\nwant:\n%s", got, want)
	}

	tp.mustRun("ippool", "-r", "-m", "100", "-i", addrA)
	passes("after ippool -r")
	if got := tp.mustRun("ippool", "-l", "-t", "tree", "-m", "100"); strings.Contains(got, addrA) {
		t.Errorf("ippool -l still lists %s after -r:\n%s", addrA, got)
	}

	tp.mustRun("ippool", "-a", "-m", "100", "-i", addrA+"/32")
	blocked("after ippool -a")
	if got := tp.mustRun("ippool", "-l", "-m", "100"); !strings.Contains(got, addrA+"/32;") {
		t.Errorf("ippool -l does not list %s after -a:\n%s", addrA, got)
	}

	// a bad file changes neither the tables nor the filter, even when
	// its good tables come first
	before := tp.mustRun("ippool", "-l")
	bad := tp.file("bad-ippool.conf", "table role = ipf type = tree number = 100 { 10.1.0.0/16; };\ntable role = ipf type = tree number = 101 { 1.2.3.4/40; };\n")
	code, _, stderr = tp.run("ippool", "-f", bad)
	if code == 0 {
		t.Errorf("ippool -f of a bad file exited 0")
	}
	if !strings.Contains(stderr, "bad-ippool.conf:2") {
		t.Errorf("ippool stderr %q does not point at the bad line", stderr)
	}
	if after := tp.mustRun("ippool", "-l"); after != before {
		t.Errorf("tables changed by a bad file:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	blocked("after the bad file")

	// an ipf rule edit keeps compiling with the pools
	tp.mustRun("ipf", "-f", tp.file("more.conf", "pass out quick all\n"))
	blocked("after an ipf rule edit")
}
