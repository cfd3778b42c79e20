package ipfctl

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// A program the verifier refuses is reported as the verifier's refusal
// (EACCES too), not as missing privileges.
func TestPermissionHintNotForVerifier(t *testing.T) {
	err := fmt.Errorf("load: %w", &ebpf.VerifierError{Cause: fs.ErrPermission, Log: []string{"combined stack size of 5 calls is 528. Too large"}})
	if got := permissionHint(err).Error(); strings.Contains(got, "needs root") {
		t.Errorf("verifier refusal explained as privileges: %s", got)
	}
	if got := permissionHint(fmt.Errorf("open: %w", fs.ErrPermission)).Error(); !strings.Contains(got, "needs root") {
		t.Errorf("permission error lost its hint: %s", got)
	}
}
