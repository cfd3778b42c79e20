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
	"testing"

	"sluice/internal/conformance"
	gonat "sluice/internal/nat"
	"sluice/internal/packet/ipftext"
	"sluice/internal/testutil"
)

// kitCase is a row of the kit's manifest.
type kitCase struct{ name, family, driver, inFmt string }

func kitCases(t *testing.T, families ...string) (string, []kitCase) {
	kit, err := conformance.KitDir()
	if err != nil {
		testutil.SkipOrFail(t, "ipf-conformance kit: %v", err)
	}
	man, err := os.ReadFile(filepath.Join(kit, "manifest.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var out []kitCase
	for _, row := range strings.Split(string(man), "\n")[1:] {
		f := strings.Split(row, "\t")
		if len(f) < 7 {
			continue
		}
		for _, fam := range families {
			if f[1] == fam {
				out = append(out, kitCase{f[0], f[1], f[2], f[4]})
			}
		}
	}
	return kit, out
}

// TestDifferentialKitN runs the kit's n family (NAT alone, one rule per
// run, as n_test does) through the Go engine and through the kernel
// programs, and requires the same packets out, the same drops, and the
// same session and host map listings afterwards.
func TestDifferentialKitN(t *testing.T) {
	h := newHarness(t)
	kit, cases := kitCases(t, "n")
	var compared, unsupported int
	for _, c := range cases {
		rules, err := os.ReadFile(filepath.Join(kit, "n", "regress", c.name))
		if err != nil {
			t.Fatal(err)
		}
		input, err := os.ReadFile(filepath.Join(kit, "n", "input", c.name))
		if err != nil {
			t.Fatal(err)
		}
		for ln, line := range strings.Split(strings.TrimRight(string(rules), "\n"), "\n") {
			id := fmt.Sprintf("%s:%d", c.name, ln+1)
			var n int
			err := h.do(func() error {
				var err error
				n, err = diffRun(h, line, c.inFmt, input)
				return err
			})
			if errors.Is(err, ErrUnsupported) {
				unsupported++
				t.Logf("%s: %v", id, err)
				continue
			}
			if err != nil {
				t.Errorf("%s %q: %v", id, line, err)
			}
			compared += n
		}
	}
	t.Logf("differential n: %d packets compared (%d translated), %d session and %d host map lines, %d rule lines refused as unsupported",
		compared, translatedCount, sessionLines, hostmapLines, unsupported)
	if compared == 0 || translatedCount == 0 || sessionLines == 0 || hostmapLines == 0 {
		t.Error("the run compared nothing of some kind")
	}
	if n := h.slotHits(); n == 0 {
		t.Error("no packet was translated through a fast4dm slot")
	} else {
		t.Logf("%d packets translated through fast4dm slots", n)
	}
}

// Tallies of what the differential runs compared, so a run that checks
// nothing cannot pass unnoticed.
var translatedCount, sessionLines, hostmapLines int

// diffRun loads one rule set into both datapaths and runs the packets of
// input through both, returning how many it compared.
func diffRun(h *harness, ruleText, format string, input []byte) (int, error) {
	if err := h.reset(); err != nil {
		return 0, err
	}
	f, err := h.load(ruleText + "\n")
	if err != nil {
		return 0, err
	}
	ifAddrs := map[string]netip.Addr{}
	eng, err := gonat.New(f, gonat.Config{IfAddr: func(name string, v6 bool) (netip.Addr, bool) {
		a, ok := ifAddrs[name]
		return a, ok && a.Is6() == v6
	}})
	if err != nil {
		return 0, err
	}
	rd, err := ipftext.NewReader(format, bytes.NewReader(input))
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 65536)
	n := 0
	var msgs []string
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
			return n, err
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
					return n, err
				}
			}
		}
		in := append([]byte(nil), rec.Packet...)
		want := append(make([]byte, 0, len(in)+128), in...)
		var res gonat.Result
		if rec.Out {
			want, res = eng.OutPacket(want, ifname, "")
		} else {
			want, res = eng.InPacket(want, ifname)
		}
		ret, got, err := h.run(rec.Out, ifname, in)
		if err != nil {
			return n, err
		}
		n++
		if !bytes.Equal(in, want) {
			translatedCount++
		}
		dir := "in"
		if rec.Out {
			dir = "out"
		}
		switch {
		case res == gonat.Failed && ret != VerdictShot:
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s): engine drops, kernel %d", rec.Line, dir, ifname, ret))
		case res != gonat.Failed && ret == VerdictShot:
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s): kernel drops, engine %v", rec.Line, dir, ifname, res))
		case res != gonat.Failed && !bytes.Equal(want, got):
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s): packets differ\n  in:     %x\n  engine: %x\n  kernel: %x", rec.Line, dir, ifname, in, want, got))
		}
	}
	ss, err := h.d.Sessions()
	if err != nil {
		return n, err
	}
	hs, err := h.d.Hostmaps()
	if err != nil {
		return n, err
	}
	wantS, wantH := engineSections(eng)
	sessionLines += strings.Count(wantS, "\n")
	hostmapLines += strings.Count(wantH, "\n")
	if got := sessionList(ss); got != wantS {
		msgs = append(msgs, fmt.Sprintf("sessions differ:\nengine:\n%skernel:\n%s", wantS, got))
	}
	if got := hostmapList(hs); got != wantH {
		msgs = append(msgs, fmt.Sprintf("host maps differ:\nengine:\n%skernel:\n%s", wantH, got))
	}
	if len(msgs) > 0 {
		return n, errors.New(strings.Join(msgs, "\n"))
	}
	return n, nil
}
