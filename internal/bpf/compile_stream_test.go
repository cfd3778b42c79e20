package bpf

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// streamOpts resolves interfaces without the host: eth0 is 1, the rest
// are missing; no interface has an address.
var streamOpts = CompileOptions{
	Ifindex: func(s string) (int, bool) { return 1, s == "eth0" },
	IfNet:   func(string, bool) (ruleset.IfaceNet, bool) { return ruleset.IfaceNet{}, false },
}

// eligible keeps the rules compileStream takes: none in or heading a
// group, none with a call, a collection or @N.
func eligible(rules []*ipf.Rule) []*ipf.Rule {
	var out []*ipf.Rule
	for _, r := range rules {
		if r.Group == "" && r.Head == "" && !r.HasInsertAt && r.Collection == 0 && r.Action != ipf.ActionCall && r.Call.Func == "" {
			out = append(out, r)
		}
	}
	return out
}

// TestCompileStream: on random sets (runs, every kind of test, pools,
// exp, interfaces, route targets), compiled a few rules at a time, the
// streamed image is CompileSet's for ruleset.Compile's set, field by
// field; a set CompileSet refuses is refused (ok false) too.
func TestCompileStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261202, 7))
	same, refused := 0, 0
	for n := 0; n < 400; n++ {
		var text strings.Builder
		for k := 0; k < 1+rng.IntN(4); k++ {
			if rng.IntN(2) == 0 {
				text.WriteString(randomRunRules(rng))
			} else {
				text.WriteString(randomRules(rng))
			}
		}
		parsed, err := ipf.Parse("r", []byte(text.String()), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("set %d: %v", n, err)
		}
		rules, anon, err := ruleset.InlineTables(eligible(parsed))
		if err != nil || len(rules) == 0 {
			continue
		}
		opts := streamOpts.withAnon(anon)
		var want *Image
		set, err := ruleset.CompileLean(rules)
		if err == nil {
			want, err = CompileSet(set, opts)
		}
		window := 1 + rng.IntN(9)
		got, ok := compileStream(rules, opts, window)
		if err != nil {
			if ok {
				t.Fatalf("set %d: streamed a set CompileSet refuses (%v):\n%s", n, err, text.String())
			}
			refused++
			continue
		}
		if !ok {
			t.Fatalf("set %d: not streamed:\n%s", n, text.String())
		}
		if f := imageDiff(got, want); f != "" {
			t.Fatalf("set %d (window %d): streamed image differs in %s\n%s", n, window, f, text.String())
		}
		same++
	}
	if same < 200 {
		t.Errorf("only %d sets compared (%d refused)", same, refused)
	}
}

// TestCompileStreamShapes: a set with a group, a head, a call, a
// collection or @N is left to the general way.
func TestCompileStreamShapes(t *testing.T) {
	for _, text := range []string{
		"pass in all group 10\n",
		"pass in all head 10\n",
		"call now srcgrpmap/1 in all\n",
		"2 pass in all\n",
		"@1 pass in all\n",
	} {
		rules, err := ipf.Parse("r", []byte("block in all\n"+text), ipf.ParseOptions{})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if _, ok := compileStream(rules, streamOpts, 4); ok {
			t.Errorf("%q: streamed", text)
		}
	}
}

