//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	natbpf "sluice/internal/bpf/nat"
	"sluice/internal/bpf/qosmark"
	"sluice/internal/ipfctl"
	"sluice/internal/qos"
	"sluice/internal/rules/ipqos"
	"sluice/internal/testutil"
)

// runCounts reads the run counts of the TCX programs on the gateway's
// interface ifname by hook and kernel name ("ingress nat_ingress",
// "ingress sluice_ingress_nat" (the inline prefix), "egress sluice_egr_nat").
func (w *gwTopo) runCounts(ifname string) map[string]uint64 {
	w.t.Helper()
	out := map[string]uint64{}
	w.eachProg(ifname, func(hook string, _ ebpf.ProgramID, name string, st *ebpf.ProgramStats) {
		out[hook+" "+name] += st.RunCount
	})
	return out
}

// inlineState reads whether NAT's path is inside the filter's programs
// (on, and its halves) and the prefix's link pins.
func (w *gwTopo) inlineState() (on, in, out bool, pins []string) {
	w.t.Helper()
	w.must(w.in(w.g, func() error {
		fd, err := bpf.OpenPinned(w.pinDir)
		if errors.Is(err, bpf.ErrNotLoaded) {
			return nil
		}
		if err != nil {
			return err
		}
		defer fd.Close()
		on, in, out = fd.NATInline()
		return nil
	}))
	ents, _ := os.ReadDir(w.pinDir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "_natin") {
			pins = append(pins, e.Name())
		}
	}
	return
}

