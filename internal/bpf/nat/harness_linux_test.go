//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"fmt"
	"io"
	"sluice/internal/bpf"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	gonat "sluice/internal/nat"
	"sluice/internal/rules/ipnat"
	"sluice/internal/testutil"
	"sluice/internal/testutil/netnstest"
)

// harness runs the NAT programs with BPF_PROG_TEST_RUN inside a network
// namespace of the test's own, where the interfaces the rules name exist
// as dummy links (a test run needs the device it pretends the packet
// arrived on).
type harness struct {
	t   testing.TB
	d   *Datapath
	ns  netns.NsHandle
	ifs map[string]int
	// slotted counts the packets translated through fast4dm's slots
	// (what they held at each reset): a differential test that runs the
	// fast path requires some, so it cannot pass with the slots unused
	slotted uint64
	// inline, when set, is a filter with NAT's established path inside
	// its programs (nat15) that randomRun's packets meet first as
	// attached (runFirst); inlineN counts what it translated
	inline  *bpf.Datapath
	inlineN int
}

// shared holds one datapath per fast path stage (0: the normal one) and
// map allocation (benchmarks), loaded on first use and kept for the
// package's tests.
var shared struct {
	mu sync.Mutex
	d  map[[2]uint32]*Datapath
}

func newHarness(t testing.TB) *harness { return newHarnessStage(t, 0) }

// newHarnessStage is newHarness with the programs loaded with nat_stage
// set (stOff: no fast path).
func newHarnessStage(t testing.TB, stage uint32) *harness {
	t.Helper()
	return newHarnessAlloc(t, stage, allocAsBuilt)
}

// newHarnessAlloc is newHarnessStage with the session tables allocated
// as alloc says (benchmarks).
func newHarnessAlloc(t testing.TB, stage uint32, alloc allocMode) *harness {
	t.Helper()
	testutil.RequireRoot(t)
	shared.mu.Lock()
	key := [2]uint32{stage, uint32(alloc)}
	d, ok := shared.d[key]
	if !ok {
		var err error
		if d, err = Load(Options{NoPin: true, stage: stage, alloc: alloc}); err != nil {
			shared.mu.Unlock()
			t.Fatalf("Load: %+v", err)
		}
		if shared.d == nil {
			shared.d = map[[2]uint32]*Datapath{}
		}
		shared.d[key] = d
	}
	shared.mu.Unlock()
	h := &harness{t: t, d: d, ns: netnstest.New(t), ifs: map[string]int{}}
	if err := h.reset(); err != nil {
		t.Fatal(err)
	}
	return h
}

// do runs fn on a thread inside the harness's namespace.
func (h *harness) do(fn func() error) error { return netnstest.Do(h.ns, fn) }

// ifindex returns the index of a dummy link named name, making it on
// first use. It must run inside the namespace (h.do).
func (h *harness) ifindex(name string) (int, error) {
	if i, ok := h.ifs[name]; ok {
		return i, nil
	}
	// a veth end (dummy links need a module this kernel may lack)
	la := netlink.NewLinkAttrs()
	la.Name = name
	peer := fmt.Sprintf("peer%d", len(h.ifs))
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer}); err != nil {
		return 0, fmt.Errorf("adding veth %s: %w", name, err)
	}
	if pl, err := netlink.LinkByName(peer); err == nil {
		_ = netlink.LinkSetUp(pl)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return 0, err
	}
	h.ifs[name] = l.Attrs().Index
	return l.Attrs().Index, nil
}

// reset empties the sessions, host map and fragment table, zeroes the
// counters, forgets interface addresses and restarts ipftest's random
// sequence.
func (h *harness) reset() error {
	n, keys, err := slotted(h.d)
	if err != nil {
		return err
	}
	h.slotted += n
	if _, err := h.d.FlushSessions(); err != nil {
		return err
	}
	// no slot may outlive its session (fast_gone clears it)
	for _, k := range keys {
		if _, ok, err := h.d.slotOf(k); err != nil || ok {
			return fmt.Errorf("the fast4dm slot of %+v outlived the flush of its session (err %v)", k, err)
		}
	}
	// no rules: the next set's rules start with fresh allocation state
	// even where their text is the last set's (LoadRules keeps a kept
	// rule's next address and port, the engine made anew has none)
	empty, err := Compile(nil, CompileOptions{})
	if err != nil {
		return err
	}
	if err := h.d.LoadRules(empty); err != nil {
		return err
	}
	for _, m := range []*ebpf.Map{h.d.objs.Sessions, h.d.objs.Fast4, h.d.objs.Fast6, h.d.objs.Hostmaps, h.d.objs.Frags, h.d.objs.Ftps} {
		if err := clearMap(m); err != nil {
			return err
		}
	}
	for _, k := range []uint32{cfgCount, cfgWilds, cfgClock, cfgNoTwin, cfgShadows, cfgWildSeen} {
		if err := h.d.setCfg(k, 0); err != nil {
			return err
		}
	}
	if err := h.d.ZeroStats(); err != nil {
		return err
	}
	// the sweeper's counters and fault; the update stops its timer (an
	// array's update frees the value's timer), started again
	if err := h.d.objs.Sweeper.Update(uint32(0), &natNatSweeper{}, ebpf.UpdateExist); err != nil {
		return err
	}
	if err := h.d.armSweeper(); err != nil {
		return err
	}
	if err := h.d.ClearIfAddrs(); err != nil {
		return err
	}
	// a test that moved the clock left general programs
	if err := h.d.plainIfCan(false); err != nil {
		return err
	}
	return h.d.SetIPFTestMode(true)
}

