// Package testutil holds helpers shared by tests across Sluice's packages.
package testutil

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true), where every
// privilege and kernel feature the tests need is promised to exist, so a
// missing one is a failure, not a reason to skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test with the given reason, except under CI, where
// it fails it: in CI a missing capability means a broken machine or a
// broken .ci/run, and silently skipping would hide it.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true and a required capability is missing: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot makes a privileged test run only as root (see SkipOrFail).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root")
	}
}