// TestCompileBigBlocklist: a blocklist of streamMin rules and more
// compiles through the stream to CompileSet's image; with a rule the
// kernel refuses in its middle, Compile reports the general way's error
// (the first failing rule's, at its line).
func TestCompileBigBlocklist(t *testing.T) {
	text := blocklist(streamMin + 1000)
	rules, err := ipf.Parse("big.conf", []byte(text), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Compile(rules, streamOpts)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ruleset.CompileLean(rules)
	if err != nil {
		t.Fatal(err)
	}
	want, err := CompileSet(set, streamOpts)
	if err != nil {
		t.Fatal(err)
	}
	if f := imageDiff(got, want); f != "" {
		t.Fatalf("the streamed image of a blocklist differs from CompileSet's in %s", f)
	}
	if len(got.runs) != len(rules)-6 {
		t.Errorf("%d rules in runs, want %d", len(got.runs), len(rules)-6)
	}
	lines := strings.SplitAfter(text, "\n")
	bad := "pass out on eth0 from any to any set-tag(nat=x)\n"
	for _, at := range []int{60001, 60001 + streamWindow} {
		for _, second := range []string{"", "block in all with oow keep state\n"} {
			mixed := strings.Join(lines[:at], "") + bad + strings.Join(lines[at:at+10], "") + second + strings.Join(lines[at+10:], "")
			rules, err := ipf.Parse("big.conf", []byte(mixed), ipf.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(rules, streamOpts)
			var want error
			if set, err := ruleset.CompileLean(rules); err != nil {
				want = err
			} else {
				_, want = CompileSet(set, streamOpts)
			}
			if err == nil || want == nil || err.Error() != want.Error() {
				t.Errorf("bad rule at line %d: got %v, want %v", at+1, err, want)
			}
			if second == "" && !strings.Contains(fmt.Sprint(err), fmt.Sprintf("big.conf:%d:", at+1)) {
				t.Errorf("bad rule at line %d: %v", at+1, err)
			}
		}
	}
}

// imageDiff names the first field in which two images differ, with both
// values ("" when they are alike).
func imageDiff(a, b *Image) string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		if reflect.DeepEqual(reflect.NewAt(fa.Type(), fa.Addr().UnsafePointer()).Elem().Interface(),
			reflect.NewAt(fb.Type(), fb.Addr().UnsafePointer()).Elem().Interface()) {
			continue
		}
		name := va.Type().Field(i).Name
		if fa.Kind() == reflect.Slice && fa.Len() == fb.Len() {
			for k := 0; k < fa.Len(); k++ {
				x := reflect.NewAt(fa.Index(k).Type(), fa.Index(k).Addr().UnsafePointer()).Elem().Interface()
				y := reflect.NewAt(fb.Index(k).Type(), fb.Index(k).Addr().UnsafePointer()).Elem().Interface()
				if !reflect.DeepEqual(x, y) {
					return fmt.Sprintf("%s[%d]: got %+v, want %+v", name, k, x, y)
				}
			}
		}
		return fmt.Sprintf("%s: got %+v, want %+v", name, reflect.NewAt(fa.Type(), fa.Addr().UnsafePointer()).Elem().Interface(),
			reflect.NewAt(fb.Type(), fb.Addr().UnsafePointer()).Elem().Interface())
	}
	return ""
}

// BenchmarkCompileBlocklist compiles a blocklist of streamMin rules the
// general way (ruleset.CompileLean, then CompileSet) and streamed
// (Compile): B/op is the memory the stream saves, ns/op its time.
func BenchmarkCompileBlocklist(b *testing.B) {
	rules, err := ipf.Parse("big.conf", []byte(blocklist(streamMin)), ipf.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set, err := ruleset.CompileLean(rules)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := CompileSet(set, streamOpts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Compile(rules, streamOpts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestGCAtLeast: the compile collects no more often than GOGC 400 while
// it runs, keeps a setting that collects less (or not at all: ipf for a
// big file) and restores the caller's.
func TestGCAtLeast(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	for _, c := range []struct{ before, during int }{{100, 400}, {800, 800}, {-1, -1}, {400, 400}} {
		debug.SetGCPercent(c.before)
		restore := gcAtLeast(400)
		if got := debug.SetGCPercent(c.during); got != c.during {
			t.Errorf("GOGC %d: %d while compiling, want %d", c.before, got, c.during)
		}
		restore()
		if got := debug.SetGCPercent(c.before); got != c.before {
			t.Errorf("GOGC %d: %d after, want it back", c.before, got)
		}
	}
}