func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	k := make([]byte, m.KeySize())
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		_ = m.Delete(k)
	}
	return nil
}

// slotted returns the packets counted in the fast4dm slots of d's fast4
// entries, and the keys of those entries.
func slotted(d *Datapath) (uint64, []natNatFkey, error) {
	var (
		n    uint64
		keys []natNatFkey
		k    natNatFkey
		v    natNatFast4
	)
	it := d.objs.Fast4.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return 0, nil, err
	}
	for _, k := range keys {
		c, ok, err := d.slotOf(k)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			n += c.Pkts
		}
	}
	return n, keys, nil
}

// slotHits is the packets translated through fast4dm's slots since the
// harness was made (and, for the sessions still there, until now).
func (h *harness) slotHits() uint64 {
	h.t.Helper()
	n, _, err := slotted(h.d)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.slotted + n
}

// load compiles text and makes it the active set (inside the namespace).
func (h *harness) load(text string) (*ipnat.File, error) {
	f, err := ipnat.Parse("test.nat", text, io.Discard)
	if err != nil {
		return nil, err
	}
	im, err := Compile(f.Rules, CompileOptions{File: "test.nat", Ifindex: func(name string) (int, bool) {
		i, err := h.ifindex(name)
		return i, err == nil
	}})
	if err != nil {
		return nil, err
	}
	return f, h.d.LoadRules(im)
}

// run passes an IP packet through the program of direction out on the
// interface ifname. It returns the verdict and the IP packet as it left.
// loadAging empties the datapath (reset), turns ipftest's mode off (the
// timers end sessions) and loads rules: the tests of sessions' ends. It
// must run inside the namespace (h.do); the caller puts ipftest's mode
// back.
func (h *harness) loadAging(rules string) error {
	if err := h.reset(); err != nil {
		return err
	}
	if err := h.d.SetIPFTestMode(false); err != nil {
		return err
	}
	_, err := h.load(rules)
	return err
}

func (h *harness) run(out bool, ifname string, ip []byte) (int32, []byte, error) {
	idx, err := h.ifindex(ifname)
	if err != nil {
		return 0, nil, err
	}
	ret, frame, err := h.d.Run(out, ethFrame(ip), idx)
	if err != nil {
		return 0, nil, err
	}
	if len(frame) < 14 {
		return ret, nil, fmt.Errorf("output frame of %d bytes", len(frame))
	}
	return ret, frame[14:], nil
}

// runPre runs the egress program that precedes the filter.
func (h *harness) runPre(ifname string, ip []byte) (int32, []byte, error) {
	idx, err := h.ifindex(ifname)
	if err != nil {
		return 0, nil, err
	}
	ret, frame, err := h.d.RunPre(ethFrame(ip), idx)
	if err != nil {
		return 0, nil, err
	}
	return ret, frame[14:], nil
}

// ethFrame puts an Ethernet header in front of an IP packet.
func ethFrame(ip []byte) []byte {
	f := make([]byte, 14+len(ip))
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 1})
	f[12], f[13] = 0x08, 0x00
	if len(ip) > 0 && ip[0]>>4 == 6 {
		f[12], f[13] = 0x86, 0xdd
	}
	copy(f[14:], ip)
	return f
}

// sessionList formats the kernel's sessions as the engine's dump does.
func sessionList(ss []Session) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(s.Info().String())
	}
	return b.String()
}

// hostmapList formats the kernel's host map as the engine's dump does.
func hostmapList(hs []Hostmap) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(gonat.HostmapInfo{OSrc: h.OSrc, ODst: h.ODst, NSrc: h.NSrc, NDst: h.NDst, Use: int(h.Use)}.String())
	}
	return b.String()
}

// engineSections splits the engine's dump into its session and host map
// lists.
func engineSections(n *gonat.NAT) (sessions, hostmaps string) {
	var b strings.Builder
	n.Dump(&b)
	s := b.String()
	_, rest, _ := strings.Cut(s, "\nList of active sessions:\n")
	sessions, hostmaps, _ = strings.Cut(rest, "\nHostmap table:\n")
	return sessions, hostmaps
}
