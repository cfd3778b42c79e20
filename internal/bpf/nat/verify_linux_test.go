//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"

	"sluice/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process for one
// program here. The kernel's limit is a million; the same object needs
// about twice the instructions on one host as on another (session 19:
// Linux 6.18.44 refused what an earlier host verified in under 500 000).
// natv20 brought the slow programs from 456 259 to 251 692 on Linux
// 6.18.44 (the clash check and the ICMP error's rewrite are functions
// verified once, docs/datapath-cost.md "NAT's verifier budget"); the bound
// is that plus a margin of about 20 %, so that a change which adds a fifth
// shows up here, with the numbers, well before a kernel refuses the load.
const verifierBudget = 300000

// TestPrivilegedVerifierBudget loads the programs and checks that each is
// verified within verifierBudget instructions.
func TestPrivilegedVerifierBudget(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	var objs natObjects
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		t.Fatalf("%+v", ve)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	re := regexp.MustCompile(`processed (\d+) insns`)
	for name, p := range map[string]*ebpf.Program{"nat_ingress": objs.NatIngress, "nat_egress": objs.NatEgress, "nat_flush": objs.NatFlush,
		"nat_egress_pre": objs.NatEgressPre, "nat_slow_ingress": objs.NatSlowIngress, "nat_slow_egress": objs.NatSlowEgress,
		"nat_slow_egress_pre": objs.NatSlowEgressPre} {
		m := re.FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Errorf("%s: no statistics in the verifier log %q", name, p.VerifierLog)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		t.Logf("%s: %d instructions processed by the verifier", name, n)
		if n > verifierBudget {
			t.Errorf("%s: the verifier processed %d instructions, over the %d allowed (the kernel's limit: 1 000 000)", name, n, verifierBudget)
		}
	}
}
