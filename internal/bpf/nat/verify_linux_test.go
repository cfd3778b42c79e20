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

// TestPrivilegedVerifierBudget loads the programs and checks that each is
// verified within half of the kernel's one-million-instruction budget, so
// that a change which makes verification explode shows up here, with the
// numbers, before it makes the load fail.
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
		if n > 500000 {
			t.Errorf("%s: the verifier processed %d instructions, over half its budget", name, n)
		}
	}
}
