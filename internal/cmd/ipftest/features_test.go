package ipftest

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// runWith runs ipftest with rules on stdin and input served as file "in".
func runWith(t *testing.T, rules, input string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{
		Args:   append(args, "-r", "-", "-i", "in"),
		Stdin:  strings.NewReader(rules),
		Stdout: &out, Stderr: &errb,
		Open: func(string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(input)), nil },
	}
	if rc := Main(env); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	return out.String()
}

// TestFilterFeatures runs rule kinds the kit holds few cases of through
// the whole ipftest path; expected verdicts follow ipf-reference §1.3.
func TestFilterFeatures(t *testing.T) {
	const udpHex = "4500 001c 0000 0000 3f11 0000 0102 0304\n0a01 0101 0001 0002 0008 0000\n\n"
	tests := []struct {
		name, rules, input string
		args               []string
		want               string
	}{
		{"interface address from hex header",
			"block in on nic0 from any to (nic0)\n",
			"[in,nic0=10.1.1.1]\n" + udpHex + "[in,nic0]\n" + strings.Replace(udpHex, "0a01 0101", "0a01 0102", 1),
			[]string{"-F", "hex", "-b"}, "block\nnomatch\n"},
		{"IF/broadcast is the address in ipftest",
			"pass in on nic0 from any to nic0/broadcast\n",
			"in on nic0=10.1.1.1 udp 1.2.3.4,1 10.1.1.1,2\nin on nic0 udp 1.2.3.4,1 10.1.1.255,2\n",
			[]string{"-F", "text", "-b"}, "pass\nnomatch\n"},
		{"first address sticks",
			"pass in on nic0 from any to (nic0)\n",
			"in on nic0=10.1.1.1 udp 1.2.3.4,1 10.1.1.1,2\nin on nic0=10.1.1.2 udp 1.2.3.4,1 10.1.1.2,2\n",
			[]string{"-F", "text", "-b"}, "pass\nnomatch\n"},
		{"nic line assigns an address",
			"pass in on nic0 from any to (nic0)\n",
			"nic nic0=10.1.1.1\nin on nic0 udp 1.2.3.4,1 10.1.1.1,2\n",
			[]string{"-F", "text", "-b"}, "pass\n"},
		{"interface names are case sensitive",
			"block in on nic0 all\n",
			"in on NIC0 udp 1.2.3.4,1 10.1.1.1,2\nin on nic0 udp 1.2.3.4,1 10.1.1.1,2\n",
			[]string{"-F", "text", "-b"}, "nomatch\nblock\n"},
		{"exp rule",
			"block in exp { \"ip.p = tcp; tcp.dport = 80;\" }\n",
			"in tcp 1.1.1.1,1 2.2.2.2,80 S\nin tcp 1.1.1.1,1 2.2.2.2,81 S\nin udp 1.1.1.1,1 2.2.2.2,80\n",
			[]string{"-F", "text", "-b"}, "block\nnomatch\nnomatch\n"},
		{"state bucket full",
			"pass in proto udp all keep state\n",
			"in udp 1.1.1.1,1 2.2.2.2,2\nin udp 1.1.1.2,1 2.2.2.2,2\nout udp 2.2.2.2,2 1.1.1.1,1\n",
			[]string{"-T", "state_size=1", "-T", "state_maxbucket=1", "-F", "text", "-b"}, "pass\nblock\npass\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runWith(t, tt.rules, tt.input, tt.args...); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
