package netfmt

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestNtopV6(t *testing.T) {
	tests := []struct{ in, want string }{
		{"::", "::"},
		{"::1", "::1"},
		{"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"},
		{"1:0:3:4:5:6:7:8", "1:0:3:4:5:6:7:8"}, // a single zero group is not compressed
		{"1:0:0:4:0:0:0:8", "1:0:0:4::8"},      // the longest run wins
		{"1:0:0:4:5:0:0:8", "1::4:5:0:0:8"},    // the first of equal runs
		{"::ffff:1.2.3.4", "::ffff:1.2.3.4"},
		{"::1.2.3.4", "::1.2.3.4"}, // IPv4-compatible form, as glibc prints it
		{"10:1::1:1", "10:1::1:1"},
		{"fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98", "fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98"},
		{"1::", "1::"},
	}
	for _, tc := range tests {
		if got := NtopV6(netip.MustParseAddr(tc.in).As16()); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPrintIPAndMasks(t *testing.T) {
	if got := PrintIP([4]byte{0, 0, 0, 5}); got != "5" {
		t.Errorf("got %s, want 5", got)
	}
	if got := PrintIP([4]byte{0, 0, 1, 0}); got != "0.0.1.0" {
		t.Errorf("got %s, want 0.0.1.0", got)
	}
	for m, want := range map[uint32]int{0: 0, 0xff000000: 8, 0xffffffff: 32, 0xff: -1, 0xff00ff00: -1} {
		if got := Count4Bits(m); got != want {
			t.Errorf("Count4Bits(%#x): got %d, want %d", m, got, want)
		}
	}
	if got := Count6Bits(MaskV6(67)); got != 67 {
		t.Errorf("Count6Bits(MaskV6(67)) = %d", got)
	}
}

func TestParseHost(t *testing.T) {
	h, err := ParseHost("test.host.dots", 0)
	if err != nil || h.Fam != 4 || NtopV4(h.V4()) != "254.220.186.152" {
		t.Errorf("test.host.dots: got %+v, %v", h, err)
	}
	h, err = ParseHost("test.host.dots", 6)
	if err != nil || h.Fam != 6 || NtopV6(h.A) != "fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98" {
		t.Errorf("test.host.dots (v6): got %+v, %v", h, err)
	}
	h, _ = ParseHost("0", 0)
	if h.Fam != 0 {
		t.Errorf("0 should have no family, got %d", h.Fam)
	}
	h, _ = ParseHost("1", 0)
	if h.Fam != 4 || h.Word4() != 1 {
		t.Errorf("1: got %+v", h)
	}
	for _, bad := range []string{"1.2.3.256", "1.2.3", "::g", "-x"} {
		if _, err := ParseHost(bad, 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLex(t *testing.T) {
	toks := Lex("map le0 1.2.3.4/32 -> 1:2::3,80 \\\n port <= 5 \"q s\" # c\n", true)
	var got []string
	for _, tk := range toks {
		got = append(got, tk.Text)
	}
	want := []string{"map", "le0", "1.2.3.4", "/", "32", "->", "1:2::3", ",", "80", "port", "<=", "5", "q s", "\n", ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if p := toks[9].Pos; p != (Pos{2, 2}) {
		t.Errorf("position of port: got %v, want 2:2", p)
	}
	toks = Lex("file://a/b.txt;", false)
	if toks[0].Text != "file://a/b.txt" || toks[1].Text != ";" {
		t.Errorf("file URL: got %q %q", toks[0].Text, toks[1].Text)
	}
}
