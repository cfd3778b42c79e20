package bpf

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

func TestDbgLoad(t *testing.T) {
	_, err := Load(Options{NoPin: true})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			os.WriteFile("/tmp/sl/verifier.log", []byte(fmt.Sprintf("%-80v", ve)), 0o644)
		}
		t.Fatal("failed")
	}
}