// variantsHolding lists the filter's pinned programs that use the map
// with the given id.
func (w *gwTopo) variantsHolding(id ebpf.MapID) []string {
	w.t.Helper()
	var out []string
	ents, _ := os.ReadDir(w.pinDir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "spec_") {
			continue
		}
		p, err := ebpf.LoadPinnedProgram(filepath.Join(w.pinDir, e.Name()), nil)
		if err != nil {
			continue // not a program
		}
		info, err := p.Info()
		p.Close()
		w.must(err)
		ids, _ := info.MapIDs()
		for _, m := range ids {
			if m == id {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// roundTrips echoes n messages over c, each within a second.
func roundTrips(c net.Conn, n int) error {
	for i := range n {
		if err := echo(c, []byte(fmt.Sprintf("round trip %d", i)), time.Second); err != nil {
			return fmt.Errorf("round trip %d: %w", i, err)
		}
	}
	return nil
}

// TestPrivilegedNATInlineCommands drives NAT inside the filter's programs
// (natw) through the commands: ipf -f and ipnat -f put it there; an
// established masqueraded TCP flow is then translated by the filter's
// programs (NAT's own ingress program runs for almost none of its
// packets, the prefix for all of them; with nat_inline=0 it is the other
// way round); ipnat -l lists the session; a rule set swapped in by
// another command (ipf -s) is the one the prefix filters by (with the
// prefix left made for the old set the blocked replies would pass);
// ipf -T nat_inline=0/1, ipnat -C and ipf -D take it out and leave no
// prefix link nor pin.
func TestPrivilegedNATInlineCommands(t *testing.T) {
	w := newGW(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		testutil.SkipOrFail(t, "enabling BPF run statistics: %v", err)
	}
	defer stats.Close()
	w.serve(w.s, gwS4, gwTCP, 0)
	open := w.file("open.ipf", "pass out quick on gs0 all\npass in quick on gs0 all\n")
	// the server's replies blocked inbound: only the filter's verdict
	// keeps them out (no state: the rules alone decide)
	shut := w.file("shut.ipf", "pass out quick on gs0 all\nblock in quick on gs0 proto tcp from 198.51.100.2 port = 5001 to any\npass in quick on gs0 all\n")
	nat := w.file("gw.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n")
	w.ipf("-Fa", "-f", open)
	w.mustIPNAT("-f", nat)
	on, in, out, pins := w.inlineState()
	if !on || !in || !out || len(pins) != 1 {
		t.Fatalf("after ipf -f and ipnat -f: inline %v (in %v, out %v), prefix pins %v; want on, both halves, one pin", on, in, out, pins)
	}
	w.checkOrder("gs0")

	c, err := w.dial(w.c, gwS4, gwTCP)
	if err != nil {
		t.Fatalf("TCP through the gateway with NAT inside the filter: %v", err)
	}
	defer c.Close()
	const n = 200
	before := w.runCounts("gs0")
	if err := roundTrips(c, n); err != nil {
		t.Fatal(err)
	}
	after := w.runCounts("gs0")
	prefix := after["ingress sluice_ingress_nat"] - before["ingress sluice_ingress_nat"]
	natIn := after["ingress nat_ingress"] - before["ingress nat_ingress"]
	natOut := after["egress nat_egress"] - before["egress nat_egress"]
	filtOut := after["egress "+bpf.NATEgressProgName] - before["egress "+bpf.NATEgressProgName]
	t.Logf("%d round trips: prefix %d, NAT ingress %d, filter egress (with NAT) %d, NAT egress %d", n, prefix, natIn, filtOut, natOut)
	if prefix < n || filtOut < n || natIn > n/10 || natOut > n/10 {
		t.Errorf("with NAT inside the filter the filter's programs must take the flow's packets: prefix %d, filter egress %d (want >= %d), NAT's ingress %d, egress %d (want <= %d)",
			prefix, filtOut, n, natIn, natOut, n/10)
	}
	if s := w.sessions(); len(s) == 0 || !strings.Contains(strings.Join(s, "\n"), gwC4) {
		t.Errorf("ipnat -l: sessions %q, want the client's", s)
	}

	// another command loads the blocking set into the inactive slot and
	// a third swaps it in: the prefix in force must be made for it
	w.ipf("-I", "-Fa", "-f", shut)
	w.ipf("-s")
	if err := roundTrips(c, 1); err == nil {
		t.Fatal("a reply the swapped-in rules block passed: the prefix filters by the old rules")
	}
	c.Close()
	if _, err := w.dial(w.c, gwS4, gwTCP); err == nil {
		t.Fatal("a new connection passed the rules that block its replies")
	}
	w.ipf("-Fa", "-f", open)
	if c, err = w.dial(w.c, gwS4, gwTCP); err != nil {
		t.Fatalf("TCP after the open rules were loaded again: %v", err)
	}
	defer c.Close()
	if err := roundTrips(c, 5); err != nil {
		t.Fatal(err)
	}
	w.checkPrefixCurrent()

	// ipf -T nat_inline=0: two programs again, NAT's takes the packets
	w.ipf("-T", "nat_inline=0")
	if on, _, _, pins := w.inlineState(); on || len(pins) != 0 {
		t.Fatalf("after nat_inline=0: inline %v, prefix pins %v", on, pins)
	}
	before = w.runCounts("gs0")
	if err := roundTrips(c, n); err != nil {
		t.Fatalf("with nat_inline=0: %v", err)
	}
	after = w.runCounts("gs0")
	if natIn := after["ingress nat_ingress"] - before["ingress nat_ingress"]; natIn < n {
		t.Errorf("with nat_inline=0 NAT's ingress program ran %d times for %d round trips", natIn, n)
	}
	if out := w.ipf("-T", "nat_inline"); !strings.Contains(out, "current 0") {
		t.Errorf("ipf -T nat_inline: %q, want current 0", out)
	}
	w.ipf("-T", "nat_inline=1")
	if on, _, _, pins := w.inlineState(); !on || len(pins) != 1 {
		t.Fatalf("after nat_inline=1: inline %v, prefix pins %v", on, pins)
	}
	if err := roundTrips(c, 5); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// ipnat -C: no rules, no path
	w.mustIPNAT("-C")
	if on, _, _, pins := w.inlineState(); on || len(pins) != 0 {
		t.Fatalf("after ipnat -C: inline %v, prefix pins %v", on, pins)
	}
	w.mustIPNAT("-f", nat)
	if on, _, _, _ := w.inlineState(); !on {
		t.Fatal("ipnat -f did not put NAT's path back")
	}
	w.ipf("-D")
	if _, err := os.Stat(w.pinDir); !os.IsNotExist(err) {
		t.Errorf("pins after ipf -D: %v", err)
	}
	w.must(w.in(w.g, func() error {
		ifc, err := net.InterfaceByName("gs0")
		if err != nil {
			return err
		}
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			q, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: typ})
			if err != nil {
				return err
			}
			if len(q.Programs) != 0 {
				return fmt.Errorf("programs left on gs0 after ipf -D: %v", q.Programs)
			}
		}
		return nil
	}))
}

