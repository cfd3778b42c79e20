package nat

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

func TestVerifierScratch(t *testing.T) {
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
	for n, p := range map[string]*ebpf.Program{"in": objs.NatIngress, "out": objs.NatEgress, "flush": objs.NatFlush} {
		info, _ := p.Info()
		_ = info
		t.Logf("%s loaded; verifier log: %s", n, p.VerifierLog)
	}
	objs.Close()
}
