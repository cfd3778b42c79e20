package ipnat

import (
	"errors"
	"net/netip"
	"strings"

	"sluice/internal/rules/netfmt"
	"testing"
)

func TestPrint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"map le0 0/0 -> 0/32", "map le0 0/0 -> 0/32"},
		{"map le0 10.0.0.5/0xff -> 1.2.3.4/24", "map le0 0.0.0.5/0.0.0.255 -> 1.2.3.0/24"},
		{"map le0 10.0.0.0/8 -> 1.2.3.4 tcp", "map le0 10.0.0.0/8 -> 1.2.3.4/32 tcp"},
		{"map le0 from 10.0.0.0/8 to any port = 80 -> 1.2.3.4", "map le0 from 10.0.0.0/8 to 0/0 port = 80 -> 1.2.3.4/32 tcp/udp"},
		{"map le0 10.0.0.0/8 -> 1.2.3.4/32 proxy port ftp ftp/tcp", "map le0 10.0.0.0/8 -> 1.2.3.4/32 proxy port 21 ftp/tcp"},
		{"map-block le0 172.16.0.0/16 -> 209.1.2.0/24 ports auto", "map-block le0 172.16.0.0/16 -> 209.1.2.0/24 ports auto"},
		{"rdr le0 1.2.3.4 port 80 -> 10.0.0.5 port 8080 tcp", "rdr le0 1.2.3.4/32 port 80 -> 10.0.0.5/32 port 8080 tcp"},
		{"rdr le0 0/0 port 80-88 -> 127.0.0.1 port = 3128 tcp round-robin", "rdr le0 0/0 port 80-88 -> 127.0.0.1/32 port = 3128 tcp round-robin"},
		{"rdr le0 1.2.3.4 port 80 -> 10.0.0.5 port 8080 tcp sticky", "rdr le0 1.2.3.4/32 port 80 -> 10.0.0.5/32 port 8080 tcp"},
		{"rdr le0 1.2.3.4 port 80 -> 10.0.0.5 port 8080-8090", "rdr le0 1.2.3.4/32 port 80 -> 10.0.0.5/32 port 8080-8090 tcp"},
		{"map le0 inet6 0/0 -> 0/128", "map le0 inet6 any -> ::/128"},
		{"map le0 inet6 1/128 -> 1/128", "map le0 inet6 any -> any"},
		{"map le0 ::ffff:1.2.3.4/128 -> ::1.2.3.4", "map le0 inet6 ::ffff:1.2.3.4/128 -> ::1.2.3.4/128"},
		{"rewrite out on bge0 proto tcp from 1.1.1.1 to any port = 80 -> src 3.3.3.0/24,1000-2000 dst 4.4.4.4 port = 80;",
			"rewrite out on bge0 proto tcp from 1.1.1.1/32 to 0/0 port = 80 -> src 3.3.3.0/24,1000-2000 dst 4.4.4.4/32,port = 80;"},
		{"divert in on bge0 proto udp from 1.1.1.1 to 2.2.2.2 -> src 3.3.3.3,1000 dst 4.4.4.4,2000 udp;",
			"divert in on bge0 proto udp from 1.1.1.1/32 to 2.2.2.2/32 -> src 3.3.3.3/32,1000 dst 4.4.4.4/32,2000 udp;"},
		{"no map le0 10.0.0.0/8;", "no map le0 10.0.0.0/8 ip;"},
		// mapoptions (ipnat_y.y): rr frag age mssclamp nattag setproto purge.
		{"map le0 10.0.0.0/8 -> 1.1.1.0/24 round-robin", "map le0 10.0.0.0/8 -> 1.1.1.0/24"}, // printnat shows round-robin on rdr only
		{"map le0 10.0.0.0/8 -> 1.1.1.0/24 portmap tcp 1000:2000 round-robin frag age 10 tag t1",
			"map le0 10.0.0.0/8 -> 1.1.1.0/24 portmap tcp 1000:2000 frag age 10/10 tag t1"},
		// IPv4 forms of the in3_6/in6_6/in101_6 cases.
		{"bimap le0 1/32 -> 1/32", "bimap le0 0.0.0.1/32 -> 0.0.0.1/32"},
		{"bimap le0 10.0.0.5/8 -> 1.2.3.4/24", "bimap le0 10.0.0.0/8 -> 1.2.3.0/24"},
		{"map foo0 from any port eq 1 to any port ne 0 -> 0/32 udp", "map foo0 from 0/0 port = 1 to 0/0 port != 0 -> 0/32 udp"},
		{"map foo0 from any port 1 >< 20 to any port 20 <> 40 -> 0/32 tcp/udp", "map foo0 from 0/0 port 1 >< 20 to 0/0 port 20 <> 40 -> 0/32 tcp/udp"},
		{"rewrite in on bge0 proto tcp/udp from 1.1.1.1/32 to 2.2.2.2/32 -> src 3.3.3.0/24,20202 dst 4.4.4.0/24,10101;",
			"rewrite in on bge0 proto tcp/udp from 1.1.1.1/32 to 2.2.2.2/32 -> src 3.3.3.0/24,20202 dst 4.4.4.0/24,10101;"},
		{"map le0 from 10.0.0.0/8 to pool/100 -> 1.2.3.4", "map le0 from 10.0.0.0/8 to pool/100 -> 1.2.3.4/32"},
		{"map a0 10.0.0.0/8 -> 1.1.1.1-1.1.1.9", "map a0 10.0.0.0/8 -> range 1.1.1.1-1.1.1.9"},
		// Address ranges on the right of rewrite, map and rdr, in every
		// spelling IPFilter's lexer joins (checked against ipnat -Rnvf).
		{"rewrite in on nic0 proto tcp from any to any -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4;",
			"rewrite in on nic0 proto tcp from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;"},
		{"rewrite out on nic0 from 1.1.1.0/24 to any -> src range 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;",
			"rewrite out on nic0 from 1.1.1.0/24 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 from any to any -> src 3.3.3.1 - 3.3.3.9 dst 4.4.4.4;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 from any to any -> src 3.3.3.1 -3.3.3.9 dst 4.4.4.4;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 from any to any -> src 3.3.3.1- 3.3.3.9 dst 4.4.4.4;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 from any to any -> src range 3.3.3.1 - 3.3.3.9 dst range 4.4.4.4-4.4.4.5;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.9 dst 4.4.4.4-4.4.4.5;"},
		{"rewrite in on nic0 proto tcp from any to any -> src 3.3.3.1 dst 4.4.4.4-4.4.4.8,5000;",
			"rewrite in on nic0 proto tcp from 0/0 to 0/0 -> src 3.3.3.1/32 dst 4.4.4.4-4.4.4.8,5000;"},
		{"rewrite in on nic0 proto tcp from any to any -> src 3.3.3.1-3.3.3.5 port = 100 dst 4.4.4.4;",
			"rewrite in on nic0 proto tcp from 0/0 to 0/0 -> src 3.3.3.1-3.3.3.5,port = 100 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 from any to any -> src 3.3.3.9-3.3.3.1 dst 4.4.4.4;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src 3.3.3.9-3.3.3.1 dst 4.4.4.4/32;"},
		{"rewrite in on nic0 inet6 from any to any -> src 1::1-1::9 dst 4::4;",
			"rewrite in on nic0 inet6 from any to any -> src 1::1-1::9 dst 4::4/128;"},
		// IPFilter prints a zero end as "any" (and its parser refuses that).
		{"rewrite in on nic0 from any to any -> src 0.0.0.0 - 3.3.3.1 dst 1.1.1.1-0.0.0.0;",
			"rewrite in on nic0 from 0/0 to 0/0 -> src any-3.3.3.1 dst 1.1.1.1-any;"},
		{"rewrite in on nic0 inet6 from any to any -> src ::-1::9 dst 4::4;",
			"rewrite in on nic0 inet6 from any to any -> src any-1::9 dst 4::4/128;"},
		{"map nic0 10.0.0.0/8 -> 1.1.1.1 - 1.1.1.9;", "map nic0 10.0.0.0/8 -> range 1.1.1.1-1.1.1.9"},
		{"map nic0 10.0.0.0/8 -> range 1.1.1.1 - 1.1.1.9 portmap tcp 1000:2000;", "map nic0 10.0.0.0/8 -> range 1.1.1.1-1.1.1.9 portmap tcp 1000:2000"},
		{"map nic0 10.0.0.0/8 -> 0.0.0.0-1.1.1.9;", "map nic0 10.0.0.0/8 -> range any-1.1.1.9"},
		{"rdr nic0 10.0.0.0/8 -> 1.1.1.1 - 1.1.1.9;", "rdr nic0 10.0.0.0/8 -> 1.1.1.1-1.1.1.9 ip"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			f, err := Parse("t", tc.in, nil)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := f.String(); got != tc.want+"\n" {
				t.Errorf("got %q, want %q", got, tc.want+"\n")
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"map le0 from 1.2.3.4 -> 5", `f:1:22: expected "to", found "->"`},
		{"\n\nfoo bar", `f:3:1: expected map, bimap, map-block, rdr, rewrite or divert, found "foo"`},
		{"map le0 1.2.3.4 -> 5.6.7.8 garbage", `f:1:28: expected map option, found "garbage"`},
		{"rdr le0 1.2.3.4 port x -> 5.6.7.8", `f:1:22: expected port number, found "x"`},
		{"rewrite in on le0 from any to any -> src 1.2.3.4 dst 2.2.2.2", `f:1:61: expected ";", found end of file`},
		// ipnat_y.y takes "port = N" after an address only without a comma,
		// though its own printer writes ",port = N" (checked against ipnat -Rnvf).
		{"rewrite out on le0 proto tcp from any to any -> src 1.2.3.4 dst 2.2.2.2,port = 80;", `f:1:73: expected a port number or range after ",", found "port"`},
		{"rewrite out on le0 proto tcp from any to any -> src 1.2.3.4,port = 5 dst 2.2.2.2;", `f:1:61: expected a port number or range after ",", found "port"`},
		{"map le0 1.2.3.4 -> 1.1.1.1 age x", `f:1:32: expected age, found "x"`},
		{"map le0 1.2.3.4/200 -> 1.1.1.1", `f:1:17: bad prefix length 200`},
		{"map le0 \"x", `f:1:9: unterminated string`},
		// an address of the other family is an error, never a translation
		{"map le0 inet6 10.1.1.0/24 -> 2001:db8::1/128", `f:1:15: address family mismatch`},
		{"map le0 inet6 2001:db8::/64 -> 192.168.1.1/32", `f:1:32: address family mismatch`},
		{"map le0 inet 2001:db8::/64 -> 10.1.1.1/32", `f:1:14: address family mismatch`},
		{"map le0 10.1.1.0/24 -> 2001:db8::1/128", `f:1:24: address family mismatch`},
		{"rdr le0 2001:db8::1 port 80 -> 1.1.1.1 port 80 tcp", `f:1:32: address family mismatch`},
		{"rdr le0 inet6 1.1.1.1 port 80 -> 2001:db8::1 port 80 tcp", `f:1:15: address family mismatch`},
		{"map le0 inet6 from 10.0.0.0/8 to any -> 2001:db8::1/128", `f:1:20: address family mismatch`},
		{"map le0 inet6 from any to 10.0.0.0/8 -> 2001:db8::1/128", `f:1:27: address family mismatch`},
		// ipnat_y.y has no empty statement
		{"map le0 1.1.1.0/24 -> 10.1.1.1/32;;", `f:1:35: expected map, bimap, map-block, rdr, rewrite or divert, found ";"`},
		{"map le0 1.1.1.0/24 -> 10.1.1.1/32\n;\n", `f:2:1: expected map, bimap, map-block, rdr, rewrite or divert, found ";"`},
		// a range takes two addresses, no mask; "any" only in printed rules
		{"rewrite in on le0 from any to any -> src range 3.3.3.1/24 dst 4.4.4.4;", `f:1:48: expected address range a-b, found "3.3.3.1"`},
		{"rewrite in on le0 from any to any -> src 3.3.3.1-1::2 dst 4.4.4.4;", `f:1:42: address family mismatch`},
		{"rewrite in on le0 from any to any -> src 3.3.3.1-2.2.2.2.2 dst 4.4.4.4;", `f:1:42: unknown host "3.3.3.1-2.2.2.2.2"`},
		{"map le0 10.0.0.0/8 -> range any-1.1.1.9", `f:1:29: expected address range a-b, found "any-1.1.1.9"`},
		{"map le0 10.0.0.0/8 -> range 1.1.1.1 -", `f:1:29: expected address range a-b, found "1.1.1.1"`},
		// negation on one side only (rdr: the source, the others: the
		// destination), once; no from/to for map-block; an rdr to one
		// host (or 0/0); a divert's "udp" (checked against ipnat -Rnvf)
		{"map le0 from !10.0.0.0/8 to any -> 1.1.1.1/32", `f:1:14: expected address, found "!"`},
		{"map le0 ! from 10.0.0.0/8 to any -> 1.1.1.1/32", `f:1:9: expected "from", found "!"`},
		{"rdr le0 from 2.2.2.0/24 to !1.1.1.1/32 port = 80 -> 10.0.0.1 port 8080 tcp", `f:1:28: expected address, found "!"`},
		{"map le0 from 10.0.0.0/8 ! to !10.0.0.0/8 -> 1.1.1.1/32", `f:1:30: expected address, found "!"`},
		{"map-block le0 from 10.0.0.0/24 to any -> 1.1.1.0/24", `f:1:15: expected address, found "from"`},
		{"rdr le0 1.1.1.1/32 port 80 -> 10.0.0.0/24 port 8080 tcp", `f:1:43: rdr destination must be one host (/32)`},
		{"divert in on le0 proto udp from any to any -> src 1.1.1.1,1 dst 2.2.2.2,2;", `f:1:74: expected "udp", found ";"`},
		{"divert in on le0 proto udp from any to any -> src 1.1.1.1,1 dst 2.2.2.2,2 purge udp;", `f:1:75: expected "udp", found "purge"`},
		// ipnat_y.y takes a rule's options once each, in its grammar's
		// order (mapoptions, rdroptions); sequential only after portmap,
		// sticky only in rdr (checked against ipnat -Rnvf)
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 tag x frag", `f:1:40: "frag" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 purge tcp", `f:1:40: "tcp" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 tcp frag", `f:1:38: "frag" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 frag frag", `f:1:39: "frag" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 portmap tcp 1:2 frag sequential", `f:1:55: expected map option, found "sequential"`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 sequential", `f:1:34: expected map option, found "sequential"`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 round-robin sticky", `f:1:46: expected map option, found "sticky"`},
		{"map le0 10.0.0.0/8 -> 1.1.1.1/32 portmap tcp 1:2 proxy port ftp ftp/tcp", `f:1:50: "proxy" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"map-block le0 10.0.0.0/24 -> 1.1.1.0/24 frag ports 2", `f:1:46: "ports" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"rdr le0 1.1.1.1/32 port 80 -> 10.0.0.1 port 8080 frag tcp", `f:1:55: "tcp" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"rdr le0 1.1.1.1/32 port 80 -> 10.0.0.1,10.0.0.2 port 8080 tcp mssclamp 3 sticky", `f:1:74: "sticky" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
		{"rdr le0 1.1.1.1/32 port 80 -> 10.0.0.1 port 8080 tcp tag x proxy port 80 http/tcp", `f:1:60: "proxy" out of place: IPFilter takes a rule's options once each, in the order of its grammar`},
	}
	for _, tc := range tests {
		_, err := Parse("f", tc.in, nil)
		if err == nil {
			t.Errorf("%q: no error", tc.in)
			continue
		}
		if got := err.Error(); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestKeptOnPurpose pins inputs IPFilter's ipnat refuses through lexer
// accidents that Sluice loads (docs/ipfilter-differences.md, "Behaviours
// Sluice keeps on purpose").
func TestKeptOnPurpose(t *testing.T) {
	for _, tc := range []struct {
		in    string
		rules int
	}{
		// only blank lines: IPFilter's "syntax error" at line 1
		{"\n", 0},
		{" \n\t\n\n", 0},
		// after an address without a mask IPFilter's lexer splits the next
		// word at "-" (looking for a range): "unknown protocol" at "round"
		{"rdr nic0 1.1.1.1/32 -> 10.1.1.1 round-robin\n", 1},
		{"rdr nic0 1.1.1.1/32 -> 10.1.1.1\tround-robin;\n", 1},
		// and a syntax error at the "-" of a map-block on the next line
		{"map nic0 1.1.1.0/24 -> 10.1.1.1\nmap-block nic0 1.1.1.0/24 -> 10.1.1.0/24\n", 2},
	} {
		f, err := Parse("f", tc.in, nil)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if len(f.Rules) != tc.rules {
			t.Errorf("%q: %d rules, want %d", tc.in, len(f.Rules), tc.rules)
		}
	}
	f, err := Parse("f", "rdr nic0 1.1.1.1/32 -> 10.1.1.1 round-robin\n", nil)
	if err == nil {
		if got, want := f.String(), "rdr nic0 1.1.1.1/32 -> 10.1.1.1/32 ip round-robin\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestErrorLimitAndRecovery(t *testing.T) {
	src := strings.Repeat("bad line\nmap le0 1.2.3.4 -> 5.6.7.8\n", 20)
	f, err := Parse("f", src, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 10 {
		t.Errorf("got %d errors, want 10", n)
	}
	if len(f.Rules) < 9 {
		t.Errorf("got %d good rules, want the ones between the errors", len(f.Rules))
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"map le0 0/0 -> 0/32 portmap tcp/udp 1000:2000 sequential purge",
		"rdr le0 9.8.7.6/32 port 80 -> 1.1.1.1,1.1.1.2 port 80 tcp round-robin frag age 40 sticky mssclamp 1000 tag x",
		"rewrite in on bge0 inet6 proto tcp from 1:1:1::1 to any -> src 0/0 dst dstlist/a;",
		"map fxp0 inet6 from 192:168::/18 to any port = 21 -> 1:2:3::4/128 proxy port 21 ftp/tcp",
		"map-block le0 10.0.0.0/16 -> 203.1.1.0/24 ports 256",
		"bimap le0 10.0.0.0/8 -> 1.2.3.0/24\nno rdr le0 1.2.3.4 port 80 tcp;",
	} {
		f.Add(s)
	}
	netfmt.LookupHost = func(string) ([]netip.Addr, error) { return nil, errors.New("no resolver in fuzzing") }
	f.Fuzz(func(t *testing.T, src string) {
		file, err := Parse("f", src, nil)
		if err != nil {
			return
		}
		out := file.String()
		// the printed form reads back as the kernel datapath reads it
		file2, err := ParsePrinted("f", out, nil)
		if err != nil {
			t.Fatalf("printed form does not parse: %v\n%s", err, out)
		}
		if out2 := file2.String(); out2 != out {
			t.Fatalf("not a fixed point:\n%s\n%s", out, out2)
		}
	})
}

// TestParsePrinted: the printer's ",port = N" form, refused in a rule file
// as IPFilter refuses it, reads back with ParsePrinted (the kernel
// datapath stores rules printed).
func TestParsePrinted(t *testing.T) {
	in := "rewrite out on bge0 proto tcp from 1.1.1.1 to any port = 80 -> src 3.3.3.0/24,1000-2000 dst 4.4.4.4 port = 80;"
	f, err := Parse("t", in, nil)
	if err != nil {
		t.Fatal(err)
	}
	printed := f.Rules[0].String()
	if _, err := Parse("t", printed, nil); err == nil {
		t.Fatalf("Parse took the printed form %q", printed)
	}
	back, err := ParsePrinted("t", printed, nil)
	if err != nil {
		t.Fatalf("ParsePrinted(%q): %v", printed, err)
	}
	if got := back.Rules[0].String(); got != printed {
		t.Errorf("round trip: got %q, want %q", got, printed)
	}
	// a zero range end prints as "any", which only ParsePrinted takes back
	for _, in := range []string{
		"rewrite in on nic0 from any to any -> src 0.0.0.0-3.3.3.1 dst 1.1.1.1-0.0.0.0;",
		"rewrite in on nic0 inet6 from any to any -> src ::-1::9 dst 4::4;",
		"map nic0 10.0.0.0/8 -> 0.0.0.0-1.1.1.9",
	} {
		f, err := Parse("t", in, nil)
		if err != nil {
			t.Fatal(err)
		}
		printed := f.Rules[0].String()
		back, err := ParsePrinted("t", printed, nil)
		if err != nil {
			t.Fatalf("ParsePrinted(%q): %v", printed, err)
		}
		if back.Rules[0].NewSrc != f.Rules[0].NewSrc || back.Rules[0].NewDst != f.Rules[0].NewDst || back.Rules[0].New != f.Rules[0].New {
			t.Errorf("%q: read back as %q", printed, back.Rules[0].String())
		}
	}
}