// checkPrefixCurrent checks that the prefix's links run the prefix pinned
// for the programs in force (cfgSpec's key): the prefix follows the pair.
func (w *gwTopo) checkPrefixCurrent() {
	w.t.Helper()
	ents, _ := os.ReadDir(w.pinDir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), "_natin") {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(w.pinDir, e.Name()), nil)
		w.must(err)
		info, err := l.Info()
		l.Close()
		w.must(err)
		p, err := ebpf.NewProgramFromID(info.Program)
		w.must(err)
		pi, err := p.Info()
		p.Close()
		w.must(err)
		if pi.Name != "sluice_ingress_nat" {
			w.t.Errorf("%s runs %q, want the prefix", e.Name(), pi.Name)
		}
	}
}

// qosConf marks the client's TCP flow to the server on the gateway's
// outside interface.
const qosConf = `
filter web {
    protocol 6
    dstport 5001
    net 0x800
}
policy ef {
    uses web
    dscp 46
}
adapter gs0 {
    uses ef
}
`

// TestPrivilegedNATInlineQoS: the filter's egress program with NAT's path
// ends the egress chain for the packets it translates, so IPQoS's marker
// behind it would miss them. qosmark refuses to attach behind it;
// ipqosadmin's load (ipfctl) takes the egress half out first and
// attaches; with the marker there, ipnat puts only the ingress prefix
// in, and every packet of the flow still reaches the marker.
func TestPrivilegedNATInlineQoS(t *testing.T) {
	w := newGW(t)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		testutil.SkipOrFail(t, "enabling BPF run statistics: %v", err)
	}
	defer stats.Close()
	w.serve(w.s, gwS4, gwTCP, 0)
	w.ipf("-Fa", "-f", w.file("open.ipf", "pass out quick on gs0 all\npass in quick on gs0 all\n"))
	w.mustIPNAT("-f", w.file("gw.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"))
	if on, _, out, _ := w.inlineState(); !on || !out {
		t.Fatalf("inline %v, egress half %v: want both", on, out)
	}
	cfg, err := ipqos.Parse("gw.qos", []byte(qosConf))
	w.must(err)
	rs, err := qos.Compile(cfg)
	w.must(err)
	qdir := filepath.Join(filepath.Dir(w.pinDir), "qos")
	load := func() error {
		return w.in(w.g, func() error {
			_, err := qosmark.Load(rs, qosmark.Options{PinDir: qdir, LinkRate: func(string) uint64 { return 10e9 }})
			return err
		})
	}
	w.onClose(func() { w.in(w.g, func() error { return qosmark.Unload(qdir, nil) }) })
	if err := load(); !errors.Is(err, qosmark.ErrNATInline) {
		t.Fatalf("IPQoS behind the filter's egress half: %v, want ErrNATInline", err)
	}
	if n := w.runCounts("gs0"); n["egress qos_egress"] != 0 {
		t.Fatalf("a refused load left the marker attached: %v", n)
	}
	// ipqosadmin's load (ipfctl's backend) drops the egress half first,
	// keeping the prefix, and attaches
	w.must(w.in(w.g, func() error {
		_, err := ipfctl.QoSBackend(qdir).Load(rs, ipfctl.QoSLoadOptions{})
		return err
	}))
	if on, in, out, _ := w.inlineState(); !on || !in || out {
		t.Fatalf("after ipqosadmin's load: inline %v, in %v, out %v; want the prefix only", on, in, out)
	}
	// and it stays out when ipnat puts the path in again
	w.ipf("-T", "nat_inline=0")
	w.ipf("-T", "nat_inline=1")
	on, in, out, pins := w.inlineState()
	if !on || !in || out || len(pins) != 1 {
		t.Fatalf("with the marker behind the filter: inline %v, in %v, out %v, pins %v; want the prefix only", on, in, out, pins)
	}
	c, err := w.dial(w.c, gwS4, gwTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 100
	before := w.runCounts("gs0")
	if err := roundTrips(c, n); err != nil {
		t.Fatal(err)
	}
	after := w.runCounts("gs0")
	var marker string
	for k := range after {
		if strings.HasPrefix(k, "egress qos") {
			marker = k
		}
	}
	if marker == "" {
		t.Fatalf("no marker on gs0's egress: %v", after)
	}
	if got := after[marker] - before[marker]; got < n {
		t.Errorf("the marker ran %d times for %d packets out", got, n)
	}
	if got := after["ingress sluice_ingress_nat"] - before["ingress sluice_ingress_nat"]; got < n {
		t.Errorf("the prefix ran %d times for %d replies", got, n)
	}
	if got := after["egress "+bpf.NATEgressProgName]; got != 0 {
		t.Errorf("the filter's egress half ran (%d) with the marker behind it", got)
	}
	// the names qosmark looks for and the filter gives agree
	if qosmark.NATEgressProgName != bpf.NATEgressProgName {
		t.Errorf("qosmark looks for %q, the filter names its program %q", qosmark.NATEgressProgName, bpf.NATEgressProgName)
	}
}

