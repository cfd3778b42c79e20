//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sluice/internal/bpf"
	"sluice/internal/engine"
	gonat "sluice/internal/nat"
	"sluice/internal/nat/enginehook"
	"sluice/internal/packet/ipftext"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ipnat"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

var filterShared struct {
	once sync.Once
	d    *bpf.Datapath
	err  error
}

// filterDatapath returns the kernel filter, loaded once, unpinned.
func filterDatapath(t *testing.T) *bpf.Datapath {
	t.Helper()
	filterShared.once.Do(func() { filterShared.d, filterShared.err = bpf.Load(bpf.Options{NoPin: true}) })
	if filterShared.err != nil {
		t.Fatalf("loading the filter: %+v", filterShared.err)
	}
	return filterShared.d
}

// niKnown lists the ni cases whose result depends on something the kernel
// datapaths do differently by design, with the reason. Every other case
// must agree packet for packet.
var niKnown = map[string]string{}

// routeRec is the engine's Router in the ni runs: it records where a
// `to` rule sent the packet, for the kernel run to follow the filter's
// redirect there.
type routeRec struct{ iface string }

func (r *routeRec) Route(p *engine.Packet, iface string, nextHop netip.Addr, dup bool) {
	if !dup {
		r.iface = iface
	}
}

// TestDifferentialKitNI runs the kit's ni family (filter and NAT
// together, as ni_test does) through the Go engine and through the kernel
// filter and NAT programs in IPFilter's order (NAT, then the filter,
// inbound; the filter, then NAT, outbound), and requires the same verdict
// for every packet and the same bytes for every packet that passes.
// Cases with what the kernel refuses (proxies other than ftp) are counted
// and skipped.
func TestDifferentialKitNI(t *testing.T) {
	h := newHarness(t)
	fd := filterDatapath(t)
	kit, cases := kitCases(t, "ni")
	var compared, unsupported int
	for _, c := range cases {
		natText, err := os.ReadFile(filepath.Join(kit, "ni", "regress", c.name+".nat"))
		if err != nil {
			t.Fatal(err)
		}
		ipfText, err := os.ReadFile(filepath.Join(kit, "ni", "regress", c.name+".ipf"))
		if err != nil {
			t.Fatal(err)
		}
		input, err := os.ReadFile(filepath.Join(kit, "ni", "input", c.name))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = h.do(func() error {
			var err error
			n, err = niRun(h, fd, string(ipfText), string(natText), c.inFmt, input)
			return err
		})
		switch {
		case errors.Is(err, ErrUnsupported):
			unsupported++
			t.Logf("%s: %v", c.name, err)
			continue
		case err != nil && niKnown[c.name] != "":
			t.Logf("%s: known difference (%s): %v", c.name, niKnown[c.name], err)
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
		compared += n
	}
	t.Logf("differential ni: %d packets compared, %d cases refused as unsupported", compared, unsupported)
	if compared == 0 {
		t.Error("no packets compared")
	}
	if n := h.slotHits(); n == 0 {
		t.Error("no packet was translated through a fast4dm slot")
	} else {
		t.Logf("%d packets translated through fast4dm slots", n)
	}
}

func niRun(h *harness, fd *bpf.Datapath, ipfText, natText, format string, input []byte) (int, error) {
	return niRunWith(h, fd, ipfText, natText, format, input, nil)
}

// niRunWith is niRun; with inline non-nil fd has NAT's established path
// inside its programs (nat15), the packets go through them as attached
// (niKernelInline), and *inline counts the packets they translated.
func niRunWith(h *harness, fd *bpf.Datapath, ipfText, natText, format string, input []byte, inline *int) (int, error) {
	if err := h.reset(); err != nil {
		return 0, err
	}
	if _, err := fd.FlushStates(nil); err != nil {
		return 0, err
	}
	f, err := h.load(natText)
	if err != nil {
		return 0, err
	}
	rules, err := ipf.Parse("ni.ipf", []byte(ipfText), ipf.ParseOptions{})
	if err != nil {
		return 0, err
	}
	set, err := ruleset.Compile(rules)
	if err != nil {
		return 0, err
	}
	tun := engine.NewTunables()
	if err := tun.Set("update_ipid", 0); err != nil {
		return 0, err
	}
	rt := &routeRec{}
	eng := engine.New(engine.Config{Tunables: tun, Clock: &state.ManualClock{}, Router: rt})
	defer eng.Close()
	eng.Sets().Store(0, set)
	ifAddrs := map[string]netip.Addr{}
	n, err := gonat.New(&ipnat.File{Rules: f.Rules}, gonat.Config{AddState: enginehook.StateAdder(eng),
		IfAddr: func(name string, v6 bool) (netip.Addr, bool) {
			a, ok := ifAddrs[name]
			return a, ok && a.Is6() == v6
		}})
	if err != nil {
		return 0, err
	}
	eng.SetNAT(enginehook.Hook{NAT: n})
	rd, err := ipftext.NewReader(format, bytes.NewReader(input))
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 65536)
	var msgs []string
	count := 0
	for {
		rec, err := rd.Next(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || rec.Packet == nil {
			continue
		}
		ifname := rec.Iface
		if ifname == "" {
			ifname = "anon0"
		}
		idx, err := h.ifindex(ifname)
		if err != nil {
			return count, err
		}
		if rec.IfaceAddr.IsValid() {
			if _, ok := ifAddrs[ifname]; !ok {
				ifAddrs[ifname] = rec.IfaceAddr
				var v4, v6 netip.Addr
				if rec.IfaceAddr.Is4() {
					v4 = rec.IfaceAddr
				} else {
					v6 = rec.IfaceAddr
				}
				if err := h.d.SetIfAddr(idx, v4, v6); err != nil {
					return count, err
				}
			}
		}
		// the filter program sees every packet on the loopback device:
		// its rules name the packet's interface as that one, and the
		// others as the harness's links (`to nic1` redirects there)
		im, err := bpf.CompileSet(set, bpf.CompileOptions{Ifindex: func(s string) (int, bool) {
			if s == ifname && inline == nil {
				return 1, true
			}
			i, err := h.ifindex(s)
			return i, err == nil
		}})
		if err != nil {
			return count, err
		}
		if err := fd.LoadRules(im, bpf.Active); err != nil {
			return count, err
		}
		in := append([]byte(nil), rec.Packet...)
		var p engine.Packet
		p.Load(append(make([]byte, 0, len(in)+128), in...), ifname, rec.Out, rec.LinkFlags)
		rt.iface = ""
		want := eng.Check(&p)
		wantPass := want.Verdict.Passed()
		var gotPass bool
		var got []byte
		if inline != nil {
			gotPass, got, err = niKernelInline(h, fd, rec.Out, ifname, rt.iface, in, inline)
		} else {
			gotPass, got, err = niKernel(h, fd, rec.Out, ifname, rt.iface, in)
		}
		if err != nil {
			return count, err
		}
		count++
		dir := map[bool]string{false: "in", true: "out"}[rec.Out]
		switch {
		case wantPass != gotPass:
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s): engine %s, kernel passed=%v", rec.Line, dir, ifname, want.Verdict, gotPass))
		case wantPass && !bytes.Equal(p.Data, got):
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s): packets differ\n  in:     %x\n  engine: %x\n  kernel: %x", rec.Line, dir, ifname, in, p.Data, got))
		}
	}
	if len(msgs) > 0 {
		return count, errors.New(strings.Join(msgs, "\n"))
	}
	return count, nil
}

