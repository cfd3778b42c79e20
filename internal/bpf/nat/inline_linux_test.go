//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/internal/bpf"
	"sluice/internal/packet/packettest"
	"sluice/internal/rules/ipf"
)

// inlineFilter loads a filter of its own (unpinned) with rules text (none
// when empty) and NAT's established path inside its programs, over h's
// direct array.
func inlineFilter(t *testing.T, h *harness, text string) *bpf.Datapath {
	t.Helper()
	fd, err := bpf.Load(bpf.Options{NoPin: true})
	if err != nil {
		t.Fatalf("loading the filter: %+v", err)
	}
	t.Cleanup(func() { fd.Close() })
	if text != "" {
		rs, err := ipf.Parse("inline.ipf", []byte(text), ipf.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		im, err := bpf.Compile(rs, bpf.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := fd.LoadRules(im, bpf.Active); err != nil {
			t.Fatalf("%+v", err)
		}
	}
	dm, nspj, ok := h.d.InlineSlots()
	if !ok {
		t.Fatal("the harness's NAT programs are not plain")
	}
	if err := fd.InlineNAT(dm, nspj); err != nil {
		t.Fatalf("InlineNAT: %+v", err)
	}
	return fd
}

const (
	tcUnspec = -1 // the next program runs (NAT's)
	tcOK     = 0  // the chain ends: translated here and passed
)

// TestPrivilegedInlineNAT follows a flow through the filter's programs
// with NAT's established path inside them (nat15): the first packet is
// left to NAT's program (no session), which makes the session; the next
// one is translated by the filter's egress program itself, to the bytes
// NAT's program gives, counted in the flow's slot, and ends the chain; the
// reply is translated back by the ingress prefix and filtered after it
// (the filter's state, made outbound with the addresses before NAT, must
// find it: the rules pass nothing inbound but by state); a packet the
// filter blocks is not translated; and after ipnat -F no packet of the
// flow is translated by the filter's programs. It fails if the inline
// path is never taken (the verdicts and the slot's count).
func TestPrivilegedInlineNAT(t *testing.T) {
	h := newHarness(t)
	if err := h.do(func() error {
		_, err := h.load("map nic0 10.0.0.2/32 -> 192.0.2.1/32\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	fd := inlineFilter(t, h, "block in all\nblock out quick proto udp from any to 3.3.3.3\npass out quick proto udp from any to any keep state\n")
	pkt := udpTo("10.0.0.2", "2.2.2.2", 5000)
	// the first packet: no session, the filter passes it (making its
	// state) and leaves it to NAT
	ret, got, err := runInline(h, fd, true, pkt, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcUnspec || !bytes.Equal(got, pkt) {
		t.Fatalf("first packet: verdict %d, bytes changed %v; want the next program, unchanged", ret, !bytes.Equal(got, pkt))
	}
	var natOut []byte
	if err := h.do(func() error {
		var err error
		_, natOut, err = h.run(true, "nic0", pkt)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(natOut, pkt) {
		t.Fatal("NAT did not translate the first packet")
	}
	before := h.slotHits()
	ret, got, err = runInline(h, fd, true, pkt, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcOK {
		t.Fatalf("second packet: verdict %d, want %d (translated by the filter's program, the chain ended)", ret, tcOK)
	}
	if !bytes.Equal(got, natOut) {
		t.Fatalf("second packet:\n inline %x\n NAT    %x", got, natOut)
	}
	if n := h.slotHits() - before; n != 1 {
		t.Fatalf("the slot counted %d packets of the inline path, want 1", n)
	}
	// the reply, to the translated source; NAT's program's translation
	// of it first (it counts too), then the prefix's
	reply := udpFrom("2.2.2.2", "192.0.2.1", srcPort(natOut))
	var natIn []byte
	if err := h.do(func() error {
		var err error
		_, natIn, err = h.run(false, "nic0", reply)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ret, got, err = runInline(h, fd, false, reply, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcOK || !bytes.Equal(got, natIn) {
		t.Fatalf("reply: verdict %d\n inline %x\n NAT    %x", ret, got, natIn)
	}
	// a packet the filter blocks is not translated (NAT after the filter)
	blocked := udpTo("10.0.0.2", "3.3.3.3", 5001)
	if err := h.do(func() error { _, _, err := h.run(true, "nic0", blocked); return err }); err != nil {
		t.Fatal(err)
	}
	ret, got, err = runInline(h, fd, true, blocked, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != 2 || !bytes.Equal(got, blocked) {
		t.Fatalf("blocked packet: verdict %d, translated %v", ret, !bytes.Equal(got, blocked))
	}
	// another interface: the entry is nic0's
	ret, got, err = runInline(h, fd, true, pkt, "nic1")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcUnspec || !bytes.Equal(got, pkt) {
		t.Fatalf("on another interface: verdict %d, translated %v", ret, !bytes.Equal(got, pkt))
	}
	// ipnat -F: no slot may translate the flow any more
	if _, err := h.d.FlushSessions(); err != nil {
		t.Fatal(err)
	}
	ret, got, err = runInline(h, fd, true, pkt, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcUnspec || !bytes.Equal(got, pkt) {
		t.Fatalf("after the flush: verdict %d, translated %v", ret, !bytes.Equal(got, pkt))
	}
	ret, got, err = runInline(h, fd, false, reply, "nic0")
	if err != nil {
		t.Fatal(err)
	}
	if ret != tcUnspec || !bytes.Equal(got, reply) {
		t.Fatalf("reply after the flush: verdict %d, translated %v", ret, !bytes.Equal(got, reply))
	}
}

// udpFrom is an inbound UDP datagram from src:53 to dst:dport.
func udpFrom(src, dst string, dport uint16) []byte {
	return packettest.V4{Src: src, Dst: dst, Proto: 17, TTL: 64, Payload: packettest.UDP(53, dport, []byte("a"), false)}.Bytes()
}

// runInline runs ip through fd's ingress prefix (or egress program) on interface ifname of h's
// namespace; it returns the verdict and the IP packet as it left.
func runInline(h *harness, fd *bpf.Datapath, out bool, ip []byte, ifname string) (ret int32, got []byte, err error) {
	err = h.do(func() error {
		idx, err := h.ifindex(ifname)
		if err != nil {
			return err
		}
		var frame []byte
		if out {
			ret, frame, err = fd.RunAt(true, ethFrame(ip), idx)
		} else {
			ret, frame, err = fd.RunPrefix(ethFrame(ip), idx)
		}
		if err == nil {
			got = frame[14:]
		}
		return err
	})
	return ret, got, err
}

// niKernelInline is niKernel with NAT's established path inside the
// filter's programs, in the order they are attached: inbound the prefix
// (which translates and filters a packet of a slot and ends the chain,
// or leaves it untouched), then NAT's program and the filter's; outbound
// NAT's pre program, the filter's (which translates what it passed
// through a slot and ends the chain), then NAT's. *n counts the packets
// the filter's programs translated.
func niKernelInline(h *harness, fd *bpf.Datapath, out bool, ifname, routed string, ip []byte, n *int) (bool, []byte, error) {
	idx, err := h.ifindex(ifname)
	if err != nil {
		return false, nil, err
	}
	if !out {
		ret, fb, err := fd.RunPrefix(ethFrame(ip), idx)
		if err != nil {
			return false, nil, err
		}
		switch ret {
		case tcOK:
			*n++
			return true, fb[14:], nil
		case tcUnspec:
			if !bytes.Equal(fb[14:], ip) {
				return false, nil, fmt.Errorf("the prefix changed a packet it left to NAT:\n in  %x\n out %x", ip, fb[14:])
			}
		default:
			// translated and blocked, or redirected: the filter's verdict
			// on the translated packet is checked against the engine
			*n++
			return false, nil, nil
		}
		ret, b, err := h.run(false, ifname, ip)
		if err != nil || ret == VerdictShot {
			return false, nil, err
		}
		if ret == VerdictPass {
			return true, b, nil // a proxy's data connection: no filter
		}
		v, fb, err := fd.RunAt(false, ethFrame(b), idx)
		if err != nil || v != tcUnspec {
			if v == 7 && routed != "" {
				return false, nil, fmt.Errorf("an inbound packet routed to %s: not followed here", routed)
			}
			return false, nil, err
		}
		return true, fb[14:], nil
	}
	ret, b, err := h.runPre(ifname, ip)
	if err != nil || ret == VerdictShot {
		return false, nil, err
	}
	if ret == VerdictPass {
		return true, b, nil
	}
	v, fb, err := fd.RunAt(true, ethFrame(ip), idx)
	if err != nil {
		return false, nil, err
	}
	switch {
	case v == tcOK:
		*n++
		return true, fb[14:], nil
	case v == 7 && routed != "":
		ifname = routed
	case v != tcUnspec:
		return false, nil, nil
	}
	ret, b, err = h.run(true, ifname, fb[14:])
	if err != nil || ret == VerdictShot {
		return false, nil, err
	}
	return true, b, nil
}

// TestDifferentialKitNIInline is TestDifferentialKitNI with NAT's
// established path inside the filter's programs (nat15): every packet must
// still agree with the engine, and some must have been translated by the
// filter's programs.
func TestDifferentialKitNIInline(t *testing.T) {
	h := newHarness(t)
	fd := inlineFilter(t, h, "")
	kit, cases := kitCases(t, "ni")
	var compared, unsupported, inline int
	for _, c := range cases {
		read := func(parts ...string) []byte {
			b, err := os.ReadFile(filepath.Join(append([]string{kit, "ni"}, parts...)...))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		natText, ipfText, input := read("regress", c.name+".nat"), read("regress", c.name+".ipf"), read("input", c.name)
		var n int
		err := h.do(func() error {
			var err error
			n, err = niRunWith(h, fd, string(ipfText), string(natText), c.inFmt, input, &inline)
			return err
		})
		switch {
		case errors.Is(err, ErrUnsupported):
			unsupported++
			continue
		case err != nil && niKnown[c.name] != "":
			t.Logf("%s: known difference (%s): %v", c.name, niKnown[c.name], err)
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
		compared += n
	}
	t.Logf("differential ni, inline: %d packets compared (%d translated by the filter's programs), %d cases refused as unsupported",
		compared, inline, unsupported)
	if compared == 0 {
		t.Error("no packets compared")
	}
	if inline == 0 {
		t.Error("no packet was translated by the filter's programs")
	}
}

// runFirst is h.run, or with h.inline the filter's programs with NAT's
// established path first (a pass-all filter): what they leave goes on to
// NAT's program.
func (h *harness) runFirst(out bool, ifname string, ip []byte) (int32, []byte, error) {
	if h.inline == nil {
		return h.run(out, ifname, ip)
	}
	idx, err := h.ifindex(ifname)
	if err != nil {
		return 0, nil, err
	}
	var ret int32
	var fb []byte
	if out {
		ret, fb, err = h.inline.RunAt(true, ethFrame(ip), idx)
	} else {
		ret, fb, err = h.inline.RunPrefix(ethFrame(ip), idx)
	}
	switch {
	case err != nil:
		return 0, nil, err
	case ret == tcOK:
		h.inlineN++
		return VerdictPass, fb[14:], nil
	case ret != tcUnspec:
		return 0, nil, fmt.Errorf("the pass-all filter's verdict %d", ret)
	case !bytes.Equal(fb[14:], ip):
		return 0, nil, fmt.Errorf("the filter changed a packet it left to NAT:\n in  %x\n out %x", ip, fb[14:])
	}
	return h.run(out, ifname, ip)
}

// TestDifferentialRandomInline is TestDifferentialRandom's fast run with
// a pass-all filter whose programs have NAT's established path inside
// them (nat15) ahead of NAT's: the same packets, drops, sessions and host
// maps as the engine, and some packets translated by the filter's
// programs.
func TestDifferentialRandomInline(t *testing.T) {
	seed := *randomSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	h := newHarness(t)
	fd := inlineFilter(t, h, "")
	h.inline = fd
	differentialRandom(t, h, seed)
	t.Logf("%d packets translated by the filter's programs", h.inlineN)
	if h.inlineN == 0 {
		t.Error("no packet was translated by the filter's programs")
	}
}