// TestPrivilegedNATInlineNATGone: NAT's pins removed behind the filter's
// back (not through ipf -D or ipnat) while its path is inside the
// filter's programs. The next command cannot open NAT's array: it turns
// the path off, the prefix's links first, and loads its rules, which are
// then the ones in force (not a failed load keeping the old ones).
func TestPrivilegedNATInlineNATGone(t *testing.T) {
	w := newGW(t)
	w.serve(w.s, gwS4, gwTCP, 0)
	w.routeVia("192.168.77.0/24")
	w.ipf("-Fa", "-f", w.file("open.ipf", "pass out quick on gs0 all\npass in quick on gs0 all\n"))
	w.mustIPNAT("-f", w.file("gw.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"))
	if on, _, _, pins := w.inlineState(); !on || len(pins) != 1 {
		t.Fatalf("inline %v, pins %v", on, pins)
	}
	dm, err := ebpf.LoadPinnedMap(filepath.Join(ipfctl.NATPinDir(w.pinDir), "fast4dm"), nil)
	w.must(err)
	info, err := dm.Info()
	w.must(err)
	old, _ := info.ID()
	dm.Close()
	if holders := w.variantsHolding(old); len(holders) == 0 {
		t.Fatal("no pinned variant reads NAT's array while the path is on: the check below would prove nothing")
	}
	w.must(w.in(w.g, func() error { return natbpf.Remove(ipfctl.NATPinDir(w.pinDir)) }))
	w.ipf("-Fa", "-f", w.file("shut.ipf", "pass out quick on gs0 all\nblock in quick on gs0 proto tcp from 198.51.100.2 port = 5001 to any\npass in quick on gs0 all\n"))
	if on, _, _, pins := w.inlineState(); on || len(pins) != 0 {
		t.Fatalf("after NAT went: inline %v, prefix pins %v; want off, none", on, pins)
	}
	// each such pin held the removed array's 8 MiB until eight newer
	// variants evicted it
	if holders := w.variantsHolding(old); len(holders) != 0 {
		t.Errorf("after NAT went, pinned variants still hold its array %d: %v", old, holders)
	}
	// the server routes the client's network back now (no NAT): the
	// new rules block its replies
	if c, err := w.dial(w.c, gwS4, gwTCP); err == nil {
		c.Close()
		t.Fatal("a reply the new rules block passed")
	}
}
