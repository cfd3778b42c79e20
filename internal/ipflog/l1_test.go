package ipflog_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/conformance"
	"sluice/internal/ipflog"
	"sluice/internal/packet"
	"sluice/internal/packet/ipftext"
	"sluice/internal/testutil"
)

// TestL1Sections drives the log with the packets of the kit's l1 input
// and two of its rules whose decisions need no filter engine ("log in
// all", and "pass in log body quick from 2.2.2.2 to any"), writes the log
// through the binary encoding, and requires ipmon's text and -b output to
// equal the matching sections of expected/l1 and expected/l1.b.
func TestL1Sections(t *testing.T) {
	kit, err := conformance.KitDir()
	if err != nil {
		testutil.SkipOrFail(t, "%v", err)
	}
	want := readSections(t, filepath.Join(kit, "l/expected/l1"))
	wantB := readSections(t, filepath.Join(kit, "l/expected/l1.b"))

	type rule struct {
		name  string
		match func(out bool, in *packet.Info) bool
		flags uint32
		unset bool
		sect  int
	}
	const inque = 0x8000
	rules := []rule{
		{"log in all", func(out bool, in *packet.Info) bool { return !out },
			ipflog.FRLog | inque, true, 0},
		{"pass in log body quick from 2.2.2.2 to any", func(out bool, in *packet.Info) bool {
			return !out && in.Src.String() == "2.2.2.2"
		}, ipflog.FRPass | ipflog.FRLog | ipflog.FRLogBody | ipflog.FRQuick | inque, false, 3},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(kit, "l/input/l1"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lg := ipflog.NewDefault()
			rd := ipftext.NewHexReader(f)
			buf := make([]byte, 2048)
			var in packet.Info
			for {
				rec, err := rd.Next(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := in.Parse(rec.Packet, packet.ParseOptions{VerifyChecksums: true}); err != nil {
					t.Fatal(err)
				}
				if !r.match(rec.Out, &in) {
					continue
				}
				iface := rec.Iface
				if iface == "" {
					iface = "anon0"
				}
				rule := int32(0)
				if r.unset {
					rule = -1
				}
				lg.Append(&ipflog.Entry{Time: time.Unix(0, 0), Iface: iface, GroupUnset: r.unset,
					Rule: rule, Flags: r.flags, Out: rec.Out, Level: ipflog.NoLevel, Info: &in, Packet: rec.Packet})
			}
			var file bytes.Buffer
			if _, err := lg.WriteTo(&file); err != nil {
				t.Fatal(err)
			}
			for _, body := range []bool{false, true} {
				p := &ipflog.Printer{Opts: ipflog.FormatOptions{LogBody: body, Location: time.UTC}}
				rd := ipflog.NewReader(bytes.NewReader(file.Bytes()))
				var got []byte
				for {
					rec, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = p.Append(got, &rec)
				}
				w := strings.SplitN(want[r.sect], "\n", 2)[1]
				if body {
					w = wantB[r.sect]
				}
				if string(got) != w {
					t.Errorf("body=%v:\ngot:\n%s\nwant:\n%s", body, got, w)
				}
			}
		})
	}
}

func readSections(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Split(string(b), "--------\n")
	return s
}