// niKernel runs a packet through the kernel programs in IPFilter's order.
// routed is where the engine's `to` rule sent the packet ("" none): an
// outbound packet the filter redirects (bpf_redirect_neigh) leaves by
// that interface's egress hook, where the filter lets it through (its
// mark) and NAT, last there too, translates it as that interface's.
func niKernel(h *harness, fd *bpf.Datapath, out bool, ifname, routed string, ip []byte) (bool, []byte, error) {
	if !out {
		ret, b, err := h.run(false, ifname, ip)
		if err != nil || ret == VerdictShot {
			return false, nil, err
		}
		if ret == VerdictPass {
			return true, b, nil // a proxy's data connection: no filter
		}
		v, fb, err := fd.Run(false, ethFrame(b))
		if err != nil || v != bpf.VerdictPass {
			if v == bpf.VerdictReply && routed != "" {
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
	v, fb, err := fd.Run(true, ethFrame(ip))
	if err != nil {
		return false, nil, err
	}
	switch {
	case v == bpf.VerdictReply && routed != "":
		ifname = routed
	case v != bpf.VerdictPass:
		return false, nil, nil
	}
	ret, b, err = h.run(true, ifname, fb[14:])
	if err != nil || ret == VerdictShot {
		return false, nil, err
	}
	return true, b, nil
}
