package ipf

import (
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// printAll parses src and prints every rule as `ipf -Rnf` would with -v
// but without the unresolved-interface marks.
func printAll(t *testing.T, src string, opts ParseOptions) string {
	t.Helper()
	rules, err := Parse("t", []byte(src), opts)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	var out []string
	for _, r := range rules {
		out = append(out, Format(r, PrintOptions{NoResolve: true, Verbose: true}))
	}
	return strings.Join(out, "\n")
}

// TestPrintProductions covers each grammar production with its normalised
// printed form.
func TestPrintProductions(t *testing.T) {
	tests := []struct {
		name, in, want string
		opts           ParseOptions
	}{
		{"action pass", "pass in all", "pass in all", ParseOptions{}},
		{"action block return-rst", "block return-rst in proto tcp all", "block return-rst in proto tcp from any to any", ParseOptions{}},
		{"return-icmp default code", "block return-icmp(net-unr) in proto udp all", "block return-icmp in proto udp from any to any", ParseOptions{}},
		{"return-icmp named", "block return-icmp(port-unr) in proto udp from any to 10.0.0.0/8 port 1:1023", "block return-icmp(port-unr) in inet proto udp from any to 10.0.0.0/8 port 1:1023", ParseOptions{}},
		{"return-icmp numeric code 15", "block return-icmp(15) in all", "block return-icmp(preced-cutoff) in all", ParseOptions{}},
		{"return-icmp code above table", "block return-icmp-as-dest(20) in all", "block return-icmp-as-dest(20) in all", ParseOptions{}},
		{"log action with options", "log body first or-block level auth.info in all", "log body first or-block level auth.info in all", ParseOptions{}},
		{"log option bare priority", "pass in log first level info quick proto icmp all icmp-type echo code 0 keep state", "pass in log first level local0.info quick inet proto icmp from any to any icmp-type echo code 0 keep state # count 0", ParseOptions{}},
		{"count", "count in on le0 all", "count in on le0 all", ParseOptions{}},
		{"auth preauth nomatch", "auth out proto tcp all", "auth out proto tcp from any to any", ParseOptions{}},
		{"auth and count print their log options", "auth in log quick all keep state pps 1", "auth in log quick all keep state pps 1 # count 0", ParseOptions{}},
		{"count log", "count out log or-block level local0.info quick all", "count out log or-block level local0.info quick all", ParseOptions{}},
		{"preauth prints no log", "preauth in log body all", "preauth in all", ParseOptions{}},
		{"nomatch with log prints as log", "nomatch in log body quick all", "log body in quick all", ParseOptions{}},
		{"nomatch", "nomatch in all", "nomatch in all", ParseOptions{}},
		{"call now", "call now srcgrpmap/1010 in all", "call now srcgrpmap/1010 in all", ParseOptions{}},
		{"skip", "skip 2 out all", "skip 2 out all", ParseOptions{}},
		{"decapsulate", "decapsulate l5-as(x) in all", "decapsulate in all", ParseOptions{}},
		{"collection", "10101 pass out proto tcp all", "10101 pass out proto tcp from any to any", ParseOptions{}},
		{"collection zero not printed", "0 block out all", "block out all", ParseOptions{}},
		{"insert position", "@3 pass in all", "pass in all", ParseOptions{}},
		{"on pair", "pass in on le0,le1 all", "pass in on le0,le1 all", ParseOptions{}},
		{"on list", "pass in on {le0,le1} all", "pass in on le0 all\npass in on le1 all", ParseOptions{}},
		{"on 4.1 paren list", "pass in on (le0, le1) all", "pass in on le0 all\npass in on le1 all", ParseOptions{}},
		{"via", "pass in on le0,le1 out-via le1,le0 proto tcp all keep state", "pass in on le0,le1 out-via le1,le0 proto tcp from any to any keep state # count 0", ParseOptions{}},
		{"in-via on out rule", "pass out on ppp0 in-via le0 all", "pass out on ppp0 in-via le0 all", ParseOptions{}},
		{"route to with next hop", "pass in on le0 to le1:10.0.0.1 proto icmp all", "pass in on le0 to le1:10.0.0.1 inet proto icmp from any to any", ParseOptions{}},
		{"route-to dup-to reply-to fastroute", "pass in route-to a dup-to b reply-to c:1.2.3.4 fastroute all", "pass in to a dup-to b reply-to c:1.2.3.4 fastroute inet all", ParseOptions{}},
		{"to dstlist", "pass in on nic0 to dstlist/spread from 4.4.0.0/16 to any", "pass in on nic0 to dstlist/spread inet from 4.4.0.0/16 to any", ParseOptions{}},
		{"to is from/to when followed by address", "pass in to 1.2.3.4", "pass in inet from any to 1.2.3.4/32", ParseOptions{}},
		{"family keyword", "pass in family inet6 all", "pass in inet6 all", ParseOptions{}},
		{"inet6 option", "block in all", "block in inet6 all", ParseOptions{Inet6: true}},
		{"inet4 option", "block in all", "block in inet all", ParseOptions{Inet4: true}},
		{"tos ttl", "pass in tos 16 ttl 64 proto udp all", "pass in tos 0x10 ttl 64 proto udp from any to any", ParseOptions{}},
		{"tos list", "pass in tos {0x10,0x20} all", "pass in tos 0x10 from any to any\npass in tos 0x20 from any to any", ParseOptions{}},
		{"proto number to name", "pass in proto 17 all", "pass in proto udp from any to any", ParseOptions{}},
		{"proto unknown number", "pass in proto 250 all", "pass in proto 250 from any to any", ParseOptions{}},
		{"proto tcp-udp", "pass in proto tcp-udp all", "pass in proto tcp/udp from any to any", ParseOptions{}},
		{"address short forms", "pass in from 128.16/16 to 129.10.10/24", "pass in inet from 128.16.0.0/16 to 129.10.10.0/24", ParseOptions{}},
		{"address masked at parse", "pass in from 128.0.0.1/24 to 1.2.3.4 mask 0xffff0000", "pass in inet from 128.0.0.0/24 to 1.2.0.0/16", ParseOptions{}},
		{"non-contiguous mask is any", "block in from 10.1.2.3/255.0.255.0 to 1.2.3.4 mask 0xff00ff00", "block in inet from any to any", ParseOptions{}},
		{"non-contiguous negated mask", "block in from !10.1.2.3/255.0.255.0 to any", "block in inet from !any to any", ParseOptions{}},
		{"zero address is any", "block in log from 0/0 to 0/0", "block in log inet from any to any", ParseOptions{}},
		{"negation", "pass in from !1.1.1.0/24 to !any", "pass in inet from !1.1.1.0/24 to !any", ParseOptions{}},
		{"ipv6 address", "pass in from ef00:1001:2002::1/48 to any", "pass in inet6 from ef00:1001:2002::/48 to any", ParseOptions{}},
		{"hostnames", "pass in from localhost to test.host.dots", "pass in inet from 127.0.0.1/32 to 254.220.186.152/32", ParseOptions{}},
		{"hostnames v6", "pass in from localhost to test.host.dots", "pass in inet6 from ::1/128 to fe80:aa55:1234:5678:5a5a:a5a5:fedc:ba98/128", ParseOptions{Inet6: true}},
		{"address list order", "pass in from {1.1.1.1,2.2.2.2} to {3.3.3.3,4.4.4.4}", "pass in inet from 1.1.1.1/32 to 3.3.3.3/32\npass in inet from 2.2.2.2/32 to 3.3.3.3/32\npass in inet from 1.1.1.1/32 to 4.4.4.4/32\npass in inet from 2.2.2.2/32 to 4.4.4.4/32", ParseOptions{}},
		{"4.1 paren address list", "pass in from (1.1.1.1,2.2.2.2) to any", "pass in inet from 1.1.1.1/32 to any\npass in inet from 2.2.2.2/32 to any", ParseOptions{}},
		{"dynamic interface address", "pass in on le0 from (le0) to le0/broadcast", "pass in on le0 inet from le0/32 to le0/bcast", ParseOptions{}},
		{"interface network forms", "pass in on le0 from le0/network to le0/peer", "pass in on le0 inet from le0/net to le0/peer", ParseOptions{}},
		{"dynamic with bits", "pass in on le0 from (le0:1)/24 to le0/netmasked", "pass in on le0 inet from le0/24 to le0/netmasked", ParseOptions{}},
		{"pool and hash refs", "pass in from pool/101 to hash/microsoft", "pass in from pool/101 to hash/microsoft", ParseOptions{}},
		{"ports compare", "pass in proto tcp from any port gt 1024 to any port eq 1024", "pass in proto tcp from any port > 1024 to any port = 1024", ParseOptions{}},
		{"ports all comparisons", "pass in proto udp from any port != 21 to any port <= 1023", "pass in proto udp from any port != 21 to any port <= 1023", ParseOptions{}},
		{"port ranges", "pass in proto tcp from any port 0 >< 512 to any port 6000 <> 6009", "pass in proto tcp from any port 0 >< 512 to any port 6000 <> 6009", ParseOptions{}},
		{"port colon range spaced", "pass in proto tcp from any to any port 6000 :6009", "pass in proto tcp from any to any port 6000:6009", ParseOptions{}},
		{"port list with range", "pass in proto tcp from any to any port = {80, 8000:8080}", "pass in proto tcp from any to any port = 80\npass in proto tcp from any to any port 8000:8080", ParseOptions{}},
		{"port service names", "pass in proto tcp from any to any port = telnet", "pass in proto tcp from any to any port = 23", ParseOptions{}},
		{"flags default mask", "pass in proto tcp all flags S", "pass in proto tcp from any to any flags S/FSRPAU", ParseOptions{}},
		{"flags numeric", "pass in proto tcp all flags 2/18", "pass in proto tcp from any to any flags S/SA", ParseOptions{}},
		{"flags mask only", "pass in proto tcp all flags /SAP", "pass in proto tcp from any to any flags /SPA", ParseOptions{}},
		{"flags hex and W", "pass in proto tcp all flags 0x80/AW", "pass in proto tcp from any to any flags C/AC", ParseOptions{}},
		{"icmp type code", "block in proto icmp from any to any icmp-type unreach code 3", "block in inet proto icmp from any to any icmp-type unreach code 3", ParseOptions{}},
		{"icmp type number", "block in proto icmp all icmp-type 200", "block in inet proto icmp from any to any icmp-type 200", ParseOptions{}},
		{"with contradiction keeps the positive", "log in all with short,not short", "log in from any to any with short", ParseOptions{}},
		{"v6hdrs is the attribute", "pass in inet6 all with not v6hdrs frag", "pass in inet6 from any to any with frag,not v6hdrs", ParseOptions{}},
		{"protocol alias is case-sensitive", "pass in proto IPv6-ICMP all", "pass in proto ipv6-icmp from any to any", ParseOptions{}},
		{"icmp6 type", "pass in inet6 proto ipv6-icmp all icmp-type neighborsol", "pass in inet6 proto ipv6-icmp from any to any icmp-type neighborsol", ParseOptions{}},
		{"icmp type list", "pass in proto icmp all icmp-type {echo,timex}", "pass in inet proto icmp from any to any icmp-type echo\npass in inet proto icmp from any to any icmp-type timex", ParseOptions{}},
		{"with attributes order", "pass in all with mbcast,not bcast,multicast,not state,not ipopts", "pass in from any to any with not ipopts,mbcast,not bcast,mcast,not state", ParseOptions{}},
		{"and keyword", "pass in from localhost to localhost and not frag", "pass in inet from 127.0.0.1/32 to 127.0.0.1/32 with not frag", ParseOptions{}},
		{"opt list order", "pass in all with opt nop,rr,zsu not opt ssrr,lsrr", "pass in inet from any to any with opt nop,rr,zsu not opt lsrr,ssrr", ParseOptions{}},
		{"sec-class", "block in all with opt ssrr,sec-class topsecret", "block in inet from any to any with opt ssrr,sec-class topsecret", ParseOptions{}},
		{"v6hdr", "block out family inet6 proto tcp all with v6hdr routing", "block out inet6 proto tcp from any to any with v6hdr routing", ParseOptions{}},
		{"keep state options", "pass in proto tcp all flags S keep state(strict,newisn,no-icmp-err,limit 101,age 600)", "pass in proto tcp from any to any flags S/FSRPAU keep state (limit 101,strict,newisn,no-icmp-err,age 600/600) # count 0", ParseOptions{}},
		{"keep state loose alone", "pass in proto tcp all keep state (loose)", "pass in proto tcp from any to any keep state # count 0", ParseOptions{}},
		{"keep state max-srcs", "pass in quick proto tcp all flags S keep state(max-srcs 3, max-per-src 1/16)", "pass in quick proto tcp from any to any flags S/FSRPAU keep state (max-nodes 3, max-per-src 1/16) # count 0", ParseOptions{}},
		{"keep frags strict", "pass in proto udp all keep frag(strict)", "pass in proto udp from any to any keep frags (strict)", ParseOptions{}},
		{"keep state and frags", "pass in proto tcp all keep frags keep state", "pass in proto tcp from any to any keep state keep frags # count 0", ParseOptions{}},
		{"with ah is not printed", "pass in all with ah", "pass in from any to any", ParseOptions{}},
		{"with ah beside ipopts", "pass in all with ipopts,ah keep state", "pass in from any to any with ipopts keep state # count 0", ParseOptions{}},
		{"head and group", "block return-icmp in quick proto udp all keep state head 110 group 10", "block return-icmp in quick proto udp from any to any keep state head 110 group 10 # count 0", ParseOptions{}},
		{"numeric group kept as decimal", "pass in all head 0x10 group 007", "pass in all head 16 group 7", ParseOptions{}},
		{"group name of 15", "pass in all group abcdefghijklmno", "pass in all group abcdefghijklmno", ParseOptions{}},
		{"group inherits proto and family", "block in on vm0 proto tcp/udp from 1.0.0.0/8 to any head 101\npass in from any to 2.2.2.2 group 101",
			"block in on vm0 inet proto tcp/udp from 1.0.0.0/8 to any head 101\npass in inet proto tcp/udp from any to 2.2.2.2/32 group 101", ParseOptions{}},
		{"group with bare head inherits nothing", "block in on eri0 all head 1\npass in on eri0 from 1.1.1.1 to any group 1", "block in on eri0 all head 1\npass in on eri0 inet from 1.1.1.1/32 to any group 1", ParseOptions{}},
		{"match-tag prints as set-tag", "pass in quick proto tcp all match-tag(nat=web)", "pass in quick proto tcp from any to any set-tag(nat=web)", ParseOptions{}},
		{"set-tag both", "pass out all set-tag(log=5, nat=12)", "pass out all set-tag(log=5, nat=12)", ParseOptions{}},
		{"pps comment rule-ttl", "pass in from !any to any pps 10 rule-ttl 30 comment \"x y\"", "pass in from !any to any pps 10 comment \"x y\" # rule-ttl 30", ParseOptions{}},
		{"tail age", "pass in proto udp all keep state age 10/20", "pass in proto udp from any to any keep state (age 10/20) # count 0", ParseOptions{}},
		{"exp", "pass in exp { \"ip.addr = 1.2.3.4,5.6.7.8;\" }", "pass in exp { \"ip.addr = 1.2.3.4/32,5.6.7.8/32;\" } ", ParseOptions{}},
		{"exp flags", "pass in exp { \"tcp.flags=S/SA; ip.p=tcp;\" }", "pass in exp { \"tcp.flags = S/SA; ip.p = 6;\" } ", ParseOptions{}},
		{"bpf", "pass in bpf-v4 { \"0 1 2\" }", "pass in bpf-v4 { \"0 1 2\" } ", ParseOptions{}},
		{"hp keep limit and log limit", "pass return-rst in log limit freq 5 quick proto tcp from 18.9.90.0/24 to any port = 25 keep limit 10 cumulative",
			"pass return-rst in log limit freq 5 quick inet proto tcp from 18.9.90.0/24 to any port = 25 keep limit 10 cumulative", ParseOptions{}},
		{"semicolon ends rule", "pass in all; block out all;", "pass in all\nblock out all", ParseOptions{}},
		{"rule over lines", "pass in\n  proto tcp\n  all", "pass in proto tcp from any to any", ParseOptions{}},
		{"continuation inside a token", "pass in from 1\\\n28.0.0.1 to any", "pass in inet from 128.0.0.1/32 to any", ParseOptions{}},
		{"escaped dot", "pass in from test\\.host.dots to any", "pass in inet from 254.220.186.152/32 to any", ParseOptions{}},
		{"comments", "# c\npass in all # trailing\n", "pass in all", ParseOptions{}},
		{"variables", "a=any;\nb=\"from $a\";\nc='to $a';\nd=block;\n$d in $b $c", "block in from any to any", ParseOptions{}},
		{"variable braces splice", "e=\"pass in\";\nf=\" from any\";\n$e${f}", "pass in from any to any", ParseOptions{}},
		{"predefined variable", "pass in on $if all", "pass in on le9 all", ParseOptions{Vars: map[string]string{"if": "le9"}}},
		{"set statement ignored in rules", "set state_max 10;\npass in all", "pass in all", ParseOptions{}},
		{"unresolved marks parse back", "pass in on le0(!) to qe0(!) all", "pass in on le0 to qe0 all", ParseOptions{}},
		{"interface name of the rule is its address", "pass in on ppp0 inet from ppp0/peer to ppp0/32", "pass in on ppp0 inet from ppp0/peer to ppp0/32", ParseOptions{}},
		// hme0/32 reads back as an IPv4 address, so the printed rule says inet
		// (print -> parse -> print is a fixed point).
		{"interface name without mask", "block in on hme0 from any to hme0", "block in on hme0 inet from any to hme0/32", ParseOptions{}},
		{"interface in parentheses without mask", "pass in from (A) to any", "pass in inet from A/32 to any", ParseOptions{}},
		{"interface without mask, -6", "pass in on A from A", "pass in on A inet6 from A/128 to any", ParseOptions{Inet6: true}},
		{"interface ifmask forms", "block in on bge0 from bge0/network to bge0/broadcast", "block in on bge0 inet from bge0/net to bge0/bcast", ParseOptions{}},
		{"nat tag cut to 16", "pass out all set-tag(log=2147483648, nat=overtherainbowisapotofgold)", "pass out all set-tag(log=2147483648, nat=overtherainbowis)", ParseOptions{}},
		{"keywords case-insensitive", "PASS IN ON le0 PROTO TCP ALL", "pass in on le0 proto tcp from any to any", ParseOptions{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := printAll(t, tc.in, tc.opts)
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func parseOne(t *testing.T, src string) *Rule {
	t.Helper()
	rules, err := Parse("t", []byte(src), ParseOptions{})
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	if len(rules) != 1 {
		t.Fatalf("Parse(%q): got %d rules, want 1", src, len(rules))
	}
	return rules[0]
}

// TestASTValues checks the values the engine compiles from.
func TestASTValues(t *testing.T) {
	v4 := netip.MustParseAddr
	t.Run("addresses and ports", func(t *testing.T) {
		r := parseOne(t, "pass in quick on le0 proto tcp from 10.1.2.3/16 port 1:1023 to !192.168.1.1 port 10 >< 20")
		want := &Rule{
			Pos: Pos{File: "t", Line: 1, Col: 1}, Action: ActionPass, Dir: DirIn, Quick: true, On: []string{"le0"},
			Family: FamilyInet, HasProto: true, Proto: 6, HasFromTo: true,
			From: Endpoint{Addr: Addr{Kind: AddrHost, IP: v4("10.1.0.0"), Mask: v4("255.255.0.0")}, Port: Port{Op: PortRange, Lo: 1, Hi: 1023}},
			To:   Endpoint{Not: true, Addr: Addr{Kind: AddrHost, IP: v4("192.168.1.1"), Mask: v4("255.255.255.255")}, Port: Port{Op: PortInRange, Lo: 10, Hi: 20}},
		}
		if d := cmp.Diff(want, r, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Errorf("rule mismatch (-want +got):\n%s", d)
		}
	})
	t.Run("with and options bits", func(t *testing.T) {
		r := parseOne(t, "block in all with short,not frag,opt lsrr,sec-class secret not opt ts")
		if r.With != FI_SHORT || r.WithMask != FI_SHORT|FI_FRAG {
			t.Errorf("With/WithMask = %#x/%#x, want %#x/%#x", r.With, r.WithMask, FI_SHORT, FI_SHORT|FI_FRAG)
		}
		if r.OptBits != OptLSRR|OptSEC || r.OptMask != OptLSRR|OptSEC|OptTS {
			t.Errorf("OptBits/OptMask = %#x/%#x", r.OptBits, r.OptMask)
		}
		if r.SecBits != SecSecret || r.SecMask != SecSecret {
			t.Errorf("SecBits/SecMask = %#x/%#x, want %#x", r.SecBits, r.SecMask, SecSecret)
		}
		if r.Family != FamilyInet {
			t.Errorf("Family = %d, want inet (opt forces it)", r.Family)
		}
	})
	t.Run("keep state", func(t *testing.T) {
		r := parseOne(t, "pass in inet proto tcp all keep state (limit 5, strict, icmp-head g1, nolog, sync, age 30/5, max-srcs 9, max-per-src 2) keep frags")
		want := &KeepState{Limit: 5, Strict: true, ICMPHead: "g1", NoLog: true, Sync: true, MaxSrcs: 9, MaxPerSrc: 2, MaxPerSrcBits: 32}
		if d := cmp.Diff(want, r.KeepState); d != "" {
			t.Errorf("KeepState (-want +got):\n%s", d)
		}
		if r.Age != [2]uint32{30, 5} || !r.KeepFrags {
			t.Errorf("Age = %v, KeepFrags = %v", r.Age, r.KeepFrags)
		}
	})
	t.Run("log level", func(t *testing.T) {
		r := parseOne(t, "block in log body level security.emerg all")
		if !r.HasLog || !r.Log.Body || !r.Log.HasLevel || r.Log.Facility != FacSecurity || r.Log.Priority != PriEmerg {
			t.Errorf("Log = %+v", r.Log)
		}
	})
	t.Run("inline pool", func(t *testing.T) {
		r := parseOne(t, "pass in from pool=(!1.1.1.1,2.2.0.0/16) to hash=(3.3.3.3)")
		if r.From.Addr.Kind != AddrPool || len(r.From.Addr.Inline) != 2 || !r.From.Addr.Inline[0].Negate ||
			r.From.Addr.Inline[1].Mask != v4("255.255.0.0") || r.To.Addr.Kind != AddrHash || len(r.To.Addr.Inline) != 1 {
			t.Errorf("From=%+v To=%+v", r.From.Addr, r.To.Addr)
		}
		want := "table role=ipf type=tree number=\n\t{ 2.2.0.0/16; ! 1.1.1.1/32; };\ntable role=ipf type=hash number= size=1\n\t{ 3.3.3.3/32; };\n"
		if got := FormatInlineTables(r); got != want {
			t.Errorf("FormatInlineTables = %q, want %q", got, want)
		}
	})
	t.Run("route targets and call", func(t *testing.T) {
		r := parseOne(t, "call now dstgrpmap/200 in on le0 dup-to qe0:fe80::1 all")
		if r.Action != ActionCall || !r.Call.Now || r.Call.Func != "dstgrpmap" || r.Call.Arg != 200 {
			t.Errorf("Call = %+v", r.Call)
		}
		if r.DupTo == nil || r.DupTo.Iface != "qe0" || r.DupTo.NextHop != netip.MustParseAddr("fe80::1") || r.Family != FamilyInet6 {
			t.Errorf("DupTo = %+v, Family = %d", r.DupTo, r.Family)
		}
	})
	t.Run("icmp and flags", func(t *testing.T) {
		r := parseOne(t, "pass in proto icmp all icmp-type unreach code needfrag")
		if !r.HasICMPType || r.ICMPType != 3 || !r.HasICMPCode || r.ICMPCodeMatch != 4 {
			t.Errorf("icmp = %v %d %v %d", r.HasICMPType, r.ICMPType, r.HasICMPCode, r.ICMPCodeMatch)
		}
		r = parseOne(t, "pass in proto tcp all flags SA/SAFR")
		if r.Flags != TCPSyn|TCPAck || r.FlagsMask != TCPSyn|TCPAck|TCPFin|TCPRst {
			t.Errorf("flags = %#x/%#x", r.Flags, r.FlagsMask)
		}
	})
	t.Run("exp", func(t *testing.T) {
		r := parseOne(t, `pass in exp { "ip.src != 1.1.1.0/24; tcp.dport = 80,http;" }`)
		want := []ExprClause{
			{Field: "ip.src", Not: true, Values: []ExprValue{{IP: v4("1.1.1.0"), Mask: v4("255.255.255.0")}}},
			{Field: "tcp.dport", Values: []ExprValue{{Num: 80}, {Num: 80}}},
		}
		if d := cmp.Diff(want, r.Expr, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Errorf("Expr (-want +got):\n%s", d)
		}
	})
	t.Run("settings", func(t *testing.T) {
		c, err := ParseConfig("t", []byte("set state_max 100;\nset log_all true\npass in all"), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []Setting{{Pos: Pos{"t", 1, 1}, Name: "state_max", Value: "100"}, {Pos: Pos{"t", 2, 1}, Name: "log_all", Value: "true"}}
		if d := cmp.Diff(want, c.Settings); d != "" || len(c.Rules) != 1 {
			t.Errorf("Settings (-want +got):\n%s (rules %d)", d, len(c.Rules))
		}
	})
	t.Run("list expansion keeps positions and clones", func(t *testing.T) {
		rules, err := Parse("t", []byte("\n  pass in on {a,b} from pool=(1.1.1.1) to any"), ParseOptions{})
		if err != nil || len(rules) != 2 {
			t.Fatalf("got %d rules, %v", len(rules), err)
		}
		if rules[0].Pos != (Pos{"t", 2, 3}) || rules[1].Pos != rules[0].Pos {
			t.Errorf("positions %v %v", rules[0].Pos, rules[1].Pos)
		}
		rules[0].From.Addr.Inline[0].Negate = true
		if rules[1].From.Addr.Inline[0].Negate {
			t.Error("expanded rules share their inline table")
		}
	})
}

// TestErrors checks error messages, positions, resynchronisation and the
// error limit.

// The parser's two ordering errors, as IPFilter's grammar puts them.
const (
	familyOrder = "out of place: IPFilter's grammar takes a rule's family, tos, ttl and proto once each, in that order (an exp or bpf rule no tos, ttl or proto)"
	tailOrder   = "out of place: IPFilter's grammar takes the end of a rule in the order with, keep, head, group, set-tag, match-tag, pps, age, rule-ttl, comment, each once (keep may repeat)"
)

func TestErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		rules    int
	}{
		{"missing direction", "pass", []string{`t:1:5: expected in or out, found end of file`}, 0},
		{"bad action", "bogus in all", []string{`t:1:1: expected action (pass, block, log, count, ...), found "bogus"`}, 0},
		{"prefix too long", "pass in from 1.2.3.4/33 to any", []string{`t:1:22: expected prefix length 0-32, found "33"`}, 0},
		{"unknown host", "pass in from nosuchhost to any", []string{`t:1:14: unknown host "nosuchhost"`}, 0},
		{"trailing junk", "pass in all all", []string{`t:1:13: expected end of rule, found "all"`}, 0},
		{"resync keeps later rules", "pass in all\npass in from 1.2.3.4/99\nblock out all", []string{`t:2:22: expected prefix length 0-32, found "99"`}, 2},
		{"unknown variable", "pass in on $nope all", []string{`t:1:12: unknown variable $nope`}, 0},
		{"error inside variable points at $", "x=\"in bogus\";\npass $x", []string{`t:2:6: expected end of rule, found "bogus"`}, 0},
		{"recursive variable", "a=\"x $a\";\npass in on $a all", []string{`t:2:12: variable $a refers to itself`}, 0},
		{"unterminated string", "pass in all comment \"abc", []string{`t:1:21: unterminated string`}, 0},
		{"unknown service", "pass in proto tcp from any to any port = nosuch", []string{`t:1:42: unknown service "nosuch"`}, 0},
		{"bad with attr", "pass in all with frobnicate", []string{`t:1:18: expected with attribute, found "frobnicate"`}, 0},
		{"v6hdr in a rule without IPv6", "pass in all with v6hdr frag", []string{`t:1:18: v6hdr only available with IPv6 (an inet6 rule, an IPv6 address or -6)`}, 0},
		{"v6hdr in an inet rule", "pass in inet from 1.1.1.1 to any with v6hdr esp", []string{`t:1:39: v6hdr only available with IPv6 (an inet6 rule, an IPv6 address or -6)`}, 0},
		{"main: tos after ttl", "pass in on nic0 ttl 4 tos 3 all", []string{`t:1:23: "tos" ` + familyOrder}, 0},
		{"main: tos after proto", "pass in proto tcp tos 3 all", []string{`t:1:19: "tos" ` + familyOrder}, 0},
		{"main: family after tos", "pass in tos 3 inet all", []string{`t:1:15: "inet" ` + familyOrder}, 0},
		{"main: proto twice", "pass in proto tcp proto udp all", []string{`t:1:19: "proto" ` + familyOrder}, 0},
		{"main: exp after tos", "pass in tos 3 exp { \"ip.src = 10.1.0.0/16;\" }", []string{`t:1:15: "exp" ` + familyOrder}, 0},
		{"port comparison in an icmp rule", "pass in proto icmp from any port = 5 to any", []string{`t:1:34: port use incorrect: a port comparison needs proto tcp, udp or tcp/udp`}, 0},
		{"strict in a udp rule", "pass in proto udp all keep state (strict)", []string{`t:1:1: keep state (strict, loose, newisn) needs proto tcp`}, 0},
		{"newisn in a tcp/udp rule", "pass in proto tcp/udp all keep state (newisn)", []string{`t:1:1: keep state (strict, loose, newisn) needs proto tcp`}, 0},
		{"tail: with after keep", "pass in all keep state with ipopts", []string{`t:1:24: "with" ` + tailOrder}, 0},
		{"tail: head after group", "pass in all group 10 head 11", []string{`t:1:22: "head" ` + tailOrder}, 0},
		{"tail: keep after head", "pass in all head 1 keep frags", []string{`t:1:20: "keep" ` + tailOrder}, 0},
		{"tail: with twice", "pass in all with ipopts with short", []string{`t:1:25: "with" ` + tailOrder}, 0},
		{"tail: and after with", "pass in all with opt lsrr and not opt ssrr", []string{`t:1:27: "and" ` + tailOrder}, 0},
		{"tail: group twice", "pass in all group 1 group 2", []string{`t:1:21: "group" ` + tailOrder}, 0},
		{"tail: keep after set-tag", "pass out all set-tag(nat=1) keep state", []string{`t:1:29: "keep" ` + tailOrder}, 0},
		{"tail: set-tag after match-tag", "pass in all match-tag(nat=1) set-tag(log=1)", []string{`t:1:30: "set-tag" ` + tailOrder}, 0},
		{"tail: group after pps", "pass in all pps 3 group 1", []string{`t:1:19: "group" ` + tailOrder}, 0},
		{"tail: pps after age", "pass in all age 3 pps 3", []string{`t:1:19: "pps" ` + tailOrder}, 0},
		{"tail: age after rule-ttl", "pass in all rule-ttl 3 age 3", []string{`t:1:24: "age" ` + tailOrder}, 0},
		{"tail: rule-ttl after comment", "pass in all comment \"x\" rule-ttl 3", []string{`t:1:25: "rule-ttl" ` + tailOrder}, 0},
		{"mixed families", "pass in from 1.1.1.1 to ::1", []string{`t:1:1: rule mixes IPv4 and IPv6 addresses`}, 0},
		{"bad set", "set state_max many;", []string{`t:1:15: expected number, true or false, found "many"`}, 0},
		{"set-tag nat on in rule", "pass in all set-tag(nat=x)", []string{`t:1:21: expected log=, found "nat"`}, 0},
		{"match-tag nat on out rule", "pass out all match-tag(nat=x)", []string{`t:1:24: expected log=, found "nat"`}, 0},
		{"ipv4 address in inet6 mode", "pass in from 1.2.3.4 to any", []string{`t:1:1: address family does not match the rule's family`}, 0},
		{"flags that never match", "pass in proto tcp all flags S/0", []string{`t:1:31: flags S/0 can never match`}, 0},
		{"bad flags", "pass in proto tcp all flags SZ", []string{`t:1:29: expected TCP flags, found "SZ"`}, 0},
		{"flags on an all rule", "pass in all flags S", []string{`t:1:13: flags with non-ipf type rule`}, 0},
		{"flags without proto tcp", "pass in proto udp from any to any flags S", []string{`t:1:35: flags with non-TCP rule`}, 0},
		{"flags on tcp/udp", "pass in proto tcp/udp all flags S", []string{`t:1:27: flags with non-TCP rule`}, 0},
		{"icmp-type with tcp", "pass in proto tcp all icmp-type 8", []string{`t:1:23: proto not icmp`}, 0},
		// without a protocol IPFilter takes it after `all` only
		{"icmp-type without proto after from/to", "pass in from any to any icmp-type 8", []string{`t:1:25: proto not icmp`}, 0},
		{"icmpv6 type without proto after from/to", "pass in inet6 from any to any icmp-type 128", []string{`t:1:31: proto not ipv6-icmp`}, 0},
		{"icmpv6 type without inet6", "pass in proto ipv6-icmp all icmp-type 128", []string{`t:1:29: proto not icmp`}, 0},
		{"icmp type with inet6", "pass in inet6 proto icmp all icmp-type 8", []string{`t:1:30: proto not ipv6-icmp`}, 0},
		{"icmp type in inet6 mode", "pass in proto icmp all icmp-type 8", []string{`t:1:24: proto not ipv6-icmp`}, 0},
		{"via without on", "block out in-via nic0 all", []string{`t:1:11: expected on before in-via, found "in-via"`}, 0},
		{"via after quick", "pass in on nic1 quick out-via nic2 all", []string{`t:1:23: expected in-via or out-via right after the on clause, once, found "out-via"`}, 0},
		{"second via", "pass in on nic1 in-via nic2 out-via nic3 all", []string{`t:1:29: expected in-via or out-via right after the on clause, once, found "out-via"`}, 0},
		{"icmpv6 is no /etc/protocols name", "pass in proto icmpv6 all", []string{`t:1:15: unknown protocol "icmpv6"`}, 0},
		{"strict and loose", "pass in proto tcp all keep state (strict,loose)", []string{`t:1:42: expected state option other than loose, found "loose"`}, 0},
		{"not after an option list", "log in all with opt mtur,not ipopts", []string{`t:1:26: expected IP option name, found "not"`}, 0},
		// IPFilter cuts group names to 15 characters, which merged these two
		{"group name too long", "pass in all head abcdefghijklmnop1\npass in all head abcdefghijklmnop2",
			[]string{`t:1:18: group name "abcdefghijklmnop1" is longer than 15 characters (IPFilter's FR_GROUPLEN); it would merge with any group of the same first 15`,
				`t:2:18: group name "abcdefghijklmnop2" is longer than 15 characters (IPFilter's FR_GROUPLEN); it would merge with any group of the same first 15`}, 0},
		{"interface name too long", "pass in on abcdefghijklmnopq all", []string{`t:1:12: interface name "abcdefghijklmnopq" is longer than 15 characters (IFNAMSIZ)`}, 0},
		{"interface list name too long", "pass in on { eth0, abcdefghijklmnopq } all", []string{`t:1:20: interface name "abcdefghijklmnopq" is longer than 15 characters (IFNAMSIZ)`}, 0},
		{"route interface too long", "pass in on eth0 to abcdefghijklmnopq:1.2.3.4 from any to any", []string{`t:1:20: interface name "abcdefghijklmnopq" is longer than 15 characters (IFNAMSIZ)`}, 0},
		{"interface name of 15", "pass in on abcdefghijklmno all", nil, 1},
		// IPFilter's lexer makes a number of it; `from 0` could then name the interface or 0.0.0.0
		{"interface name of digits", "block return-icmp(0) in on 0 from 0", []string{`t:1:28: expected interface name, found "0"`}, 0},
		{"interface name starting with a digit", "pass in on 0a all", nil, 1},
		// a NUL would otherwise join "pass", "in", ... into one word
		{"NUL byte", "pass\x00in all", []string{`t:1:5: unexpected control character 0x00`}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := ParseOptions{Inet6: strings.Contains(tc.name, "inet6 mode")}
			rules, err := Parse("t", []byte(tc.in), opts)
			var got []string
			if el, ok := err.(ErrorList); ok {
				for _, e := range el {
					got = append(got, e.Error())
				}
			} else if err != nil {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
			if len(rules) != tc.rules {
				t.Errorf("got %d rules, want %d", len(rules), tc.rules)
			}
		})
	}
	t.Run("at most ten errors", func(t *testing.T) {
		src := strings.Repeat("bogus\n", 25)
		_, err := Parse("t", []byte(src), ParseOptions{})
		el, ok := err.(ErrorList)
		if !ok || len(el) != maxErrors {
			t.Fatalf("got %v errors (%T), want %d", len(el), err, maxErrors)
		}
		if el[9].Pos.Line != 10 {
			t.Errorf("10th error on line %d, want 10", el[9].Pos.Line)
		}
	})
}

// BenchmarkParse measures parsing a realistic rule file (examples/ipf/web-server.conf).
func BenchmarkParse(b *testing.B) {
	src, err := os.ReadFile(examplesDir + "/web-server.conf")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse("web-server.conf", src, ParseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseBlocklist measures parsing a large generated blocklist
// (the shape of a million-rule file), per rule.
func BenchmarkParseBlocklist(b *testing.B) {
	var sb strings.Builder
	const n = 20000
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&sb, "block in from 198.18.%d.%d/32 to any\nblock out from any to 198.18.%d.%d/32\n", i>>8&255, i&255, i>>8&255, i&255)
	}
	src := sb.String()
	// serial is one pass; pieces is what ParseConfig does with a file
	// past bigFile on a machine of GOMAXPROCS cores (the ratio of the
	// two is the gain); general is serial without fastRule (the ratio
	// of serial to it is fastRule's gain)
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, _, err := parseWith("blocklist.conf", src, ParseOptions{NoResolve: true}, true, true); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/rule")
	})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := parseSerial("blocklist.conf", src, ParseOptions{NoResolve: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/rule")
	})
	b.Run("pieces", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(src)))
		cuts := splitPoints(src, runtime.GOMAXPROCS(0))
		for b.Loop() {
			if _, ok := parseSplit("blocklist.conf", src, ParseOptions{NoResolve: true}, cuts); !ok && len(cuts) > 0 {
				b.Fatal("not parsed in pieces")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/rule")
	})
}

// BenchmarkFormatRule measures printing one rule (ipfstat -io, ipftest -D).
func BenchmarkFormatRule(b *testing.B) {
	rules, err := Parse("b", []byte("pass in quick on le0 proto tcp from 10.0.0.0/8 port > 1023 to any port = 80 flags S/SA keep state (limit 100) group 100"), ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = FormatRule(rules[0])
	}
}

// BenchmarkFormatBlocklist measures printing a blocklist's rules, as a
// million-rule load prints each one for ipfstat (per rule).
func BenchmarkFormatBlocklist(b *testing.B) {
	var sb strings.Builder
	const n = 2000
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&sb, "block in from 198.18.%d.%d/32 to any\nblock out quick on eth0 from any to 198.18.%d.0/24 group 1\n", i>>8&255, i&255, i&255)
	}
	rules, err := Parse("blocklist.conf", []byte(sb.String()), ParseOptions{NoResolve: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range rules {
			_ = FormatRule(r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/rule")
}

// parseIPv4Split is parseIPv4's dotted form as first written (Split and
// ParseUint), the reference the in-place version must agree with.
func parseIPv4Split(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, x := range parts {
		v, err := strconv.ParseUint(x, 10, 8)
		if err != nil {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	return netip.AddrFrom4(b), true
}

func TestParseIPv4Dotted(t *testing.T) {
	cases := []string{"1.2.3.4", "10.1", "10.1.2", "0.0.0.0", "255.255.255.255", "256.1.1.1",
		"1.2.3.4.5", "1..2.3", "1.2.3.", "01.002.0003.4", "1.2.3.+4", "1.2.3.-4", "1.2.3.4x",
		"1.2.3.0255", "1.2.3.00000000000000000000001", "1.2.3.99999999999999999999", "1_0.2.3.4", "9."}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		var sb strings.Builder
		sb.WriteByte(byte('0' + rng.Intn(10)))
		for k := rng.Intn(12); k > 0; k-- {
			sb.WriteByte("0123456789.x+"[rng.Intn(13)])
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		got, gok := parseIPv4(s)
		want, wok := parseIPv4Split(s)
		if strings.Contains(s, ".") && (got != want || gok != wok) {
			t.Errorf("parseIPv4(%q) = %v %v, want %v %v", s, got, gok, want, wok)
		}
	}
}

// TestParseBigFile parses a file past bigFile (the blocklist path: the
// rules slice sized from the lines): every rule is there, in order.
func TestParseBigFile(t *testing.T) {
	var sb strings.Builder
	n := 0
	for sb.Len() <= bigFile {
		fmt.Fprintf(&sb, "block in from 198.%d.%d.%d/32 to any # %d\n", 18+n>>16&1, n>>8&255, n&255, n)
		n++
	}
	rules, err := Parse("big.conf", []byte(sb.String()), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != n {
		t.Fatalf("%d rules, want %d", len(rules), n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		want := fmt.Sprintf("block in inet from 198.%d.%d.%d/32 to any", 18+i>>16&1, i>>8&255, i&255)
		if got := FormatRule(rules[i]); got != want || rules[i].Pos.Line != i+1 {
			t.Errorf("rule %d: %q at line %d, want %q at line %d", i, got, rules[i].Pos.Line, want, i+1)
		}
	}
}
