package ipfctl

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"sluice/internal/bpf"
	"sluice/internal/ipflog"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
)

// udp4 builds an IPv4/UDP packet with n payload bytes.
func udp4(sport, dport uint16, n int) []byte {
	b := make([]byte, 28+n)
	b[0], b[8], b[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	copy(b[12:], []byte{10, 0, 0, 1})
	copy(b[16:], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	binary.BigEndian.PutUint16(b[24:], uint16(8+n))
	return b
}

func TestConvertPrintsAsOffline(t *testing.T) {
	wall := time.Date(2026, 11, 29, 20, 1, 2, 345678000, time.UTC)
	for _, c := range []struct {
		name  string
		rec   bpf.LogRecord
		group string
		want  string
	}{
		{
			name: "pass-rule",
			rec:  bpf.LogRecord{RuleNo: 1, Pass: ruleset.FRPass | ruleset.FRLog | ruleset.FRQuick, Family: 4, Len: 36, Data: udp4(1234, 5005, 8)},
			want: "29/11/2026 20:01:02.345678 veth0 @0:1 p 10.0.0.1,1234 -> 10.0.0.2,5005 PR udp len 20 36 IN\n",
		},
		{
			name:  "block-group-out-state",
			rec:   bpf.LogRecord{RuleNo: 3, List: 4, Out: true, Pass: ruleset.FRBlock | ruleset.FRLog | ruleset.FRKeepState, Family: 4, Reason: bpf.RSNPPS, Data: udp4(53, 1024, 0)},
			group: "web",
			want:  "29/11/2026 20:01:02.345678 veth0 @web:3 b 10.0.0.1,53 -> 10.0.0.2,1024 PR udp len 20 28 K-S OUT reason:pps-rate\n",
		},
		{
			name: "block-rule",
			rec:  bpf.LogRecord{RuleNo: 2, Pass: ruleset.FRBlock | ruleset.FRLog, Reason: bpf.RSNFilter, Data: udp4(1, 2, 0)},
			want: "29/11/2026 20:01:02.345678 veth0 @0:2 b 10.0.0.1,1 -> 10.0.0.2,2 PR udp len 20 28 IN\n",
		},
		{
			// the datapath's own reasons print by name too
			name: "keep-limit",
			rec:  bpf.LogRecord{RuleNo: 2, Pass: ruleset.FRBlock | ruleset.FRLog, Reason: bpf.RSNDCA, Data: udp4(1, 2, 0)},
			want: "29/11/2026 20:01:02.345678 veth0 @0:2 b 10.0.0.1,1 -> 10.0.0.2,2 PR udp len 20 28 IN reason:keep-limit\n",
		},
		{
			name: "nomatch",
			rec:  bpf.LogRecord{RuleNo: -1, Pass: ruleset.FRNoMatch | ipflog.FFLogNoMatch, Data: udp4(1, 2, 0)},
			want: "29/11/2026 20:01:02.345678 veth0 @-1:-1 n 10.0.0.1,1 -> 10.0.0.2,2 PR udp len 20 28 IN\n",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Convert(&c.rec, "veth0", c.group, wall, 0)
			p := &ipflog.Printer{Opts: ipflog.FormatOptions{Location: time.UTC}}
			if got := string(p.Append(nil, &r)); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestHeaderLen(t *testing.T) {
	tcp := make([]byte, 60)
	tcp[0], tcp[9] = 0x46, 6 // 24-byte IP header
	tcp[24+12] = 8 << 4      // 32-byte TCP header
	frag := udp4(1, 2, 20)
	frag[7] = 1 // offset 8: no UDP header in this fragment
	for _, c := range []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, 0},
		{"udp", udp4(1, 2, 10), 28},
		{"tcp-options", tcp, 56},
		{"short", udp4(1, 2, 0)[:10], 10},
		{"later-fragment", frag, 20},
		{"truncated-tcp", tcp[:30], 30},
	} {
		if got := headerLen(c.b); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestStateMatcher(t *testing.T) {
	est := bpf.State{Proto: 6, TCPState: [2]uint8{4, 4}}
	closing := bpf.State{Proto: 6, TCPState: [2]uint8{4, 10}}
	udpIdle := bpf.State{Proto: 17, Idle: 45 * time.Second}
	for _, c := range []struct {
		arg  string
		want [3]bool // est, closing, udpIdle
	}{
		{"S", [3]bool{true, true, true}},
		{"s", [3]bool{false, true, false}},
		{"10", [3]bool{false, true, false}},
		{"4", [3]bool{false, false, false}},
		{"30", [3]bool{false, false, true}},
		{"60", [3]bool{false, false, false}},
	} {
		m, err := stateMatcher(c.arg)
		if err != nil {
			t.Fatalf("-F %s: %v", c.arg, err)
		}
		got := [3]bool{m(est), m(closing), m(udpIdle)}
		if got != c.want {
			t.Errorf("-F %s: got %v, want %v", c.arg, got, c.want)
		}
	}
	if _, err := stateMatcher("x"); err == nil {
		t.Errorf("-F x: no error")
	}
}

func parse(t *testing.T, src string) []*ipf.Rule {
	t.Helper()
	rs, err := ipf.Parse("t", []byte(src), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func texts(rs []*ipf.Rule) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(ipf.FormatRule(r) + "\n")
	}
	return b.String()
}

func TestEditRules(t *testing.T) {
	cur := parse(t, "pass in all\nblock out all\npass in all\n")
	got, err := editRules(cur, parse(t, "pass in  all\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "block out all\npass in all\n"; texts(got) != want {
		t.Errorf("remove: got %q, want %q", texts(got), want)
	}
	if texts(cur) != "pass in all\nblock out all\npass in all\n" {
		t.Errorf("remove changed its input: %q", texts(cur))
	}
	got, _ = editRules(cur, parse(t, "count in all\n"), false)
	if want := "pass in all\nblock out all\npass in all\ncount in all\n"; texts(got) != want {
		t.Errorf("add: got %q, want %q", texts(got), want)
	}
	if _, err := editRules(cur, parse(t, "block in all\n"), true); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("removing a missing rule: got %v, want a not-loaded error", err)
	}
}

func TestFormatZeroStats(t *testing.T) {
	var s bpf.Stats
	s.In.Bad, s.Out.Bad = 1, 2
	s.In.Block, s.In.Pass, s.In.Nomatch, s.In.Acct = 3, 4, 5, 6
	s.Out.LogBlock, s.Out.LogPass = 7, 8
	want := "bad packets:\t\tin 1\tout 2\n" +
		" input packets:\t\tblocked 3 passed 4 nomatch 5 counted 6\n" +
		"output packets:\t\tblocked 0 passed 0 nomatch 0 counted 0\n" +
		" input packets logged:\tblocked 0 passed 0\n" +
		"output packets logged:\tblocked 7 passed 8\n"
	if got := FormatZeroStats(s); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestConvertNoAllocs(t *testing.T) {
	rec := bpf.LogRecord{RuleNo: 1, Pass: ruleset.FRPass | ruleset.FRLog, Data: udp4(1, 2, 8)}
	wall := time.Now()
	var r ipflog.Record
	if n := testing.AllocsPerRun(100, func() { r = Convert(&rec, "veth0", "", wall, 1) }); n != 0 {
		t.Errorf("Convert: %v allocs per record, want 0", n)
	}
	_ = r
}
