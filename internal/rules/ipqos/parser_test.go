package ipqos

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata file name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(name, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, d)
	}
}

func TestGoldenParsePrint(t *testing.T) {
	files, _ := filepath.Glob("testdata/ok/*.conf")
	if len(files) == 0 {
		t.Fatal("no testdata/ok files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(file, src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			out := Format(c)
			golden(t, strings.TrimSuffix(file, ".conf")+".golden", out)
			c2, err := Parse("printed", []byte(out))
			if err != nil {
				t.Fatalf("printed form does not parse: %v\n%s", err, out)
			}
			if d := cmp.Diff(c, c2, ignorePos); d != "" {
				t.Errorf("reparse differs (-first +second):\n%s", d)
			}
		})
	}
}

var ignorePos = cmp.Options{
	cmpopts.IgnoreTypes(Pos{}),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestGoldenErrors(t *testing.T) {
	files, _ := filepath.Glob("testdata/err/*.conf")
	if len(files) == 0 {
		t.Fatal("no testdata/err files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(file, src)
			if err == nil {
				t.Fatalf("Parse succeeded, want errors; config:\n%s", Format(c))
			}
			if c != nil {
				t.Error("Parse returned a config together with an error")
			}
			golden(t, strings.TrimSuffix(file, ".conf")+".golden", err.Error()+"\n")
		})
	}
}

func TestSemantics(t *testing.T) {
	src := `filter f {
    addr 10.1.0.0/16
    http
}
filter g {
    srcaddrlo 10.0.0.5
}
policy p {
    uses f
    uses g
    max 2K
    res 10%
    dscp 46
}
adapter eth0 {
    uses p
}
`
	c, err := Parse("t", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Filter("f")
	if got, want := f.Protocol, 6; got != want {
		t.Errorf("protocol: got %d, want %d", got, want)
	}
	if got, want := f.Port[Either], (Range{true, 80, 80}); got != want {
		t.Errorf("either port: got %+v, want %+v", got, want)
	}
	a := f.Addr[Either]
	for ip, want := range map[string]bool{"10.1.0.0": true, "10.1.255.255": true, "10.2.0.0": false, "10.0.255.255": false, "::1": false} {
		if got := a.Contains(netip.MustParseAddr(ip)); got != want {
			t.Errorf("addr contains %s: got %v, want %v", ip, got, want)
		}
	}
	g := c.Filter("g")
	if got, want := g.Addr[Src].Hi, netip.MustParseAddr("255.255.255.255"); got != want {
		t.Errorf("one-sided range hi: got %v, want %v", got, want)
	}
	p := c.Policy("p")
	if got, want := p.Max, (Rate{Set: true, Value: 2000}); got != want {
		t.Errorf("max 2K: got %+v, want %+v", got, want)
	}
	if got, want := p.Res.BitsPerSecond(1e9), uint64(1e8); got != want {
		t.Errorf("res 10%% of 1G: got %d, want %d", got, want)
	}
	if got, want := f.Family(), 4; got != want {
		t.Errorf("family: got %d, want %d", got, want)
	}
}

func TestErrorPositions(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"filter f {\n  srcport x\n}\nadapter a {\n}\n", `x:2:11: expected port number (0-65535), found "x"`},
		{"filter f\n", `x:1:9: expected "{", found end of line`},
		{"filter f {\n  srcport\n}\n", `x:2:10: expected port number after srcport, found end of line`},
		{"policy p {\n uses f\n}\n", `x:2:7: unknown filter f (filters must be defined before use)`},
		{"", `x:1:1: expected at least one adapter block, found end of file`},
		{"} adapter", `x:1:1: expected filter, policy or adapter, found "}"`},
	} {
		_, err := Parse("x", []byte(tc.src))
		if err == nil {
			t.Errorf("%q: no error", tc.src)
			continue
		}
		if !strings.Contains(err.Error()+"\n", tc.want+"\n") {
			t.Errorf("%q: got %q, want a line %q", tc.src, err, tc.want)
		}
	}
}

func TestMaxErrors(t *testing.T) {
	src := strings.Repeat("filter f {\n bogus\n}\n", 30)
	_, err := Parse("x", []byte(src))
	var l ErrorList
	if !asList(err, &l) {
		t.Fatalf("got %T, want ErrorList", err)
	}
	if len(l) != MaxErrors {
		t.Errorf("got %d errors, want %d", len(l), MaxErrors)
	}
}

func asList(err error, l *ErrorList) bool {
	v, ok := err.(ErrorList)
	*l = v
	return ok
}

func FuzzParsePrint(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.conf")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse("fuzz", src)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with error")
			}
			return
		}
		out := Format(c)
		c2, err := Parse("printed", []byte(out))
		if err != nil {
			t.Fatalf("printed form does not parse: %v\n%s", err, out)
		}
		if out2 := Format(c2); out2 != out {
			t.Fatalf("print is not a fixed point:\n%s\n----\n%s", out, out2)
		}
	})
}
