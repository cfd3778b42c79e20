package ippool

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/rules/netfmt"
)

func TestPrint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; 2.2.2.0/24; };",
			"table role=ipf type=tree number=100\n\t{ 1.1.1.1/32; ! 2.2.0.0/16; 2.2.2.0/24; };\n"},
		{"table role = ipf type = hash number = 200 { 10.1.1.1; 10.2.0.0/16; };",
			"table role=ipf type=hash number=200 size=3\n\t{ 10.1.1.1/32; 10.2.0.0/16; };\n"},
		{"table role = nat type = tree name = fred { 10.1.2.3/16; ef00::5; };",
			"table role=nat type=tree name=fred\n\t{ 10.1.0.0/16; ef00::5/128; };\n"},
		{"group-map out role = ipf number = 2010 group = 2020 { 2.2.2.2/32; 5.0.0.0/8, group = 2040; };",
			"group-map out role=ipf number=2010 size=3\n\t{ 2.2.2.2/32, group=2020; 5.0.0.0/8, group=2040; };\n"},
		{"pool ipf/dstlist (name fred; policy round-robin;) { 3.3.3.3; bge0:5.5.5.5; };",
			"pool ipf/dstlist (name fred; policy round-robin;)\n\t{ 3.3.3.3; bge0:5.5.5.5; };\n"},
		{"pool nat/hash (name noproxy; size 17;) { 1.1.1.1; 2.2.2.2;};",
			"table role=nat type=hash name=noproxy size=3\n\t{ 1.1.1.1/32; 2.2.2.2/32; };\n"},
		{"group-map (name g; out;) { 1.2.3.4/32, group = 5; };",
			"group-map out role=ipf name=g size=1\n\t{ 1.2.3.4/32, group=5; };\n"},
		{"table role = ipf type = hash seed = 3 { 1.1.1.1; };", "table role=ipf type=hash name= size=1 seed=3\n\t{ 1.1.1.1/32; };\n"},
		{"group-map in role = ipf group = 10 { 10.0.0.0/8; };", "group-map in role=ipf name= size=1\n\t{ 10.0.0.0/8, group=10; };\n"},
		{"table role = ipf type = tree { 10.0.0.0/8; };", "table role=ipf type=tree number=\n\t{ 10.0.0.0/8; };\n"},
		{"table role = ipf type = hash number = 2 {; };", "table role=ipf type=hash number=2 size=1\n\t{; };\n"},
	}
	for _, tc := range tests {
		f, err := Parse("t", tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := f.String(); got != tc.want {
			t.Errorf("%q:\ngot  %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	data := "# comment\n1.1.1.1\n!2.2.0.0/16 3.3.3.0/24\n10.1\nfe80::1\n"
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	f, err := Parse("t", `table role = ipf type = tree number = 1 { "file://list"; 9.9.9.9; };`)
	if err != nil {
		t.Fatal(err)
	}
	want := "table role=ipf type=tree number=1\n\t{ 1.1.1.1/32; ! 2.2.0.0/16; 3.3.3.0/24; 10.1.0.0/16; fe80::1/128; 9.9.9.9/32; };\n"
	if got := f.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWhoisLine(t *testing.T) {
	tests := []struct {
		line string
		want string
	}{
		{"Microsoft Corp MICROSOFT (NET-131-107-0-0-1) 131.107.0.0 - 131.107.255.255", "131.107.0.0/16"},
		{"Microsoft Corp MICROSOFT13 (NET-204-79-195-0-1) 204.79.195.0 - 204.79.197.255", ""},
		{"Microsoft - Partner (PCB) X (NET-216-182-89-192-1) 216.182.89.192 - 216.182.89.207", ""},
		{"Microsoft Corp (AS8068) MICROSOFT-CORP---MSN-AS-BLOCK    8068 - 8075", ""},
	}
	for _, tc := range tests {
		e, ok := whoisLine(tc.line)
		got := ""
		if ok {
			got = FormatEntry(e)
		}
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"table role = bad type = tree {}", `f:1:14: expected role (ipf, nat, auth, count or all), found "bad"`},
		{"table role = ipf type = tree number = 1 { 1.2.3.4/40; };", `f:1:51: bad prefix length "40"`},
		{"table role = ipf type = tree number = 1\n { 1.2.3.4 2.2.2.2 };", `f:2:12: expected ";", found "2.2.2.2"`},
		{"pool ipf/dstlist (name x; policy fancy;) { 1.1.1.1; };", `f:1:34: expected dstlist policy, found "fancy"`},
		{"bogus", `f:1:1: expected table, group-map or pool, found "bogus"`},
		// IPFilter's grammar: an empty list is "{ ; }", every entry ends
		// with ";", and so does every definition.
		{"table role = ipf type = tree number = 1 { };", `f:1:43: expected address, found "}"`},
		{"table role = ipf type = hash number = 1 { ;; };", `f:1:44: expected "}", found ";"`},
		{"table role = ipf type = tree number = 1 { 1.1.1.1 };", `f:1:51: expected ";", found "}"`},
		{"table role = ipf type = tree number = 1 { 1.1.1.1;; };", `f:1:51: expected address, found ";"`},
		{"group-map in role = ipf number = 1 { 1.1.1.1, group = 2; }", `f:1:59: expected ";", found end of file`},
		// ippool_y.y: number or name, group, size, seed, each once and
		// in that order; no size or seed for a tree; a group for each
		// entry of a group-map without one (checked against ippool -nRv)
		{"group-map in role = ipf number = 1 { 1.1.1.1; };", `f:1:45: expected ", group = G" (the group-map names no group), found ";"`},
		{"table role = ipf type = hash number = 2 seed = 5 size = 5 { 1.1.1.1; };", `f:1:50: "size" out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)`},
		{"table role = ipf type = hash size = 5 number = 2 { 1.1.1.1; };", `f:1:39: "number" out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)`},
		{"table role = ipf type = tree name = foo number = 3 { 1.1.1.1; };", `f:1:41: "number" out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)`},
		{"table role = ipf type = tree number = 1 size = 3 { 1.1.1.1; };", `f:1:41: "size" out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)`},
		{"group-map in role = ipf number = 300 size = 5 group = 10 { 1.1.1.1; };", `f:1:47: "group" out of place: IPFilter takes a table's number or name, group, size and seed once each, in that order (a tree no size or seed)`},
		{"; table role = ipf type = tree number = 1 { 1.1.1.1; };", `f:1:1: expected table, group-map or pool, found ";"`},
	}
	for _, tc := range tests {
		_, err := Parse("f", tc.in)
		if err == nil {
			t.Errorf("%q: no error", tc.in)
			continue
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	// Recovery: the good table after a bad one is still parsed.
	f, err := Parse("f", "table role = x;\ntable role = ipf type = tree number = 1 { 1.1.1.1; };")
	if err == nil || len(f.Tables) != 1 {
		t.Errorf("got %v tables, err %v; want 1 table and an error", len(f.Tables), err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; ef00::5/128; };",
		"table role = nat type = hash number = 2000 size = 1001 seed = 101 { 0/0; 1/32; };",
		"group-map in role = ipf number = 500 { 0/0, group = 10; 5/32, group = 800; };",
		"pool ipf/dstlist (name jack; policy weighted connection;) { 4.4.4.4; bge0:5.5.5.5;};",
		"pool nat/tree (name raw;) { 1.1.1.1; 2.2.2.2;};",
	} {
		f.Add(s)
	}
	netfmt.LookupHost = func(string) ([]netip.Addr, error) { return nil, errors.New("no resolver in fuzzing") }
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Contains(src, "file:") || strings.Contains(strings.ToLower(src), "whois") {
			return
		}
		file, err := Parse("f", src)
		if err != nil {
			return
		}
		out := file.String()
		file2, err := Parse("f", out)
		if err != nil {
			t.Fatalf("printed form does not parse: %v\n%s", err, out)
		}
		if out2 := file2.String(); out2 != out {
			t.Fatalf("not a fixed point:\n%s\n%s", out, out2)
		}
	})
}
