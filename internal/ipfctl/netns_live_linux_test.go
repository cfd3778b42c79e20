package ipfctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/bpf"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedOtherNetNS: the filter loaded in namespace b, and the
// same pin directory used from namespace a (nsenter --net beside the
// host's filter, with the host's bpffs). Before, a's ipf -Fa -f replaced
// b's rules and, finding b's link pin under the ifindex a's interface
// also has, updated b's link instead of attaching a's interface, and
// reported success: b's rules gone and a unfiltered. Now every change
// from a is refused before anything is written, ipf -V and ipfstat from
// a say whose datapath it is, and ipf -D from a removes it. About 5 s.
func TestPrivilegedOtherNetNS(t *testing.T) {
	tp := ownTopo(t)
	block := tp.file("block.conf", fmt.Sprintf("block in quick proto udp from any to any port = %d\npass in all\npass out all\n", udpPort))
	passAll := tp.file("pass.conf", "pass in all\npass out all\n")
	tp.mustRun("ipf", "-Fa", "-f", block)
	if !tp.udpBlocked(addrB) {
		t.Fatal("the rules do not block UDP to b")
	}
	// the premise: both ends of the veth have one ifindex, each in its
	// namespace, so b's link pin is named after a's interface too
	var idxA, idxB int
	for _, x := range []struct {
		ns   netns.NsHandle
		name string
		idx  *int
	}{{tp.a, "sla", &idxA}, {tp.b, "slb", &idxB}} {
		if err := tp.inNS(x.ns, func() error {
			l, err := netlink.LinkByName(x.name)
			if err == nil {
				*x.idx = l.Attrs().Index
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if idxA != idxB {
		t.Logf("sla is ifindex %d, slb %d: the link pins do not collide here", idxA, idxB)
	}

	for _, args := range [][]string{{"-Fa", "-f", passAll}, {"-y"}, {"-s"}, {"-Z"}} {
		code, _, e := tp.runIn(tp.a, "ipf", args...)
		if code == 0 || !strings.Contains(e, "another network namespace") {
			t.Errorf("ipf %v from namespace a: exit %d, stderr %q; want a refusal naming the other namespace", args, code, e)
		}
	}
	// NAT and pools change what b's filter does too
	natConf := tp.file("nat.conf", "map sla 10.231.0.0/24 -> 10.231.0.1/32\n")
	poolConf := tp.file("pool.conf", "table role = ipf type = tree number = 1 { 10.1.0.0/16; };\n")
	for _, c := range []struct {
		name string
		args []string
	}{{"ipnat", []string{"-f", natConf}}, {"ippool", []string{"-f", poolConf}}} {
		code, _, e := tp.runIn(tp.a, c.name, c.args...)
		if code == 0 || !strings.Contains(e, "another network namespace") {
			t.Errorf("%s %v from namespace a: exit %d, stderr %q; want a refusal naming the other namespace", c.name, c.args, code, e)
		}
	}
	if !tp.udpBlocked(addrB) {
		t.Error("UDP to b passes after namespace a's refused load: b's rules were replaced")
	}
	if err := tp.inNS(tp.a, func() error {
		l, err := netlink.LinkByName("sla")
		if err != nil {
			return err
		}
		q, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		if len(q.Programs) != 0 {
			t.Errorf("sla in namespace a has %d TCX programs, want none", len(q.Programs))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	code, o, e := tp.runIn(tp.a, "ipf", "-V")
	if code != 0 || !strings.Contains(o, "Datapath: another network namespace's") ||
		!strings.Contains(o, fmt.Sprintf("Interfaces: if%d (ifindexes of another network namespace)", idxB)) ||
		!strings.Contains(e, "filters another network namespace") {
		t.Errorf("ipf -V from namespace a: exit %d\nstdout %q\nstderr %q", code, o, e)
	}
	if code, _, e := tp.runIn(tp.a, "ipfstat", "-io"); code != 0 || !strings.Contains(e, "filters another network namespace") {
		t.Errorf("ipfstat -io from namespace a: exit %d, stderr %q", code, e)
	}
	// b itself is unaffected
	if l, w := tp.coverageOf(); l != "Interfaces: slb (every non-loopback interface)\n" || w != "" {
		t.Errorf("ipf -V in b: %q, warnings %q", l, w)
	}

	// removal works from anywhere (the way out when b is gone)
	if code, _, e := tp.runIn(tp.a, "ipf", "-D"); code != 0 {
		t.Fatalf("ipf -D from namespace a: exit %d, stderr %q", code, e)
	}
	if tp.udpBlocked(addrB) {
		t.Error("UDP to b still blocked after ipf -D")
	}
	// and a load from a then makes a's own datapath
	tp.mustRunIn(tp.a, "ipf", "-Fa", "-f", block)
	if code, _, e := tp.run("ipf", "-Fa", "-f", passAll); code == 0 || !strings.Contains(e, "another network namespace") {
		t.Errorf("ipf -Fa -f in b after a's load: exit %d, stderr %q; want a refusal", code, e)
	}
	tp.mustRunIn(tp.a, "ipf", "-D")
}

func (tp *topo) mustRunIn(ns netns.NsHandle, name string, args ...string) {
	tp.t.Helper()
	if code, o, e := tp.runIn(ns, name, args...); code != 0 {
		tp.t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), code, o, e)
	}
}

// TestPrivilegedNATAloneOtherNetNS: NAT loaded in namespace b with no
// filter, and the pin directory used from namespace a. NAT recorded no
// namespace (only the filter did), so a's ipnat -f, -C and -F, and ipf
// -y (which recompiles NAT's rules), changed b's NAT and exited 0; a's
// ipf -f loaded a filter beside it. Now each is refused before anything
// is written; ipf -D removes NAT from anywhere, and a's NAT is then a's.
func TestPrivilegedNATAloneOtherNetNS(t *testing.T) {
	tp := ownTopo(t)
	natB := tp.file("natb.conf", "map slb 10.231.0.0/24 -> 10.231.0.1/32\n")
	natA := tp.file("nata.conf", "map sla 10.232.0.0/24 -> 10.232.0.1/32\n")
	passAll := tp.file("pass.conf", "pass in all\npass out all\n")
	tp.mustRun("ipnat", "-f", natB)
	rulesB := tp.mustRun("ipnat", "-l")
	if !strings.Contains(rulesB, "10.231.0.1") {
		t.Fatalf("ipnat -l in b: %q", rulesB)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"ipnat", []string{"-f", natA}},
		{"ipnat", []string{"-C"}},
		{"ipnat", []string{"-F"}},
		{"ipnat", []string{"-r", "-f", natB}},
		{"ipf", []string{"-y"}},
		{"ipf", []string{"-Fa", "-f", passAll}},
	} {
		code, _, e := tp.runIn(tp.a, c.name, c.args...)
		if code == 0 || !strings.Contains(e, "another network namespace") {
			t.Errorf("%s %v from namespace a: exit %d, stderr %q; want a refusal naming the other namespace", c.name, c.args, code, e)
		}
	}
	if got := tp.mustRun("ipnat", "-l"); got != rulesB {
		t.Errorf("b's NAT after a's refused changes:\n%s\nwant\n%s", got, rulesB)
	}
	// reading from a works, and says whose NAT it reads
	for _, args := range [][]string{{"-l"}, {"-s"}} {
		if code, _, e := tp.runIn(tp.a, "ipnat", args...); code != 0 || !strings.Contains(e, "NAT works in another network namespace") {
			t.Errorf("ipnat %v from namespace a: exit %d, stderr %q; want 0 and a warning", args, code, e)
		}
	}
	if _, _, e := tp.run("ipnat", "-l"); e != "" {
		t.Errorf("ipnat -l in b: stderr %q", e)
	}
	if _, err := os.Stat(filepath.Join(tp.pinDir, "config")); err == nil {
		t.Error("a filter was loaded from namespace a beside b's NAT")
	}
	if err := tp.inNS(tp.a, func() error {
		n, err := netnstest.TCXPrograms("sla", ebpf.AttachTCXIngress)
		if err == nil && n != 0 {
			t.Errorf("sla in namespace a has %d TCX programs, want none", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if tp.tcxPrograms("slb") == 0 {
		t.Error("slb in b lost NAT")
	}
	// removal works from anywhere (the way out when b is gone)
	if code, _, e := tp.runIn(tp.a, "ipf", "-D"); code != 0 {
		t.Fatalf("ipf -D from namespace a: exit %d, stderr %q", code, e)
	}
	if _, err := os.Stat(NATPinDir(tp.pinDir)); !os.IsNotExist(err) {
		t.Errorf("NAT's pins after ipf -D from namespace a: %v", err)
	}
	// and a's NAT is then a's: b is refused
	tp.mustRunIn(tp.a, "ipnat", "-f", natA)
	if code, _, e := tp.run("ipnat", "-C"); code == 0 || !strings.Contains(e, "another network namespace") {
		t.Errorf("ipnat -C in b after a's load: exit %d, stderr %q; want a refusal", code, e)
	}
	// NAT detached everywhere (its rules cleared) works in no namespace
	tp.mustRunIn(tp.a, "ipnat", "-C")
	tp.mustRun("ipnat", "-f", natB)
	tp.mustRun("ipf", "-D")
}

// TestPrivilegedOlderLayoutOtherNetNS: the filter of namespace b whose
// counters have an older Sluice's layout. A change from namespace a used
// to load this Sluice's programs over it (moving its counters, and what
// b runs) before the namespace check refused the change; now it is
// refused with the datapath as it was, and ipf -D from a removes it.
func TestPrivilegedOlderLayoutOtherNetNS(t *testing.T) {
	tp := ownTopo(t)
	block := tp.file("block.conf", fmt.Sprintf("block in quick proto udp from any to any port = %d\npass in all\npass out all\n", udpPort))
	passAll := tp.file("pass.conf", "pass in all\npass out all\n")
	tp.mustRun("ipf", "-Fa", "-f", block)
	pinOlderStats(t, tp.pinDir, true)
	older := func() bool {
		d, err := bpf.OpenPinned(tp.pinDir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.OlderLayout()
	}
	if !older() {
		t.Fatal("the replaced statistics do not read as the older layout")
	}
	for _, args := range [][]string{{"-Fa", "-f", passAll}, {"-s"}, {"-y"}} {
		code, _, e := tp.runIn(tp.a, "ipf", args...)
		if code == 0 || !strings.Contains(e, "another network namespace") {
			t.Errorf("ipf %v from namespace a: exit %d, stderr %q; want a refusal naming the other namespace", args, code, e)
		}
		if !older() {
			t.Fatalf("ipf %v from namespace a moved b's datapath to this layout before refusing", args)
		}
	}
	if !tp.udpBlocked(addrB) {
		t.Error("UDP to b passes after namespace a's refused changes")
	}
	if code, _, e := tp.runIn(tp.a, "ipf", "-D"); code != 0 {
		t.Fatalf("ipf -D from namespace a: exit %d, stderr %q", code, e)
	}
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Errorf("pin directory after ipf -D from namespace a: %v", err)
	}
}

// TestPrivilegedQoSCommandsOtherNetNS: ipqosadmin from two namespaces
// over one state directory, the adapters of other names (no link pin
// collides). Before, a's -load replaced b's configuration and took b's
// marker, exit 0; now a's changes exit 1 naming the other namespace and
// the way out, b keeps marking, and a's -unload (the way out when b is
// gone) leaves the state to the next load.
func TestPrivilegedQoSCommandsOtherNetNS(t *testing.T) {
	tp := ownTopo(t)
	qdir := filepath.Join(filepath.Dir(tp.pinDir), "sluice-qos")
	const conf = "filter f {\n    udp\n}\npolicy p {\n    uses f\n    dscp 10\n}\nadapter %s {\n    uses p\n}\n"
	qb := tp.file("qb.conf", fmt.Sprintf(conf, "slb"))
	qa := tp.file("qa.conf", fmt.Sprintf(conf, "sla"))
	qos := func(ns netns.NsHandle, args ...string) (int, string, string) {
		t.Helper()
		return tp.runIn(ns, "ipqosadmin", append(args, "-pindir", qdir)...)
	}
	if code, _, e := qos(tp.b, "-load", "-f", qb); code != 0 {
		t.Fatalf("ipqosadmin -load in b: exit %d, stderr %q", code, e)
	}
	for _, args := range [][]string{{"-load", "-f", qa}, {"-resync"}, {"-showstats", "-reset"}, {"-loglevel", "info"}} {
		code, _, e := qos(tp.a, args...)
		if code != 1 || !strings.Contains(e, "another network namespace") || !strings.Contains(e, "ipqosadmin -unload") {
			t.Errorf("ipqosadmin %v from namespace a: exit %d, stderr %q; want 1 and a refusal naming the other namespace", args, code, e)
		}
	}
	if code, o, _ := qos(tp.b, "-state"); code != 3 || !strings.Contains(o, "adapters filtering: slb") {
		t.Errorf("ipqosadmin -state in b after a's refused changes: exit %d, %q", code, o)
	}
	if code, _, e := qos(tp.a, "-unload"); code != 0 {
		t.Fatalf("ipqosadmin -unload from namespace a: exit %d, stderr %q", code, e)
	}
	if n := tp.tcxPrograms("slb"); n != 0 {
		t.Errorf("slb has %d TCX programs after a's -unload, want none", n)
	}
	if code, _, e := qos(tp.a, "-load", "-f", qa); code != 0 {
		t.Errorf("ipqosadmin -load from namespace a after the unload: exit %d, stderr %q", code, e)
	}
	qos(tp.a, "-unload")
}
